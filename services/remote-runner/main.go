// Command remote-runner executes runs for the adapters named in
// AGENTMESH_RUNNER_ADAPTERS, pulling work from the pools' shared consumers on
// AGENTMESH_WORK. It is the host for the remote adapters (model APIs, NLIP);
// until they exist it hosts the in-process fixture adapter. It is
// configured by AGENTMESH_* environment variables; -h lists them.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/agentmesh/agentmesh/pkg/serve"
)

func main() {
	var cfg Config
	os.Exit(serve.Main("remote-runner", &cfg, &cfg.Config, func(ctx context.Context, log *slog.Logger) error {
		return run(ctx, cfg, log)
	}))
}
