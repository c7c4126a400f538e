package main

import (
	"context"
	"log/slog"

	"github.com/agentmesh/agentmesh/pkg/runner/runnerservice"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// transports are those of the adapters this runner hosts: the agent CLIs,
// each a child process, and the fixture, which needs no transport and lets
// a deployment be tried offline.
var transports = []wire.Transport{wire.TransportSubprocess, wire.TransportInProcess}

// Config is the subprocess-runner's configuration.
type Config struct {
	runnerservice.Config
}

// Validate names each bad variable, and every adapter named that is not a
// CLI or the fixture.
func (c Config) Validate() error { return c.Check(transports...) }

// run executes work until ctx ends.
func run(ctx context.Context, cfg Config, log *slog.Logger) error {
	return runnerservice.Run(ctx, "agentmesh-subprocess-runner", transports, cfg.Config, log)
}
