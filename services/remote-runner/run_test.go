package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	s := natstest.RunJetStream(t)
	var cfg Config
	servicetest.Load(t, &cfg, &cfg.Config.Config, s.ClientURL(), map[string]string{"AGENTMESH_RUNNER_ID": "runner-under-test"})
	meshtest.CheckRunner(t, s, "runner-under-test", func(ctx context.Context, log *slog.Logger) error { return run(ctx, cfg, log) })
}

func TestConfig(t *testing.T) {
	servicetest.CheckConfigs(t, []servicetest.ConfigCase{
		{Name: "defaults", Env: nil, Want: ""},
		{Name: "the model APIs", Env: map[string]string{"AGENTMESH_RUNNER_ADAPTERS": "openai,anthropic,ollama,nlip,fixture"}, Want: ""},
		{Name: "unknown", Env: map[string]string{"AGENTMESH_RUNNER_ADAPTERS": "fixture,claude"}, Want: `AGENTMESH_RUNNER_ADAPTERS: unknown adapter "claude"`},
		{Name: "a CLI", Env: map[string]string{"AGENTMESH_RUNNER_ADAPTERS": "openai,claude-code"}, Want: `AGENTMESH_RUNNER_ADAPTERS: adapter "claude-code" has transport subprocess, which this runner does not host`},
		{Name: "max active of a CLI", Env: map[string]string{"AGENTMESH_RUNNER_MAX_ACTIVE": "pi:2"}, Want: `AGENTMESH_RUNNER_MAX_ACTIVE: adapter "pi" has transport subprocess`},
		{Name: "drain", Env: map[string]string{"AGENTMESH_RUNNER_DRAIN_TIMEOUT": "-1s"}, Want: "AGENTMESH_RUNNER_DRAIN_TIMEOUT: must be > 0"},
	}, func() (any, *service.Config) { var cfg Config; return &cfg, &cfg.Config.Config })
}
