// Command router consumes run requests from AGENTMESH_SUBMIT, validates and
// routes them to the runner pools, and answers cancel requests. It is
// configured by AGENTMESH_* environment variables; -h lists them.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/agentmesh/agentmesh/pkg/service"
)

func main() {
	var cfg Config
	os.Exit(service.Main("router", &cfg, &cfg.Config, func(ctx context.Context, log *slog.Logger) error {
		return run(ctx, cfg, log)
	}))
}
