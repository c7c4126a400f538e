// Command exporter will turn finished, consented runs into redacted,
// content-addressed trajectories (DESIGN §7). Export is not built yet: the
// exporter connects, ensures the topology, registers itself with the NATS
// services framework, serves metrics and health, and waits for shutdown.
// It is configured by AGENTMESH_* environment variables; -h lists them.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/agentmesh/agentmesh/pkg/serve"
)

func main() {
	var cfg Config
	os.Exit(serve.Main("exporter", &cfg, &cfg.Config, func(ctx context.Context, log *slog.Logger) error {
		return run(ctx, cfg, log)
	}))
}
