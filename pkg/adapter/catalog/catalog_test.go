package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/anthropic"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestShippedProfilesCheckClean: the shipped profiles load, and pass the
// checks against the real adapters, whether the remote credentials are set
// (the real adapters) or not (their Unavailable stand-ins).
func TestShippedProfilesCheckClean(t *testing.T) {
	for _, credentials := range []bool{false, true} {
		name := "without credentials"
		if credentials {
			name = "with credentials"
		}
		t.Run(name, func(t *testing.T) {
			for _, v := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"} {
				if credentials {
					t.Setenv(v, "test-key")
				} else {
					t.Setenv(v, "") // FromEnv takes empty as unset
				}
			}
			_, profiles, adapters := build(t, "../../../profiles")
			if err := profile.CheckAdapters(profiles, adapters); err != nil {
				t.Fatal(err)
			}
			for _, n := range adapters.Names() {
				a, _ := adapters.Get(n)
				tc, ok := a.(adapter.TokenClasses)
				if !ok {
					t.Errorf("adapter %s does not implement adapter.TokenClasses", n)
					continue
				}
				if got := tc.TokenClasses(); a.Capabilities().ReportsUsage == (len(got) == 0) {
					t.Errorf("adapter %s: reports_usage %t, token classes %v", n, a.Capabilities().ReportsUsage, got)
				}
			}
			for n, want := range map[string]int{openai.Name: 272_000, anthropic.Name: 200_000} {
				a, _ := adapters.Get(n)
				if pc, ok := a.(adapter.PricedContext); !ok || pc.MaxPricedContext() != want {
					t.Errorf("adapter %s: priced context %v, want %d", n, a, want)
				}
			}
		})
	}
}

// TestTokenClasses pins each adapter's token classes: what its usage
// mapping can report, so what its profiles must price.
func TestTokenClasses(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("ANTHROPIC_API_KEY", "")
	_, _, adapters := build(t, "../../../profiles")
	want := map[string][]string{
		"fixture":     {"input", "output"},
		"claude-code": {"input", "output", "cache_read", "cache_write"},
		"codex":       {"input", "output", "cache_read", "cache_write", "reasoning"},
		"gemini":      {"input", "output", "cache_read", "reasoning"},
		"pi":          {"input", "output", "cache_read", "cache_write"},
		"openai":      {"input", "output", "cache_read", "reasoning"},
		"anthropic":   {"input", "output", "cache_read", "cache_write", "reasoning"},
		"ollama":      {"input", "output"},
		"nlip":        nil,
	}
	for n, classes := range want {
		a, ok := adapters.Get(n)
		if !ok {
			t.Errorf("no adapter %s", n)
			continue
		}
		if got := a.(adapter.TokenClasses).TokenClasses(); !slices.Equal(got, classes) {
			t.Errorf("%s token classes = %v, want %v", n, got, classes)
		}
	}
}

// TestRegistryChecksProfilesAgainstAdapters: problems only the adapters
// can reveal fail Registry, so every service and agentmesh up, at startup,
// naming the file and the field; also in a runner that hosts other
// adapters than the bad profile's.
func TestRegistryChecksProfilesAgainstAdapters(t *testing.T) {
	const fixtureProfile = "schema: 1\nname: fixture\nadapter: fixture\ntransport: in_process\nmodel: fixture-1\npricing: {input: \"0\", output: \"0\"}\n"
	const openaiProfile = "schema: 1\nname: openai\nadapter: openai\ntransport: remote\nmodel: gpt-5.6\nbase_url: https://api.openai.com/v1\n" +
		"credential_env: OPENAI_API_KEY\npricing: {input: \"1.25\", output: \"10\", cache_read: \"0.125\", reasoning: \"10\"}\n"
	const anthropicProfile = "schema: 1\nname: anthropic\nadapter: anthropic\ntransport: remote\nmodel: claude-sonnet-4-5\nbase_url: https://api.anthropic.com\n" +
		"credential_env: ANTHROPIC_API_KEY\npricing: {input: \"3\", output: \"15\", cache_read: \"0.30\", cache_write: \"3.75\", reasoning: \"15\"}\n"
	tests := []struct {
		name      string
		file, in  string
		hosts     []string // the adapters the process hosts; nil: every profile's
		openaiKey string
		wantField string
		want      string
	}{
		{name: "capabilities contradict the adapter's", file: "fixture.yaml", in: fixtureProfile + "capabilities: {resumable: true, resume_field: resume, emits_tool_events: true, reports_usage: true}\n",
			wantField: "capabilities.resumable", want: "contradicts adapter fixture's declaration false"},
		{name: "pricing misses a class the adapter reports", file: "anthropic.yaml", in: strings.Replace(anthropicProfile, `, reasoning: "15"`, "", 1),
			wantField: "pricing.reasoning", want: "missing"},
		{name: "unavailable provider keeps the real adapter's token classes", file: "openai.yaml", in: strings.Replace(openaiProfile, `, cache_read: "0.125"`, "", 1),
			wantField: "pricing.cache_read", want: "missing"},
		{name: "openai context beyond its single price", file: "openai.yaml", in: openaiProfile + "context_window: 400000\n", openaiKey: "test-key",
			wantField: "context_window", want: "400000 is beyond the 272000 tokens"},
		{name: "unavailable openai keeps its priced context", file: "openai.yaml", in: openaiProfile + "context_window: 272001\n",
			wantField: "context_window", want: "beyond the 272000 tokens"},
		{name: "anthropic context beyond its single price", file: "anthropic.yaml", in: anthropicProfile + "context_window: 1000000\n",
			wantField: "context_window", want: "beyond the 200000 tokens"},
		{name: "unknown adapter", file: "x.yaml", in: strings.NewReplacer("name: fixture", "name: x", "adapter: fixture", "adapter: nope").Replace(fixtureProfile),
			wantField: "adapter", want: `no adapter "nope"`},
		{name: "unknown adapter, in a runner", file: "x.yaml", in: strings.NewReplacer("name: fixture", "name: x", "adapter: fixture", "adapter: nope").Replace(fixtureProfile),
			hosts: []string{"fixture"}, wantField: "adapter", want: `no adapter "nope"`},
		{name: "a runner checks the profiles of adapters it does not host", file: "openai.yaml", in: openaiProfile + "context_window: 300000\n",
			hosts: []string{"fixture"}, wantField: "context_window", want: "beyond"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", tt.openaiKey)
			t.Setenv("ANTHROPIC_API_KEY", "")
			dir := t.TempDir()
			for name, body := range map[string]string{"fixture.yaml": fixtureProfile, tt.file: tt.in} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ac := Dirs{ProfilesDir: dir, FixtureDir: "testdata", WorkspaceRoot: t.TempDir()}
			profiles, err := ac.Profiles()
			if err != nil {
				t.Fatal(err)
			}
			_, err = ac.Registry(profiles, tt.hosts...)
			if !errors.Is(err, profile.ErrInvalid) || !strings.Contains(err.Error(), filepath.Join(dir, tt.file)+": "+tt.wantField+": ") ||
				!strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Registry = %v\nwant ErrInvalid naming %s, %s and %q", err, tt.file, tt.wantField, tt.want)
			}
		})
	}
}

// TestReapProcessGroups: a usable state dir is returned for the adapters;
// one others may write to is refused as proc.ErrStateDir, before anything
// is reaped from it.
func TestReapProcessGroups(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	good := filepath.Join(t.TempDir(), "groups")
	if got, err := ReapProcessGroups(good, log); err != nil || got != good {
		t.Fatalf("ReapProcessGroups(%s) = %q, %v", good, got, err)
	}
	if fi, err := os.Stat(good); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state dir not created 0700: %v %v", fi, err)
	}
	bad := t.TempDir()
	if err := os.Chmod(bad, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := ReapProcessGroups(bad, log)
	if !errors.Is(err, proc.ErrStateDir) {
		t.Fatalf("err = %v, want proc.ErrStateDir", err)
	}
}

// TestEachProfileHasItsOwnInstance: two profiles on one adapter each get an
// instance built from their own settings: a remote one its own credential
// (here: one set, one not), a CLI one its own binary. The adapter's own
// instance is its first profile's.
func TestEachProfileHasItsOwnInstance(t *testing.T) {
	t.Setenv("AGENTMESH_TEST_KEY_SET", "test-key")
	t.Setenv("AGENTMESH_TEST_KEY_UNSET", "")
	const remote = "schema: 1\nname: %s\nadapter: openai\ntransport: remote\nmodel: %s\nbase_url: https://api.openai.com/v1\ncredential_env: %s\n" +
		"pricing: {input: \"1.25\", output: \"10\", cache_read: \"0.125\", reasoning: \"10\"}\n"
	const cli = "schema: 1\nname: %s\nadapter: claude-code\ntransport: subprocess\nmodel: %s\nbinary: %s\ninstall_hint: install it\n" +
		"pricing: {input: \"3\", output: \"15\", cache_read: \"0.30\", cache_write: \"3.75\"}\n"
	missing := t.TempDir() // holds no binary
	dir := t.TempDir()
	for name, body := range map[string]string{
		"openai-a.yaml": fmt.Sprintf(remote, "openai-a", "gpt-5.5", "AGENTMESH_TEST_KEY_SET"),
		"openai-b.yaml": fmt.Sprintf(remote, "openai-b", "gpt-5.4", "AGENTMESH_TEST_KEY_UNSET"),
		"claude-a.yaml": fmt.Sprintf(cli, "claude-a", "claude-sonnet-4-5", filepath.Join(missing, "claude-of-a")),
		"claude-b.yaml": fmt.Sprintf(cli, "claude-b", "claude-opus-4-1", filepath.Join(missing, "claude-of-b")),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, _, adapters := build(t, dir)
	prompt, err := wire.Marshal(map[string]any{"prompt": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	instance := func(profile, adapterName string) adapter.Adapter {
		t.Helper()
		a, ok := adapters.ForProfile(profile)
		if !ok || a.Name() != adapterName {
			t.Fatalf("ForProfile(%s) = %v, %t; want an instance of %s", profile, a, ok, adapterName)
		}
		return a
	}
	if _, err := instance("openai-a", "openai").Validate(prompt); err != nil {
		t.Errorf("openai-a, its credential set: Validate = %v", err)
	}
	if _, err := instance("openai-b", "openai").Validate(prompt); !errors.Is(err, wire.ProviderUnavailable) || !strings.Contains(err.Error(), "AGENTMESH_TEST_KEY_UNSET") {
		t.Errorf("openai-b, its credential unset: Validate = %v, want ProviderUnavailable naming its variable", err)
	}
	if a, _ := adapters.Get("openai"); a != instance("openai-a", "openai") {
		t.Error("the openai adapter's own instance is not its first profile's")
	}
	for _, p := range []struct{ profile, binary string }{{"claude-a", "claude-of-a"}, {"claude-b", "claude-of-b"}} {
		a := instance(p.profile, "claude-code")
		req, err := a.Validate(prompt)
		if err != nil {
			t.Fatal(err)
		}
		var got error
		for _, err := range a.Stream(context.Background(), adapter.Call{RunID: "run-" + p.profile, Request: req, Attempt: 1, MaxAttempts: 1, Model: "m"}) {
			if err != nil {
				got = err
			}
		}
		if !errors.Is(got, wire.ProviderExecutableNotFound) || !strings.Contains(got.Error(), p.binary) {
			t.Errorf("%s: Stream = %v, want ProviderExecutableNotFound naming its own binary %s", p.profile, got, p.binary)
		}
	}
}

func TestRegistry(t *testing.T) {
	ac, profiles, reg := build(t, "../../../profiles")
	if got := strings.Join(reg.Names(), ","); got != "acp,anthropic,claude-code,codex,fixture,gemini,nlip,ollama,openai,pi" {
		t.Errorf("Registry() names = %s, want every shipped profile's adapter", got)
	}
	if _, err := ac.Registry(profiles, "fixture", "nope"); err == nil || !strings.Contains(err.Error(), `unknown adapter "nope" (known: acp, anthropic, claude-code, codex, fixture, gemini, nlip, ollama, openai, pi)`) {
		t.Errorf("Registry(fixture, nope) = %v, want an unknown adapter error listing the known ones", err)
	}
	// acp: its three profiles' own bounds together; pi: the explicit one.
	if got := MaxActive(profiles, map[string]int{"pi": 4}); got["fixture"] != 8 || got["pi"] != 4 || got["claude-code"] != 1 || got["acp"] != 3 {
		t.Errorf("MaxActive = %v", got)
	}
	if got := ProfileMaxActive(profiles); got["claude-acp"] != 1 || got["codex-acp"] != 1 || got["gemini-acp"] != 1 || got["fixture"] != 8 {
		t.Errorf("ProfileMaxActive = %v", got)
	}
}

// TestTransports: the transport the catalog states for each adapter, which
// decides the runner binary that may host it, is the one the adapter's
// capabilities declare, for the instance built from each shipped profile
// and the adapter's own.
func TestTransports(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "test-key")
	_, profiles, reg := build(t, "../../../profiles")
	for _, n := range Names() {
		want, _ := Transport(n)
		a, ok := reg.Get(n)
		if !ok {
			t.Errorf("no shipped profile names adapter %s", n)
			continue
		}
		if got := a.Capabilities().Transport; got != want {
			t.Errorf("adapter %s declares transport %s, the catalog says %s", n, got, want)
		}
	}
	for _, p := range profiles.All() {
		a, _ := reg.ForProfile(p.Name)
		if want, _ := Transport(p.Adapter); a.Capabilities().Transport != want {
			t.Errorf("profile %s: its instance declares transport %s, the catalog says %s", p.Name, a.Capabilities().Transport, want)
		}
	}
	if _, ok := Transport("nope"); ok {
		t.Error(`Transport("nope") is known`)
	}
	for _, tt := range []struct {
		in   []wire.Transport
		want string
	}{
		{nil, "acp,anthropic,claude-code,codex,fixture,gemini,nlip,ollama,openai,pi"},
		{[]wire.Transport{wire.TransportSubprocess}, "acp,claude-code,codex,gemini,pi"},
		{[]wire.Transport{wire.TransportRemote}, "anthropic,nlip,ollama,openai"},
		{[]wire.Transport{wire.TransportRemote, wire.TransportInProcess}, "anthropic,fixture,nlip,ollama,openai"},
	} {
		if got := strings.Join(Names(tt.in...), ","); got != tt.want {
			t.Errorf("Names(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// build loads the profiles of dir and builds the adapter of every one,
// failing the test on an error, with the fixture scripts of testdata and a
// workspace root of the test's own.
func build(t *testing.T, dir string) (Dirs, *profile.Registry, *adapter.Registry) {
	t.Helper()
	ac := Dirs{ProfilesDir: dir, FixtureDir: "testdata", WorkspaceRoot: t.TempDir()}
	profiles, err := ac.Profiles()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := ac.Registry(profiles)
	if err != nil {
		t.Fatal(err)
	}
	return ac, profiles, reg
}

// TestSandboxKeys: under the sandbox, a profile whose egress does not list
// the API of the key the runner holds fails to build, naming it; one that
// lists it holds the key; network: none gives the run no key at all.
func TestSandboxKeys(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
	t.Setenv("ANTHROPIC_BASE_URL", "")
	c := Dirs{Sandbox: &sandbox.Config{}}
	p := profile.Profile{EnvAllow: []string{"ANTHROPIC_API_KEY"}, Egress: []string{"other.example:443"}}
	if _, err := c.cliConfig(claudecode.DefaultConfig(), &p); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY's key for its API at api.anthropic.com:443, which egress does not list") {
		t.Errorf("egress without the API: %v, want a refusal naming it", err)
	}
	p.Egress = []string{"API.anthropic.com:443"}
	cfg, err := c.cliConfig(claudecode.DefaultConfig(), &p)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.ProxyURL("https://api.anthropic.com"); !ok {
		t.Error("egress with the API: the runner holds no key for it")
	}
	p = profile.Profile{EnvAllow: []string{"ANTHROPIC_API_KEY", "HOME"}, Network: profile.NetworkNone}
	if cfg, err = c.cliConfig(claudecode.DefaultConfig(), &p); err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.ProxyURL("https://api.anthropic.com"); ok || slices.Contains(cfg.EnvAllow, "ANTHROPIC_API_KEY") {
		t.Errorf("network none: the run gets the key variable (env_allow %q) or a key proxy (%v)", cfg.EnvAllow, ok)
	}
}
