// Package service provides what every agentmesh service process shares:
// Main, the whole of a service's main function (environment configuration
// read and checked, logging, signals); Start, which connects to NATS,
// ensures the topology and serves the Prometheus metrics of the mesh on
// /metrics with /healthz and /readyz, and whose Infra.Close shuts that down;
// and registration with the NATS services framework.
package service
