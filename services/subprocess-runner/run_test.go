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
	var cfg Config
	servetest.Load(t, &cfg, &cfg.Config, s.ClientURL(), map[string]string{"AGENTMESH_RUNNER_ID": "runner-under-test"})
	servetest.CheckRunner(t, s, "runner-under-test", func(ctx context.Context, log *slog.Logger) error { return run(ctx, cfg, log) })
}

func TestConfig(t *testing.T) {
	var cfg Config
	t.Setenv("AGENTMESH_RUNNER_ADAPTERS", "fixture,claude")
	servetest.CheckConfig(t, &cfg, &cfg.Config, "AGENTMESH_RUNNER_ADAPTERS")
}
