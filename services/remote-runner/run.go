package main

import (
	"context"
	"log/slog"

	"github.com/agentmesh/agentmesh/pkg/serve"
	"github.com/agentmesh/agentmesh/pkg/service"
)

// Config is the remote-runner's configuration.
type Config struct {
	service.Config
	serve.RunnerConfig
}

// run executes work until ctx ends.
func run(ctx context.Context, cfg Config, log *slog.Logger) error {
	return serve.RunRunner(ctx, "agentmesh-remote-runner", cfg.Config, cfg.RunnerConfig, log)
}
