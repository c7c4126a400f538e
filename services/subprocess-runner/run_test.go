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
		{Name: "the CLIs", Env: map[string]string{"AGENTMESH_RUNNER_ADAPTERS": "claude-code,codex,gemini,pi,fixture"}, Want: ""},
		{Name: "unknown", Env: map[string]string{"AGENTMESH_RUNNER_ADAPTERS": "fixture,claude"}, Want: `AGENTMESH_RUNNER_ADAPTERS: unknown adapter "claude"`},
		{Name: "a model API", Env: map[string]string{"AGENTMESH_RUNNER_ADAPTERS": "claude-code,openai"}, Want: `AGENTMESH_RUNNER_ADAPTERS: adapter "openai" has transport remote, which this runner does not host`},
		{Name: "max active of a model API", Env: map[string]string{"AGENTMESH_RUNNER_MAX_ACTIVE": "anthropic:2"}, Want: `AGENTMESH_RUNNER_MAX_ACTIVE: adapter "anthropic" has transport remote`},
		{Name: "ack wait", Env: map[string]string{"AGENTMESH_RUNNER_ACK_WAIT": "10ms"}, Want: "AGENTMESH_RUNNER_ACK_WAIT: must be at least 1s"},
		{Name: "id", Env: map[string]string{"AGENTMESH_RUNNER_ID": "a.b"}, Want: "AGENTMESH_RUNNER_ID: "},
	}, func() (any, *service.Config) { var cfg Config; return &cfg, &cfg.Config.Config })
}
