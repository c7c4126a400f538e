package main

import (
	"context"
	"log/slog"

	"github.com/agentmesh/agentmesh/pkg/runner/runnerservice"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// transports are those of the adapters this runner hosts: the model APIs,
// reached over HTTP, and the fixture, which needs no transport and lets a
// deployment be tried offline.
var transports = []wire.Transport{wire.TransportRemote, wire.TransportInProcess}

// Config is the remote-runner's configuration.
type Config struct {
	runnerservice.Config
}

// Validate names each bad variable, and every adapter named that is not a
// model API or the fixture.
func (c Config) Validate() error { return c.Check(transports...) }

// run executes work until ctx ends.
func run(ctx context.Context, cfg Config, log *slog.Logger) error {
	return runnerservice.Run(ctx, "agentmesh-remote-runner", transports, cfg.Config, log)
}
