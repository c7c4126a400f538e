package serve

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/service"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type testConfig struct {
	service.Config
	RunnerConfig
}

func TestRunMain(t *testing.T) {
	errRun := errors.New("run failed")
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		runErr   error
		wantCode int
		wantErr  string // in stderr
		wantRun  bool
	}{
		{name: "ok", wantCode: 0, wantRun: true},
		{name: "run fails", runErr: errRun, wantCode: 1, wantErr: "run failed", wantRun: true},
		{name: "help", args: []string{"-h"}, wantCode: 0},
		{name: "argument", args: []string{"serve"}, wantCode: 2, wantErr: `svc: unexpected argument "serve"`},
		{name: "log level", env: map[string]string{"AGENTMESH_LOG_LEVEL": "loud"}, wantCode: 2, wantErr: "svc: config: AGENTMESH_LOG_LEVEL"},
		{name: "unparsable", env: map[string]string{"AGENTMESH_LEASE_TTL": "soon"}, wantCode: 2, wantErr: "AGENTMESH_LEASE_TTL"},
		{name: "common", env: map[string]string{"AGENTMESH_REPLICAS": "7"}, wantCode: 2, wantErr: "AGENTMESH_REPLICAS"},
		{name: "retention unparsable", env: map[string]string{"AGENTMESH_RUN_RETENTION": "a week"}, wantCode: 2, wantErr: "AGENTMESH_RUN_RETENTION"},
		{name: "retention below events", env: map[string]string{"AGENTMESH_RUN_RETENTION": "1h"}, wantCode: 2, wantErr: "AGENTMESH_RUN_RETENTION: must be at least 1s and at least AGENTMESH_EVENTS_MAX_AGE 24h0m0s"},
		{name: "validate", env: map[string]string{"AGENTMESH_RUNNER_ADAPTERS": "nope"}, wantCode: 2, wantErr: `AGENTMESH_RUNNER_ADAPTERS: unknown adapter "nope" (known: anthropic, claude-code, codex, fixture, gemini, nlip, ollama, openai, pi)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var cfg testConfig
			var stderr bytes.Buffer
			ran := false
			code := runMain(context.Background(), "svc", tt.args, &stderr, &cfg, &cfg.Config, func(ctx context.Context, log *slog.Logger) error {
				ran = true
				log.Info("running")
				return tt.runErr
			})
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.wantCode, &stderr)
			}
			if ran != tt.wantRun {
				t.Errorf("ran = %t, want %t", ran, tt.wantRun)
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", &stderr, tt.wantErr)
			}
			if tt.wantRun && !strings.Contains(stderr.String(), `"service":"svc"`) {
				t.Errorf("stderr = %q, want JSON logs with service svc", &stderr)
			}
		})
	}
}

func TestRunnerConfigValidate(t *testing.T) {
	ok := RunnerConfig{
		RunnerAdapters: []string{"fixture"}, RunnerMaxActive: map[string]int{"fixture": 8},
		RunnerDefaultMaxActive: 1, RunnerAckWait: 30e9, RunnerDrainTimeout: 10e9,
	}
	tests := []struct {
		name string
		in   func(*RunnerConfig)
		want string // the variable named; "" for valid
	}{
		{"valid", func(*RunnerConfig) {}, ""},
		{"no adapters", func(c *RunnerConfig) { c.RunnerAdapters = nil }, "AGENTMESH_RUNNER_ADAPTERS"},
		{"twice", func(c *RunnerConfig) { c.RunnerAdapters = []string{"fixture", "fixture"} }, "AGENTMESH_RUNNER_ADAPTERS"},
		{"max active unknown", func(c *RunnerConfig) { c.RunnerMaxActive = map[string]int{"nope": 1} }, "AGENTMESH_RUNNER_MAX_ACTIVE"},
		{"max active zero", func(c *RunnerConfig) { c.RunnerMaxActive = map[string]int{"fixture": 0} }, "AGENTMESH_RUNNER_MAX_ACTIVE"},
		{"default max active", func(c *RunnerConfig) { c.RunnerDefaultMaxActive = 0 }, "AGENTMESH_RUNNER_DEFAULT_MAX_ACTIVE"},
		{"ack wait", func(c *RunnerConfig) { c.RunnerAckWait = 1e6 }, "AGENTMESH_RUNNER_ACK_WAIT"},
		{"drain", func(c *RunnerConfig) { c.RunnerDrainTimeout = 0 }, "AGENTMESH_RUNNER_DRAIN_TIMEOUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.in(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want an ErrConfig naming %s", err, tt.want)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	ac := AdapterConfig{ProfilesDir: "../../profiles", FixtureDir: "testdata", WorkspaceRoot: t.TempDir()}
	profiles, err := ac.Profiles()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := ac.Registry(profiles)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(reg.Names(), ","); got != "anthropic,claude-code,codex,fixture,gemini,nlip,ollama,openai,pi" {
		t.Errorf("Registry() names = %s, want every shipped profile's adapter", got)
	}
	if _, err := ac.Registry(profiles, "fixture", "nope"); err == nil || !strings.Contains(err.Error(), `unknown adapter "nope" (known: anthropic, claude-code, codex, fixture, gemini, nlip, ollama, openai, pi)`) {
		t.Errorf("Registry(fixture, nope) = %v, want an unknown adapter error listing the known ones", err)
	}
	if got := MaxActive(profiles, map[string]int{"pi": 4}); got["fixture"] != 8 || got["pi"] != 4 || got["claude-code"] != 1 {
		t.Errorf("MaxActive = %v", got)
	}
}
