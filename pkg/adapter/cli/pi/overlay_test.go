package pi

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
)

// keyedModels is a models.json with a provider of each kind: a key in a
// variable (OpenAI-style), a literal key with a credential header
// (Anthropic), a model with its own baseUrl and api (Gemini), a key Pi
// gets from a command, an api whose header the proxy does not know, and
// no key at all; with Pi's // comments and trailing commas.
const keyedModels = `{
  // keys: a variable, a literal, a command
  "providers": {
    "byvar": {"baseUrl": "https://api.openai.example/v1", "api": "openai-completions", "apiKey": "MY_OPENAI_KEY",
      "models": [{"id": "gpt", "contextWindow": 128000, "cost": {"input": 1.25, "output": 10, "cacheRead": 0.125, "cacheWrite": 0}},],},
    "literal": {"baseUrl": "https://api.anthropic.example", "apiKey": "sk-ant-literal-0123456789",
      "headers": {"X-Api-Key": "sk-ant-literal-0123456789", "anthropic-beta": "tools"},
      "models": [{"id": "claude", "api": "anthropic-messages"},
                 {"id": "gem", "api": "google-generative-ai", "baseUrl": "https://gemini.example/v1beta",
                  "headers": {"Authorization": "Bearer sk-ant-literal-0123456789"}}]},
    "command": {"baseUrl": "https://cmd.example/v1", "api": "openai-responses", "apiKey": "!pass show llm"},
    "azure": {"baseUrl": "https://res.openai.azure.com/openai/v1", "api": "azure-openai-responses", "apiKey": "azure-literal-0123456789"},
    "local": {"baseUrl": "http://127.0.0.1:11434/v1", "api": "openai-completions", "note": "a // that is text",
      "models": [{"id": "llama"}]},
  },
}`

// TestConfigBaseURLsKeys: each baseUrl of models.json carries the key its
// provider is reached with, as Pi resolves apiKey (a variable the child
// gets, else the text itself; never a command's), and the header of its
// api; an api the proxy cannot hold a key for, or a provider without a
// key, carries none.
func TestConfigBaseURLsKeys(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "models.json"), keyedModels)
	cfg := DefaultConfig()
	cfg.EnvAllow = nil
	cfg.EnvSet = map[string]string{EnvAgentDir: dir, "MY_OPENAI_KEY": "sk-openai-real-0123456789"}
	urls, err := ConfigBaseURLs(cfg.ChildEnv)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range urls {
		got = append(got, strings.Join([]string{strings.TrimPrefix(u.Source, filepath.Join(dir, "models.json")+": "), u.URL, u.KeyVar, u.Key.Reveal(), u.Header}, " "))
	}
	want := []string{
		"providers.azure.baseUrl https://res.openai.azure.com/openai/v1   ",
		"providers.byvar.baseUrl https://api.openai.example/v1 MY_OPENAI_KEY  bearer",
		"providers.command.baseUrl https://cmd.example/v1   ",
		// The provider names no api: its baseUrl's is that of the models
		// that use it.
		"providers.literal.baseUrl https://api.anthropic.example  sk-ant-literal-0123456789 x-api-key",
		"providers.literal.models[1].baseUrl https://gemini.example/v1beta  sk-ant-literal-0123456789 x-goog-api-key",
		"providers.local.baseUrl http://127.0.0.1:11434/v1   ",
	}
	if !slices.Equal(got, want) {
		t.Errorf("base URLs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The variable unset: Pi sends its name as the key, so that is the
	// key (nothing secret, but what the API would get).
	delete(cfg.EnvSet, "MY_OPENAI_KEY")
	urls, err = ConfigBaseURLs(cfg.ChildEnv)
	if err != nil {
		t.Fatal(err)
	}
	if u := urls[1]; u.KeyVar != "" || u.Key.Reveal() != "MY_OPENAI_KEY" {
		t.Errorf("unset variable: KeyVar %q, key %q, want the name as a literal", u.KeyVar, u.Key.Reveal())
	}

	for api, header := range map[string]string{
		"anthropic-messages": sandbox.HeaderAPIKey, "openai-completions": sandbox.HeaderBearer,
		"openai-responses": sandbox.HeaderBearer, "mistral-conversations": sandbox.HeaderBearer,
		"google-generative-ai": sandbox.HeaderGoogAPIKey, "azure-openai-responses": "", "bedrock-converse-stream": "",
		"google-vertex": "", "openai-codex-responses": "", "": "",
	} {
		if got, ok := keyHeader(api); got != header || ok != (header != "") {
			t.Errorf("keyHeader(%q) = %q, %t, want %q", api, got, ok, header)
		}
	}
}

// keyedConfiner is a Confiner whose proxy holds the keys of a policy's
// keyed APIs, as a *sandbox.Sandbox built with it does (KeyedURL).
type keyedConfiner struct{ keyed []sandbox.KeyedAPI }

func (keyedConfiner) Confine(*exec.Cmd) (proc.Confinement, error) { return nil, errors.New("not run") }
func (c keyedConfiner) KeyedURL(api string) (string, bool) {
	for _, k := range c.keyed {
		if k.URL == api {
			u, err := sandbox.ProxyURL(api)
			return u, err == nil
		}
	}
	return "", false
}

// TestOverlay: a confined run whose proxy holds keys of models.json gets
// an agent directory of its own: its models.json points each keyed
// provider at the proxy with the placeholder for its key and no
// credential header, holds the literal key nowhere, and keeps the rest;
// each other entry of the real directory is linked and listed for the
// sandbox to bind read-only, except auth.json, which with models.json the
// sandbox masks where the run's view shows them (LoginFiles); the sessions are the real
// directory's for the workspace, as Pi lays them out. The directory is
// gone after the run. An unconfined run, or one whose proxy holds none of
// the keys, runs as before.
func TestOverlay(t *testing.T) {
	real := t.TempDir()
	write(t, filepath.Join(real, "models.json"), keyedModels)
	write(t, filepath.Join(real, "settings.json"), `{"retry":{"provider":{"maxRetries":0}}}`)
	write(t, filepath.Join(real, "auth.json"), `{"anthropic":{"type":"api_key","key":"sk-ant-auth-0123456789"}}`)
	write(t, filepath.Join(real, "extensions", "x.ts"), "export default {}")
	write(t, filepath.Join(real, "sessions", "--old--", "s.jsonl"), "{}")
	ws := filepath.Join(t.TempDir(), "tenant", "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.EnvAllow = nil
	cfg.EnvSet = map[string]string{EnvAgentDir: real, "MY_OPENAI_KEY": "sk-openai-real-0123456789"}
	pol, err := cfg.SandboxPolicy()
	if err != nil {
		t.Fatal(err)
	}
	var keyed, values []string
	for _, k := range pol.Keyed {
		keyed = append(keyed, k.URL+" "+k.KeyVar+" "+k.Header)
		values = append(values, k.Key.Reveal())
	}
	if want := []string{"sk-openai-real-0123456789", "sk-ant-literal-0123456789", "sk-ant-literal-0123456789"}; !slices.Equal(values, want) {
		t.Errorf("the proxy holds keys %q, want %q", values, want)
	}
	if want := []string{"https://api.openai.example/v1 MY_OPENAI_KEY bearer", "https://api.anthropic.example  x-api-key",
		"https://gemini.example/v1beta  x-goog-api-key"}; !slices.Equal(keyed, want) {
		t.Fatalf("keyed %q, want %q", keyed, want)
	}
	if !slices.Contains(pol.StateVars, EnvSessionDir) || !slices.Contains(pol.ReadOnlyVars, EnvReadOnly) {
		t.Fatalf("policy state %q, read-only %q: want %s and %s", pol.StateVars, pol.ReadOnlyVars, EnvSessionDir, EnvReadOnly)
	}
	if want := []string{filepath.Join(real, "auth.json"), filepath.Join(real, "models.json")}; !slices.Equal(pol.LoginFiles, want) {
		t.Errorf("login files %q, want %q (masked where the run's view shows them)", pol.LoginFiles, want)
	}

	invoke := func(cfg cli.Config) cli.Invocation {
		t.Helper()
		inv, err := spec(cfg).Invoke(Request{Prompt: "hi"}, adapter.Call{}, ws)
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}
	if inv := invoke(cfg); inv.Env != nil || inv.Cleanup != nil {
		t.Fatalf("unconfined: env %q, cleanup %t, want neither", inv.Env, inv.Cleanup != nil)
	}
	cfg.Confine = keyedConfiner{}
	if inv := invoke(cfg); inv.Env != nil || inv.Cleanup != nil {
		t.Fatalf("confined, no key held: env %q, want none", inv.Env)
	}

	cfg.Confine = keyedConfiner{keyed: pol.Keyed}
	inv := invoke(cfg)
	o := inv.Env[EnvAgentDir]
	if o == "" || o == real || inv.Cleanup == nil {
		t.Fatalf("confined: agent dir %q (real %s), cleanup %t", o, real, inv.Cleanup != nil)
	}
	b, err := os.ReadFile(filepath.Join(o, "models.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "sk-ant-literal") || strings.Contains(string(b), "sk-openai-real") {
		t.Errorf("the run's models.json holds a key:\n%s", b)
	}
	var doc struct {
		Providers map[string]struct {
			BaseURL string            `json:"baseUrl"`
			APIKey  string            `json:"apiKey"`
			Headers map[string]string `json:"headers"`
			Note    string            `json:"note"`
			Models  []struct {
				ID      string            `json:"id"`
				BaseURL string            `json:"baseUrl"`
				Headers map[string]string `json:"headers"`
				Cost    map[string]any    `json:"cost"`
			} `json:"models"`
		} `json:"providers"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("the run's models.json: %v\n%s", err, b)
	}
	p := doc.Providers
	for name, want := range map[string][2]string{
		"byvar":   {"http://api.openai.example:443/v1", sandbox.Placeholder},
		"literal": {"http://api.anthropic.example:443", sandbox.Placeholder},
		"command": {"https://cmd.example/v1", "!pass show llm"},
		"azure":   {"https://res.openai.azure.com/openai/v1", "azure-literal-0123456789"},
		"local":   {"http://127.0.0.1:11434/v1", ""},
	} {
		if got := [2]string{p[name].BaseURL, p[name].APIKey}; got != want {
			t.Errorf("provider %s: baseUrl, apiKey %q, want %q", name, got, want)
		}
	}
	if m := p["literal"].Models; len(m) != 2 || m[1].BaseURL != "http://gemini.example:443/v1beta" || len(m[1].Headers) != 0 {
		t.Errorf("literal's models %+v, want the second at the proxy without its Authorization", m)
	}
	if h := p["literal"].Headers; len(h) != 1 || h["anthropic-beta"] != "tools" {
		t.Errorf("literal's headers %q, want only anthropic-beta", h)
	}
	if m := p["byvar"].Models; len(m) != 1 || m[0].Cost["cacheRead"] != 0.125 || p["local"].Note != "a // that is text" {
		t.Errorf("the rest of the file changed: %s", b)
	}
	for name, want := range map[string]string{"settings.json": filepath.Join(real, "settings.json"), "extensions": filepath.Join(real, "extensions")} {
		if got, err := os.Readlink(filepath.Join(o, name)); err != nil || got != want {
			t.Errorf("%s in the run's agent dir: %q, %v, want a link to %s", name, got, err, want)
		}
	}
	for _, name := range []string{"auth.json", "sessions"} {
		if _, err := os.Lstat(filepath.Join(o, name)); !os.IsNotExist(err) {
			t.Errorf("%s is in the run's agent dir (%v)", name, err)
		}
	}
	if got, want := filepath.SplitList(inv.Env[EnvReadOnly]), []string{filepath.Join(real, "extensions"), filepath.Join(real, "settings.json")}; !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", EnvReadOnly, got, want)
	}
	sessions := filepath.Join(real, "sessions", "--"+strings.ReplaceAll(strings.TrimPrefix(ws, "/"), "/", "-")+"--")
	if got := inv.Env[EnvSessionDir]; got != sessions {
		t.Errorf("%s = %q, want %q", EnvSessionDir, got, sessions)
	}
	if fi, err := os.Stat(sessions); err != nil || !fi.IsDir() {
		t.Errorf("the sessions dir was not made: %v", err)
	}
	inv.Cleanup()
	if _, err := os.Stat(o); !os.IsNotExist(err) {
		t.Errorf("the run's agent dir is still there after the run (%v)", err)
	}

	t.Run("operator's session dir, auth.json a credential file", func(t *testing.T) {
		cfg := cfg
		cfg.EnvSet = map[string]string{EnvAgentDir: real, "MY_OPENAI_KEY": "k", EnvSessionDir: "/srv/pi-sessions"}
		cfg.CredentialFiles = []string{filepath.Join(real, "auth.json")}
		inv := invoke(cfg)
		defer inv.Cleanup()
		if _, ok := inv.Env[EnvSessionDir]; ok {
			t.Errorf("%s set to %q over the operator's", EnvSessionDir, inv.Env[EnvSessionDir])
		}
		if got, err := os.Readlink(filepath.Join(inv.Env[EnvAgentDir], "auth.json")); err != nil || got != filepath.Join(real, "auth.json") {
			t.Errorf("auth.json: %q, %v, want a link to the credential file", got, err)
		}
		if strings.Contains(inv.Env[EnvReadOnly], "auth.json") {
			t.Errorf("%s lists auth.json (bound as a credential file): %q", EnvReadOnly, inv.Env[EnvReadOnly])
		}
		if pol, err := cfg.SandboxPolicy(); err != nil || !slices.Equal(pol.LoginFiles, []string{filepath.Join(real, "models.json")}) {
			t.Errorf("login files %q (%v), want models.json alone: auth.json is a credential file", pol.LoginFiles, err)
		}
	})
}

// TestSessionDir is Pi's getDefaultSessionDir.
func TestSessionDir(t *testing.T) {
	if got, want := SessionDir("/a", "/home/u/work:x/ws"), "/a/sessions/--home-u-work-x-ws--"; got != want {
		t.Errorf("SessionDir = %q, want %q", got, want)
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBuiltinProviders: a built-in provider whose key variable the child
// gets is reached with that key (which Pi prefers to an apiKey), at its
// baseUrl in models.json, else at Pi's own; a confined run holding it
// gets an overlay that moves the provider to the proxy, with or without
// a models.json of the operator's.
func TestBuiltinProviders(t *testing.T) {
	env := func(dir string, vars ...string) cli.Config {
		cfg := DefaultConfig()
		cfg.EnvAllow = nil
		cfg.EnvSet = map[string]string{EnvAgentDir: dir}
		for _, v := range vars {
			cfg.EnvSet[v] = "key-of-" + v
		}
		return cfg
	}
	urlsOf := func(cfg cli.Config) []string {
		t.Helper()
		urls, err := ConfigBaseURLs(cfg.ChildEnv)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range urls {
			out = append(out, strings.Join([]string{u.URL, u.KeyVar, u.Key.Reveal(), u.Header}, " "))
		}
		return out
	}
	none := t.TempDir() // no models.json
	if got, want := urlsOf(env(none, "ANTHROPIC_API_KEY", "GEMINI_API_KEY")), []string{
		"https://api.anthropic.com ANTHROPIC_API_KEY  x-api-key",
		"https://generativelanguage.googleapis.com/v1beta GEMINI_API_KEY  x-goog-api-key",
	}; !slices.Equal(got, want) {
		t.Errorf("no models.json: %q, want %q", got, want)
	}
	if got := urlsOf(env(none)); got != nil {
		t.Errorf("no key variable: %q, want none (Pi's default egress)", got)
	}
	moved := t.TempDir()
	write(t, filepath.Join(moved, "models.json"), `{"providers": {
  "anthropic": {"baseUrl": "https://gw.example/anthropic", "apiKey": "sk-literal-0123456789"},
  "openai": {"models": [{"id": "gpt-x"}]}}}`)
	if got, want := urlsOf(env(moved, "ANTHROPIC_API_KEY", "OPENAI_API_KEY")), []string{
		"https://gw.example/anthropic ANTHROPIC_API_KEY  x-api-key",
		"https://api.openai.com/v1 OPENAI_API_KEY  bearer",
	}; !slices.Equal(got, want) {
		t.Errorf("moved: %q, want %q", got, want)
	}
	if got, want := urlsOf(env(moved)), []string{"https://gw.example/anthropic  sk-literal-0123456789 x-api-key"}; !slices.Equal(got, want) {
		t.Errorf("moved, no key variable: %q, want the literal apiKey", got)
	}

	for _, dir := range []string{none, moved} {
		cfg := env(dir, "ANTHROPIC_API_KEY", "OPENAI_API_KEY")
		pol, err := cfg.SandboxPolicy()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Confine = keyedConfiner{keyed: pol.Keyed}
		inv, err := spec(cfg).Invoke(Request{Prompt: "hi"}, adapter.Call{}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(inv.Env[EnvAgentDir], "models.json"))
		inv.Cleanup()
		if err != nil {
			t.Fatalf("%s: the run's models.json: %v", dir, err)
		}
		var doc struct {
			Providers map[string]struct {
				BaseURL string `json:"baseUrl"`
				APIKey  string `json:"apiKey"`
			} `json:"providers"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		p := doc.Providers
		if dir == none && (p["anthropic"].BaseURL != "http://api.anthropic.com:443" || p["openai"].BaseURL != "http://api.openai.com:443/v1" || len(p) != 2) {
			t.Errorf("no models.json: the run's is %s", b)
		}
		if dir == moved && (p["anthropic"].BaseURL != "http://gw.example:443/anthropic" || p["anthropic"].APIKey != sandbox.Placeholder ||
			p["openai"].BaseURL != "http://api.openai.com:443/v1") {
			t.Errorf("moved: the run's models.json is %s", b)
		}
	}
}

// BenchmarkOverlay times what a confined, keyed run's Invoke adds: the
// overlay's directory, its models.json, the links to the real agent
// directory's entries and the sessions directory, then its removal.
func BenchmarkOverlay(b *testing.B) {
	real := b.TempDir()
	for name, text := range map[string]string{"models.json": keyedModels, "settings.json": "{}", "auth.json": "{}", "keybindings.json": "{}",
		"AGENTS.md": "# agents", "extensions/x.ts": "", "skills/s/SKILL.md": "", "prompts/p.md": "", "bin/fd": ""} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(real, name)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(real, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.EnvAllow = nil
	cfg.EnvSet = map[string]string{EnvAgentDir: real, "MY_OPENAI_KEY": "sk-openai-real-0123456789"}
	pol, err := cfg.SandboxPolicy()
	if err != nil {
		b.Fatal(err)
	}
	cfg.Confine = keyedConfiner{keyed: pol.Keyed}
	s, ws := spec(cfg), b.TempDir()
	b.ResetTimer()
	for b.Loop() {
		inv, err := s.Invoke(Request{Prompt: "hi"}, adapter.Call{}, ws)
		if err != nil || inv.Cleanup == nil {
			b.Fatal(err, "no overlay")
		}
		inv.Cleanup()
	}
}
