package runnerservice_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
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
			servicetest.Load(t, spec, spec.Common(), srv.ClientURL(), map[string]string{
				"AGENTMESH_RUNNER_ID":            "runner-under-test",
				"AGENTMESH_NATS_NKEY":            sec.Seed,
				"AGENTMESH_NATS_TLS_CA":          sec.CA,
				"AGENTMESH_NATS_TLS_CERT":        sec.ClientCert,
				"AGENTMESH_NATS_TLS_KEY":         sec.ClientKey,
				"AGENTMESH_NATS_TLS_SERVER_NAME": natstest.SecureServerName,
			})
			p := servicetest.Start(t, func(ctx context.Context, log *slog.Logger) error {
				return tc.svc.Run(ctx, spec.Config, log)
			})
			p.Log(t, "runner started")

			common := spec.Config.Config
			common.HTTPAddr, common.ShutdownTimeout = "", 10*time.Second
			infra, err := service.Start(context.Background(), "meshtest", common, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { infra.Close() })
			adapters, err := catalog.Dirs{}.Registry(profile.Builtin())
			if err != nil {
				t.Fatal(err)
			}
			meshtest.Serve(t, infra.Deps, profile.Builtin(), adapters, mesh.Config{Topology: common.Topology(), WithoutRunner: true}, 20*time.Second)
			meshtest.Complete(t, infra.Deps.NC, "executed through TLS and an nkey")
			p.Stop(t)
		})
	}
}
