package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/serve/servetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	s := natstest.RunJetStream(t)
	nc, _ := natstest.Connect(t, s)
	var cfg Config
	servetest.Load(t, &cfg, &cfg.Config, s.ClientURL(), map[string]string{"AGENTMESH_FIXTURE_DIR": "../../testdata/fixture"})
	p := servetest.Start(t, func(ctx context.Context, log *slog.Logger) error { return run(ctx, cfg, log) })

	info := servetest.CheckMicro(t, nc, "agentmesh-router")
	logged, _ := p.Log(t, "router started")["registry_version"].(string)
	if got := info.Metadata["registry_version"]; logged == "" || got != logged {
		t.Errorf("micro metadata registry_version = %q, logged %q; want the same, non-empty", got, logged)
	}
	p.CheckHTTP(t, "agentmesh_lease_expiries_total")
	servetest.Mesh(t, s.ClientURL(), mesh.Config{WithoutRouter: true})
	servetest.Complete(t, nc, "routed by the router service")
	p.Stop(t)
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string // the variable the error names; "" for none
	}{
		{"defaults", nil, ""},
		{"workers", map[string]string{"AGENTMESH_ROUTER_WORKERS": "0"}, "AGENTMESH_ROUTER_WORKERS"},
		{"ack wait", map[string]string{"AGENTMESH_ROUTER_ACK_WAIT": "10ms"}, "AGENTMESH_ROUTER_ACK_WAIT"},
		{"default deadline", map[string]string{"AGENTMESH_ROUTER_DEFAULT_DEADLINE": "48h"}, "AGENTMESH_ROUTER_DEFAULT_DEADLINE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var cfg Config
			servetest.CheckConfig(t, &cfg, &cfg.Config, tt.want)
		})
	}
}
