package runnerservice_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
)

// TestServiceRunThroughTLSAndNkey runs each runner binary's run function,
// its configuration loaded from the environment as its main does, against
// a server that requires TLS with a client certificate and an nkey: it
// starts with the AGENTMESH_NATS_* files and executes a run that the rest
// of the mesh, on the same credentials, routes.
func TestServiceRunThroughTLSAndNkey(t *testing.T) {
	for _, tc := range services {
		t.Run(tc.svc.Name, func(t *testing.T) {
			srv, sec := natstest.RunSecure(t)
			spec := tc.svc.NewSpec()
			env := servicetest.SecureEnv(sec)
			env["AGENTMESH_RUNNER_ID"] = "runner-under-test"
			servicetest.Load(t, spec, spec.Common(), srv.ClientURL(), env)
			p := servicetest.Start(t, func(ctx context.Context, log *slog.Logger) error {
				return tc.svc.Run(ctx, spec.Config, log)
			})
			p.Log(t, "runner started")

			common := spec.Config.Config
			common.HTTPAddr, common.ShutdownTimeout = "", 10*time.Second
			d := meshtest.StartWith(t, common, mesh.Config{WithoutRunner: true})
			meshtest.Complete(t, d.NC, "executed through TLS and an nkey")
			p.Stop(t)
		})
	}
}
