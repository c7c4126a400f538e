// Package deploytest checks deploy/nats against the code: it starts a NATS
// server from deploy/nats/cluster.conf (which includes accounts.conf, the
// users and their permissions), overridden to a single loopback node on a
// random port with its store in a temporary directory, runs every service
// of the mesh on its own user and a tenant on tenant-acme, and checks both
// that everything the code does is allowed and that what a user must not do
// is refused by the server with a permission error. It also checks
// deploy/prometheus and deploy/grafana against the service binaries'
// scrapes with promtool (TestMonitoring). It has no API of its own: the
// package is its tests.
package deploytest
