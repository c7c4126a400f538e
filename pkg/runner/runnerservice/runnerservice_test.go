package runnerservice_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/acp/acpfake"
	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/runner/runnerservice"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(acpFakeEnv) == "1" {
		acpfake.Main() // (exits)
	}
	if code, ok := hostileMain(); ok {
		os.Exit(code)
	}
	if code, ok := keyAgentMain(); ok {
		os.Exit(code)
	}
	if code, ok := codexKeyAgentMain(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

var cli = []wire.Transport{wire.TransportSubprocess, wire.TransportInProcess}

func TestCheck(t *testing.T) {
	ok := runnerservice.Config{
		RunnerAdapters: []string{"fixture"},
		Runner:         runner.Config{MaxActive: map[string]int{"fixture": 8}, DefaultMaxActive: 1, AckWait: 30 * time.Second, DrainTimeout: 10 * time.Second},
	}
	tests := []struct {
		name       string
		transports []wire.Transport
		in         func(*runnerservice.Config)
		want       string // in the error; "" for valid
	}{
		{"valid", cli, func(*runnerservice.Config) {}, ""},
		{"the defaults", cli, func(c *runnerservice.Config) { c.Runner = runner.Config{} }, ""},
		{"every CLI", cli, func(c *runnerservice.Config) { c.RunnerAdapters = []string{"claude-code", "codex", "gemini", "pi"} }, ""},
		{"every API", []wire.Transport{wire.TransportRemote}, func(c *runnerservice.Config) {
			c.RunnerAdapters, c.Runner.MaxActive = []string{"openai", "anthropic", "ollama", "nlip"}, nil
		}, ""},
		{"no adapters", cli, func(c *runnerservice.Config) { c.RunnerAdapters = nil }, "AGENTMESH_RUNNER_ADAPTERS: name at least one adapter (known: acp, claude-code, codex, fixture, gemini, pi)"},
		{"unknown", cli, func(c *runnerservice.Config) { c.RunnerAdapters = []string{"nope"} }, `AGENTMESH_RUNNER_ADAPTERS: unknown adapter "nope" (known: acp, claude-code, codex, fixture, gemini, pi)`},
		{"another transport", cli, func(c *runnerservice.Config) { c.RunnerAdapters = []string{"fixture", "openai"} },
			`AGENTMESH_RUNNER_ADAPTERS: adapter "openai" has transport remote, which this runner does not host (it hosts: acp, claude-code, codex, fixture, gemini, pi)`},
		{"twice", cli, func(c *runnerservice.Config) { c.RunnerAdapters = []string{"fixture", "fixture"} }, "AGENTMESH_RUNNER_ADAPTERS: adapter \"fixture\" is named twice"},
		{"max active unknown", cli, func(c *runnerservice.Config) { c.Runner.MaxActive = map[string]int{"nope": 1} }, "AGENTMESH_RUNNER_MAX_ACTIVE"},
		{"max active of another transport", []wire.Transport{wire.TransportRemote}, func(c *runnerservice.Config) { c.RunnerAdapters = []string{"openai"} },
			`AGENTMESH_RUNNER_MAX_ACTIVE: adapter "fixture" has transport in_process`},
		{"max active zero", cli, func(c *runnerservice.Config) { c.Runner.MaxActive = map[string]int{"fixture": 0} }, "MaxActive fixture must be > 0"},
		{"default max active", cli, func(c *runnerservice.Config) { c.Runner.DefaultMaxActive = -1 }, "DefaultMaxActive must be > 0"},
		{"ack wait", cli, func(c *runnerservice.Config) { c.Runner.AckWait = time.Millisecond }, "AckWait must be at least 1s"},
		{"drain", cli, func(c *runnerservice.Config) { c.Runner.DrainTimeout = -1 }, "DrainTimeout must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.in(&c)
			err := c.Check(tt.transports...)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Check() = %v, want an error with %q", err, tt.want)
			case tt.want != "" && !errors.Is(err, service.ErrConfig) && !errors.Is(err, runner.ErrInvalidConfig):
				t.Errorf("Check() = %v, want ErrConfig or runner.ErrInvalidConfig", err)
			}
		})
	}
}

// TestRunFailsAtStartupOnAProfile: a runner service stops before it
// connects to anything when a profile contradicts its adapter.
func TestRunFailsAtStartupOnAProfile(t *testing.T) {
	dir := t.TempDir()
	body := "schema: 1\nname: fixture\nadapter: fixture\ntransport: in_process\nmodel: fixture-1\npricing: {input: \"0\"}\n"
	if err := os.WriteFile(filepath.Join(dir, "fixture.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c := runnerservice.Config{
		Config:         service.Config{NatsURL: "nats://127.0.0.1:1"},
		Dirs:           catalog.Dirs{ProfilesDir: dir, FixtureDir: "testdata", WorkspaceRoot: t.TempDir()},
		RunnerAdapters: []string{"fixture"},
		RunnerStateDir: filepath.Join(t.TempDir(), "groups"),
	}
	err := runnerservice.Run(context.Background(), "test-runner", cli, c, slog.New(slog.DiscardHandler))
	if !errors.Is(err, profile.ErrInvalid) || !strings.Contains(err.Error(), "fixture.yaml: pricing.output: missing") {
		t.Fatalf("Run = %v, want the missing output price of fixture.yaml", err)
	}
}

// TestRunRefusesAnotherTransport: Run checks its configuration itself,
// before it reads a profile, so a runner built in code cannot host the
// adapters of another transport either.
func TestRunRefusesAnotherTransport(t *testing.T) {
	c := runnerservice.Config{
		Config:         service.Config{NatsURL: "nats://127.0.0.1:1"},
		Dirs:           catalog.Dirs{ProfilesDir: filepath.Join(t.TempDir(), "none")},
		RunnerAdapters: []string{"claude-code"},
	}
	err := runnerservice.Run(context.Background(), "test-runner", []wire.Transport{wire.TransportRemote}, c, slog.New(slog.DiscardHandler))
	if !errors.Is(err, service.ErrConfig) || !strings.Contains(err.Error(), `adapter "claude-code" has transport subprocess`) {
		t.Fatalf("Run = %v, want claude-code refused", err)
	}
}

// TestStateDirRefused: a process-group directory others may write to is a
// configuration error naming AGENTMESH_RUNNER_STATE_DIR.
func TestStateDirRefused(t *testing.T) {
	bad := t.TempDir()
	if err := os.Chmod(bad, 0o777); err != nil {
		t.Fatal(err)
	}
	c := runnerservice.Config{
		Config:         service.Config{NatsURL: "nats://127.0.0.1:1"},
		Dirs:           catalog.Dirs{ProfilesDir: "../../../profiles"},
		RunnerAdapters: []string{"fixture"},
		RunnerStateDir: bad,
	}
	err := runnerservice.Run(context.Background(), "test-runner", cli, c, slog.New(slog.DiscardHandler))
	if !errors.Is(err, service.ErrConfig) || !strings.Contains(err.Error(), "AGENTMESH_RUNNER_STATE_DIR") {
		t.Fatalf("Run = %v, want an ErrConfig naming AGENTMESH_RUNNER_STATE_DIR", err)
	}
}
