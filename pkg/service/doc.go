// Package service provides what every agentmesh service process shares: the
// common environment configuration, the NATS connection and topology
// bootstrap, the Prometheus metrics of the mesh, the /metrics, /healthz and
// /readyz HTTP server, and registration with the NATS services framework.
package service
