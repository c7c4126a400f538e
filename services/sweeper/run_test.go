package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/serve/servetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	s := natstest.RunJetStream(t)
	nc, _ := natstest.Connect(t, s)
	var cfg Config
	servetest.Load(t, &cfg, &cfg.Config, s.ClientURL(), map[string]string{"AGENTMESH_LEASE_TTL": "3s"})
	p := servetest.Start(t, func(ctx context.Context, log *slog.Logger) error { return run(ctx, cfg, log) })

	if got := servetest.CheckMicro(t, nc, "agentmesh-sweeper").Metadata["lease_ttl"]; got != "3s" {
		t.Errorf("micro metadata lease_ttl = %q, want 3s", got)
	}
	p.CheckHTTP(t, "agentmesh_lease_expiries_total")
	p.Stop(t)
}

func TestConfig(t *testing.T) {
	var cfg Config
	t.Setenv("AGENTMESH_SWEEPER_RECONCILE_EVERY", "1ms")
	servetest.CheckConfig(t, &cfg, &cfg.Config, "AGENTMESH_SWEEPER_RECONCILE_EVERY")
}
