package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	s := natstest.RunJetStream(t)
	nc, _ := natstest.Connect(t, s)
	var cfg Config
	servicetest.Load(t, &cfg, &cfg.Config, s.ClientURL(), map[string]string{"AGENTMESH_LEASE_TTL": "3s"})
	p := servicetest.Start(t, func(ctx context.Context, log *slog.Logger) error { return run(ctx, cfg, log) })

	if got := servicetest.CheckMicro(t, nc, "agentmesh-sweeper").Metadata["lease_ttl"]; got != "3s" {
		t.Errorf("micro metadata lease_ttl = %q, want 3s", got)
	}
	p.CheckHTTP(t, "agentmesh_lease_expiries_total")
	p.Stop(t)
}

func TestConfig(t *testing.T) {
	servicetest.CheckConfigs(t, []servicetest.ConfigCase{
		{Name: "defaults", Env: nil, Want: ""},
		{Name: "reconcile", Env: map[string]string{"AGENTMESH_SWEEPER_RECONCILE_EVERY": "1ms"}, Want: "AGENTMESH_SWEEPER_RECONCILE_EVERY: must be at least 1s"},
		{Name: "exports", Env: map[string]string{"AGENTMESH_SWEEPER_EXPORTS_EVERY": "1ms"}, Want: "AGENTMESH_SWEEPER_EXPORTS_EVERY: must be at least 1s"},
	}, func() (any, *service.Config) { var cfg Config; return &cfg, &cfg.Config })
}
