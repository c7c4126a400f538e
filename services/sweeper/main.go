// Command sweeper ends running runs whose runner stopped renewing its lease:
// they end failed with ProviderTransportError within the lease TTL.
// Trajectory expiry is not built yet. It is configured by AGENTMESH_*
// environment variables; -h lists them.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/agentmesh/agentmesh/pkg/service"
)

func main() {
	var cfg Config
	os.Exit(service.Main("sweeper", &cfg, &cfg.Config, func(ctx context.Context, log *slog.Logger) error {
		return run(ctx, cfg, log)
	}))
}
