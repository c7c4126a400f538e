// Package serve provides the process scaffolding every agentmesh service
// binary shares: Main reads and checks the environment configuration, sets
// up logging and signal handling and runs the service; Start connects to
// NATS, ensures the topology and serves metrics and health, and its Close
// shuts that down again; AdapterConfig and RunnerConfig build the adapters a
// process hosts from configuration.
package serve
