package conformance_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/codex"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/gemini"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/pi"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
)

// The test binary doubles as every fake CLI (STYLE item 9): the suite
// starts it with conformance.FakeEnv set.
func TestMain(m *testing.M) {
	if code, ok := conformance.FakeMain(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(conformance.Setup(m))
}

// TestConformance runs the one suite over every registered adapter.
func TestConformance(t *testing.T) {
	for _, s := range subjects(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			conformance.Run(t, s)
		})
	}
}

// TestEveryAdapterIsASubject keeps the parametrization complete: every
// adapter the mesh can register is a subject, and they register together.
func TestEveryAdapterIsASubject(t *testing.T) {
	var adapters []adapter.Adapter
	var names []string
	for _, s := range subjects(t) {
		a, err := s.New(s.Config)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		adapters = append(adapters, a)
		names = append(names, a.Name())
	}
	r, err := adapter.NewRegistry(adapters...)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if got := r.Names(); !slices.Equal(got, names) {
		t.Errorf("registry names %q, want %q", got, names)
	}
	for _, want := range []string{claudecode.Name, codex.Name, gemini.Name, pi.Name, fixture.DefaultName} {
		if !slices.Contains(names, want) {
			t.Errorf("adapter %q is not a conformance subject", want)
		}
	}
}

const cliDir = "../../../testdata/cli"

// subjects are the registered adapters: the fixture adapter, declared
// resumable and not, and the four CLI adapters replaying their captured
// transcripts.
func subjects(t *testing.T) []conformance.Subject {
	t.Helper()
	scripts, err := filepath.Abs("../../../testdata/fixture")
	if err != nil {
		t.Fatal(err)
	}
	var out []conformance.Subject
	for _, resumable := range []bool{false, true} {
		name := fixture.DefaultName
		if resumable {
			name += "-resumable"
		}
		script := func(s string) map[string]any { return map[string]any{"prompt": conformance.Prompt, "script": s} }
		out = append(out, conformance.Subject{
			Name: name,
			New: func(cli.Config) (adapter.Adapter, error) {
				return fixture.New(fixture.Config{Name: name, ScriptsDir: scripts, Resumable: resumable})
			},
			Model:     "fixture-1",
			Request:   func(p string) map[string]any { return map[string]any{"prompt": p} },
			SessionID: "fx-conversation-1",
			Streams: []conformance.Stream{
				{Name: "default"},
				{Name: "hello", Request: script("hello")},
				{Name: "tool-roundtrip", Request: script("tool-roundtrip")},
				{Name: "empty", Request: script("empty")},
				{Name: "provider-error", Request: script("provider-error")},
				{Name: "fail-after-output", Request: script("fail-after-output")},
				{Name: "retry-then-ok-1", Request: script("retry-then-ok"), Attempt: 1},
				{Name: "retry-then-ok-2", Request: script("retry-then-ok"), Attempt: 2},
			},
			Happy:     "default",
			Errors:    []string{"provider-error"},
			Slow:      conformance.Stream{Name: "slow", Request: map[string]any{"prompt": conformance.Prompt, "script": "slow", "delay_ms": 25}},
			Reasoning: "echo it.",
		})
	}

	codexHome := t.TempDir() // an empty CODEX_HOME: no config.toml of the machine's
	for _, c := range []struct {
		name, dir, model, session string
		config                    cli.Config
		newAdapter                func(cli.Config) (adapter.Adapter, error)
		tailRepair                bool
	}{
		{
			name: claudecode.Name, dir: "claude-code", model: "claude-sonnet-4-5",
			session: "9fb97433-4d57-4a95-a009-78c8b500afd5", config: claudecode.DefaultConfig(), tailRepair: true,
			newAdapter: func(cfg cli.Config) (adapter.Adapter, error) { return wrap(claudecode.New(cfg)) },
		},
		{
			name: codex.Name, dir: "codex", model: "gpt-5.5",
			session: "01a22a8b-564f-7be0-9f56-beadbebf0082", config: withEnv(codex.DefaultConfig(), codex.EnvCodexHome, codexHome),
			newAdapter: func(cfg cli.Config) (adapter.Adapter, error) { return wrap(codex.New(cfg)) },
		},
		{
			name: gemini.Name, dir: "gemini", model: "gemini-2.5-flash",
			session: "f9f8d0ce-8f8e-497e-b1f8-e1b327e8af6e", config: gemini.DefaultConfig(),
			newAdapter: func(cfg cli.Config) (adapter.Adapter, error) { return wrap(gemini.New(cfg)) },
		},
		{
			name: pi.Name, dir: "pi", model: "fake-model",
			session: "01a22a8d-7f7d-7689-a314-843817dab2e1", config: pi.DefaultConfig(),
			newAdapter: func(cfg cli.Config) (adapter.Adapter, error) { return wrap(pi.New(cfg)) },
		},
	} {
		streams, err := conformance.Transcripts(filepath.Join(cliDir, c.dir))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, conformance.Subject{
			Name:      c.name,
			New:       c.newAdapter,
			Config:    c.config,
			Model:     c.model,
			Request:   func(p string) map[string]any { return map[string]any{"prompt": p} },
			SessionID: c.session,
			Streams:   streams,
			Happy:     "S1",
			Errors:    []string{"S3", "S4", "S5", "S3-noretry", "S4-noretry", "S5-noretry"},
			// S5: the model API answers 500 (after the CLI's own retries, and without them).
			ServerErrors: []string{"S5", "S5-noretry"},
			Reasoning:    "I recall it is 42",
			TailRepair:   c.tailRepair,
		})
	}
	return out
}

// wrap returns a CLI adapter as an adapter.Adapter, keeping a nil
// interface on error.
func wrap[R any](a *cli.Adapter[R], err error) (adapter.Adapter, error) {
	if err != nil {
		return nil, err
	}
	return a, nil
}

func withEnv(c cli.Config, k, v string) cli.Config {
	set := map[string]string{}
	for key, val := range c.EnvSet {
		set[key] = val
	}
	set[k] = v
	c.EnvSet = set
	return c
}
