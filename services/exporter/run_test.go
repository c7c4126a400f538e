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
	servetest.Load(t, &cfg, &cfg.Config, s.ClientURL(), nil)
	p := servetest.Start(t, func(ctx context.Context, log *slog.Logger) error { return run(ctx, cfg, log) })

	info := servetest.CheckMicro(t, nc, "agentmesh-exporter")
	if len(info.Endpoints) != 0 {
		t.Errorf("exporter endpoints = %v, want none: export is not built yet", info.Endpoints)
	}
	p.Log(t, "trajectory export is not built yet: the exporter only registers and serves health and metrics")
	p.CheckHTTP(t, "agentmesh_lease_expiries_total")
	p.Stop(t)
}
