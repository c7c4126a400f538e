package runnerservice_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/runner/runnerservice"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
)

// services are the two runner binaries and the configurations each
// refuses or takes, beyond those every runner shares (TestServiceConfig).
var services = []struct {
	svc   runnerservice.Service
	cases []servicetest.ConfigCase
}{
	{runnerservice.Remote, []servicetest.ConfigCase{
		{Name: "the model APIs", Env: map[string]string{"AGENTMESH_RUNNER_ADAPTERS": "openai,anthropic,ollama,nlip,fixture"}, Want: ""},
		{Name: "a CLI", Env: map[string]string{"AGENTMESH_RUNNER_ADAPTERS": "openai,claude-code"}, Want: `AGENTMESH_RUNNER_ADAPTERS: adapter "claude-code" has transport subprocess, which this runner does not host`},
		{Name: "max active of a CLI", Env: map[string]string{"AGENTMESH_RUNNER_MAX_ACTIVE": "pi:2"}, Want: `AGENTMESH_RUNNER_MAX_ACTIVE: adapter "pi" has transport subprocess`},
		{Name: "drain", Env: map[string]string{"AGENTMESH_RUNNER_DRAIN_TIMEOUT": "-1s"}, Want: "AGENTMESH_RUNNER_DRAIN_TIMEOUT: must be > 0"},
	}},
	{runnerservice.Subprocess, []servicetest.ConfigCase{
		{Name: "the CLIs", Env: map[string]string{"AGENTMESH_RUNNER_ADAPTERS": "claude-code,codex,gemini,pi,fixture"}, Want: ""},
		{Name: "a model API", Env: map[string]string{"AGENTMESH_RUNNER_ADAPTERS": "claude-code,openai"}, Want: `AGENTMESH_RUNNER_ADAPTERS: adapter "openai" has transport remote, which this runner does not host`},
		{Name: "max active of a model API", Env: map[string]string{"AGENTMESH_RUNNER_MAX_ACTIVE": "anthropic:2"}, Want: `AGENTMESH_RUNNER_MAX_ACTIVE: adapter "anthropic" has transport remote`},
		{Name: "ack wait", Env: map[string]string{"AGENTMESH_RUNNER_ACK_WAIT": "10ms"}, Want: "AGENTMESH_RUNNER_ACK_WAIT: must be at least 1s"},
		{Name: "id", Env: map[string]string{"AGENTMESH_RUNNER_ID": "a.b"}, Want: "AGENTMESH_RUNNER_ID: "},
	}},
}

// TestServiceRun runs each runner binary's run function against an
// embedded server: it registers, serves HTTP and executes a run.
func TestServiceRun(t *testing.T) {
	for _, tc := range services {
		t.Run(tc.svc.Name, func(t *testing.T) {
			s := natstest.RunJetStream(t)
			spec := tc.svc.NewSpec()
			servicetest.Load(t, spec, spec.Common(), s.ClientURL(), map[string]string{"AGENTMESH_RUNNER_ID": "runner-under-test"})
			meshtest.CheckRunner(t, s, "runner-under-test", func(ctx context.Context, log *slog.Logger) error {
				return tc.svc.Run(ctx, spec.Config, log)
			})
		})
	}
}

// TestServiceConfig loads each runner binary's configuration as its main
// does: the defaults pass, and each bad variable is named.
func TestServiceConfig(t *testing.T) {
	for _, tc := range services {
		t.Run(tc.svc.Name, func(t *testing.T) {
			cases := append([]servicetest.ConfigCase{
				{Name: "defaults", Env: nil, Want: ""},
				{Name: "unknown", Env: map[string]string{"AGENTMESH_RUNNER_ADAPTERS": "fixture,claude"}, Want: `AGENTMESH_RUNNER_ADAPTERS: unknown adapter "claude"`},
			}, tc.cases...)
			servicetest.CheckConfigs(t, cases, func() (any, *service.Config) {
				spec := tc.svc.NewSpec()
				return spec, spec.Common()
			})
		})
	}
}
