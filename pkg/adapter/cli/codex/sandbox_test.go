package codex

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestInvokeSandboxMode: a run the runner's sandbox confines gets
// danger-full-access for workspace-write (Codex's own sandbox cannot be
// built inside it when the runner is root), -s on a new thread and
// sandbox_mode on resume; read-only keeps Codex's sandbox, and an
// unconfined run always gets what it asked for.
func TestInvokeSandboxMode(t *testing.T) {
	const thread = "01a24f10-84af-7852-954a-56ee3f12d75e"
	for _, tc := range []struct {
		sandbox  string
		confined bool
		want     string
	}{
		{"", false, "workspace-write"},
		{"workspace-write", false, "workspace-write"},
		{"read-only", false, "read-only"},
		{"", true, "danger-full-access"},
		{"workspace-write", true, "danger-full-access"},
		{"read-only", true, "read-only"},
	} {
		for _, resume := range []string{"", thread} {
			req := Request{Prompt: "hi", Sandbox: tc.sandbox, ResumeThreadID: resume}
			inv, err := invoke(req, adapter.Call{Model: "gpt-5.5"}, "/w", "", tc.confined)
			if err != nil {
				t.Fatal(err)
			}
			flag, value := "-s", tc.want
			if resume != "" {
				flag, value = "-c", `sandbox_mode="`+tc.want+`"`
			}
			i := slices.Index(inv.Args, value)
			if i < 1 || inv.Args[i-1] != flag {
				t.Errorf("sandbox %q confined %t resume %t: argv %q, want %s %s", tc.sandbox, tc.confined, resume != "", inv.Args, flag, value)
			}
		}
	}
}

// TestConfigBaseURLs: a sandboxed run's egress follows the base_url of the
// provider config.toml selects, found by CODEX_HOME or else HOME, and
// falls back to the default host when the file names none.
func TestConfigBaseURLs(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	codexHome := t.TempDir()
	userHome := t.TempDir()
	for _, tc := range []struct {
		name, file string
		set        map[string]string
		want       []string
	}{
		{"the selected provider's base_url", fakeConfigTOML, map[string]string{EnvCodexHome: codexHome}, []string{"127.0.0.1:18702"}},
		{"found by HOME without CODEX_HOME", fakeConfigTOML, map[string]string{"HOME": userHome}, []string{"127.0.0.1:18702"}},
		{"a profile's provider", "model_provider = \"a\"\nprofile = \"azure\"\n[profiles.azure]\nmodel_provider = \"az\"\n" +
			"[model_providers.a]\nbase_url = \"http://a.example:8000/v1\"\n[model_providers.az]\nbase_url = \"https://x.openai.azure.com/openai\"\n",
			map[string]string{EnvCodexHome: codexHome}, []string{"x.openai.azure.com:443"}},
		{"a provider not selected is not reached", "[model_providers.a]\nbase_url = \"http://a.example/v1\"\n",
			map[string]string{EnvCodexHome: codexHome}, []string{"api.openai.com:443"}},
		{"no file: the default host", "", map[string]string{EnvCodexHome: t.TempDir()}, []string{"api.openai.com:443"}},
		{"openai_base_url moves the built-in provider", "check_for_update_on_startup = false\nopenai_base_url = \"https://llm-gw.internal/openai/v1\"\n",
			map[string]string{EnvCodexHome: codexHome}, []string{"llm-gw.internal:443"}},
		{"openai_base_url is not a custom provider's", "openai_base_url = \"https://llm-gw.internal/v1\"\n" + fakeConfigTOML,
			map[string]string{EnvCodexHome: codexHome}, []string{"127.0.0.1:18702"}},
		{"OPENAI_BASE_URL, which Codex 0.171 does not read, beside the built-in provider's default", "",
			map[string]string{EnvCodexHome: t.TempDir(), "OPENAI_BASE_URL": "http://proxy.internal:3128/v1"}, []string{"proxy.internal:3128", "api.openai.com:443"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.file != "" {
				for _, d := range []string{codexHome, filepath.Join(userHome, ".codex")} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(d, "config.toml"), []byte(tc.file), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			cfg := DefaultConfig()
			cfg.EnvSet = tc.set
			pol, err := cfg.SandboxPolicy()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(pol.Egress, tc.want) {
				t.Errorf("egress %q, want %q", pol.Egress, tc.want)
			}
		})
	}
	t.Run("a bad base_url names the file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte("model_provider = \"m\"\n[model_providers.m]\nbase_url = \"ftp://x\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.EnvSet = map[string]string{EnvCodexHome: dir}
		if _, err := cfg.SandboxPolicy(); err == nil || !strings.Contains(err.Error(), "model_providers.m.base_url") {
			t.Errorf("err %v, want one naming model_providers.m.base_url", err)
		}
	})
}

// keyedSandbox is a Confiner that holds the key of one API, as a
// *sandbox.Sandbox built with it keyed does (KeyedURL).
type keyedSandbox struct{ api, proxy string }

func (keyedSandbox) Confine(*exec.Cmd) (proc.Confinement, error) { return nil, errors.New("not run") }
func (s keyedSandbox) KeyedURL(api string) (string, bool)        { return s.proxy, api == s.api }

// TestKeyedProvider: the key of the provider config.toml selects, named
// by its env_key, is held by the runner's proxy when the child would get
// it (Authorization: Bearer, no base-URL variable), and a confined run's
// argv points that provider's base_url at the proxy, before the prompt.
func TestKeyedProvider(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(fakeConfigTOML), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.EnvSet = map[string]string{EnvCodexHome: home, "FAKE_OPENAI_API_KEY": "sk-real"}
	pol, err := cfg.SandboxPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if len(pol.Keyed) != 1 || pol.Keyed[0].KeyVar != "FAKE_OPENAI_API_KEY" || pol.Keyed[0].URL != "http://127.0.0.1:18702/v1" ||
		pol.Keyed[0].Header != sandbox.HeaderBearer || pol.Keyed[0].BaseURLVar != "" || pol.Keyed[0].Key.Reveal() != "sk-real" {
		t.Fatalf("keyed %+v, want the fake provider's key, Bearer", pol.Keyed)
	}
	if got := ProxyArgs(cfg); got != nil {
		t.Errorf("unconfined ProxyArgs = %q, want none", got)
	}
	cfg.Confine = keyedSandbox{api: "http://127.0.0.1:18702/v1", proxy: "http://127.0.0.1:40001/v1"}
	inv, err := spec(cfg).Invoke(Request{Prompt: "hi"}, adapter.Call{Model: "gpt-5.5"}, "/w")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-c", `model_providers.fake.base_url="http://127.0.0.1:40001/v1"`, "--", "hi"}
	if got := inv.Args[len(inv.Args)-4:]; !slices.Equal(got, want) {
		t.Errorf("argv %q, want it to end %q", inv.Args, want)
	}
	cfg.Confine = keyedSandbox{api: "http://elsewhere/v1"}
	if got := ProxyArgs(cfg); got != nil {
		t.Errorf("ProxyArgs for a key the runner does not hold = %q, want none", got)
	}
}

// TestBuiltinProviderKeyed: for the built-in openai provider (no
// provider selected, or "openai") the runner's proxy holds the key of
// CODEX_API_KEY, which codex exec reads, else of OPENAI_API_KEY, at
// openai_base_url or else the default, and a confined run's argv points
// openai_base_url at the proxy, before the prompt; a child given two
// different keys is refused, and one given none keys nothing.
func TestBuiltinProviderKeyed(t *testing.T) {
	moved := "openai_base_url = \"https://llm-gw.internal/openai/v1\"\n"
	for _, tc := range []struct {
		name, file string
		set        map[string]string
		wantVar    string
		wantURL    string
		wantErr    string
	}{
		{"CODEX_API_KEY, no config", "", map[string]string{EnvCodexAPIKey: "sk-codex"}, EnvCodexAPIKey, DefaultOpenAIBaseURL, ""},
		{"OPENAI_API_KEY, openai selected", "model_provider = \"openai\"\n", map[string]string{EnvAPIKey: "sk-openai"}, EnvAPIKey, DefaultOpenAIBaseURL, ""},
		{"the same key in both", "", map[string]string{EnvAPIKey: "sk-same", EnvCodexAPIKey: "sk-same"}, EnvCodexAPIKey, DefaultOpenAIBaseURL, ""},
		{"openai_base_url", moved, map[string]string{EnvCodexAPIKey: "sk-codex"}, EnvCodexAPIKey, "https://llm-gw.internal/openai/v1", ""},
		{"no key", moved, map[string]string{}, "", "", ""},
		{"two keys", "", map[string]string{EnvAPIKey: "sk-openai", EnvCodexAPIKey: "sk-codex"}, "", "", "different keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg := DefaultConfig()
			cfg.EnvAllow = nil
			cfg.EnvSet = map[string]string{EnvCodexHome: home}
			for k, v := range tc.set {
				cfg.EnvSet[k] = v
			}
			pol, err := cfg.SandboxPolicy()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantVar == "" {
				if len(pol.Keyed) != 0 {
					t.Fatalf("keyed %+v, want none", pol.Keyed)
				}
				return
			}
			if len(pol.Keyed) != 1 || pol.Keyed[0].KeyVar != tc.wantVar || pol.Keyed[0].URL != tc.wantURL ||
				pol.Keyed[0].Header != sandbox.HeaderBearer || pol.Keyed[0].Key.Reveal() != tc.set[tc.wantVar] {
				t.Fatalf("keyed %+v, want %s's key at %s, Bearer", pol.Keyed, tc.wantVar, tc.wantURL)
			}
			if got := ProxyArgs(cfg); got != nil {
				t.Errorf("unconfined ProxyArgs = %q, want none", got)
			}
			cfg.Confine = keyedSandbox{api: tc.wantURL, proxy: "http://127.0.0.1:40001/v1"}
			inv, err := spec(cfg).Invoke(Request{Prompt: "hi"}, adapter.Call{Model: "gpt-5.5"}, "/w")
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"-c", `openai_base_url="http://127.0.0.1:40001/v1"`, "--", "hi"}
			if got := inv.Args[len(inv.Args)-4:]; !slices.Equal(got, want) {
				t.Errorf("argv %q, want it to end %q", inv.Args, want)
			}
		})
	}
}

// TestLoginFiles: a sandboxed run's policy masks the auth.json of the
// child's Codex home (CODEX_HOME, else $HOME/.codex), unless the
// profile's credential_files names it.
func TestLoginFiles(t *testing.T) {
	codexHome, userHome := t.TempDir(), t.TempDir()
	for _, tc := range []struct {
		name  string
		set   map[string]string
		creds []string
		want  []string
	}{
		{"CODEX_HOME", map[string]string{EnvCodexHome: codexHome}, nil, []string{filepath.Join(codexHome, AuthFile)}},
		{"HOME", map[string]string{"HOME": userHome}, nil, []string{filepath.Join(userHome, ".codex", AuthFile)}},
		{"a credential file", map[string]string{EnvCodexHome: codexHome}, []string{codexHome + "/./" + AuthFile}, nil},
	} {
		cfg := DefaultConfig()
		cfg.EnvAllow, cfg.EnvSet, cfg.CredentialFiles = nil, tc.set, tc.creds
		pol, err := cfg.SandboxPolicy()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(pol.LoginFiles, tc.want) {
			t.Errorf("%s: login files %q, want %q", tc.name, pol.LoginFiles, tc.want)
		}
	}
}

// TestHiddenLogin: a confined codex exec run whose built-in provider
// could log in only with the auth.json its sandbox masks fails before
// it starts, as an auth error naming the file, CODEX_API_KEY and
// credential_files; a key variable, the file named in credential_files,
// a provider of config.toml's own, no file or no sandbox let it run.
// codex-acp, which takes no key variable, needs the file regardless.
func TestHiddenLogin(t *testing.T) {
	home := t.TempDir()
	login := filepath.Join(home, AuthFile)
	if err := os.WriteFile(login, []byte(`{"auth_mode":"chatgpt"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	confined := keyedSandbox{api: "none"}
	for _, tc := range []struct {
		name    string
		file    string
		set     map[string]string
		creds   []string
		confine proc.Confiner
		keyed   bool
		hidden  bool
	}{
		{"login only", "", nil, nil, confined, true, true},
		{"CODEX_API_KEY", "", map[string]string{EnvCodexAPIKey: "sk-codex"}, nil, confined, true, false},
		{"credential_files", "", nil, []string{login}, confined, true, false},
		{"a provider of config.toml's own", fakeConfigTOML, nil, nil, confined, true, false},
		{"not confined", "", nil, nil, nil, true, false},
		{"codex-acp with a key variable", "", map[string]string{EnvAPIKey: "sk-openai"}, nil, confined, false, true},
	} {
		if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.EnvAllow, cfg.CredentialFiles, cfg.Confine = nil, tc.creds, tc.confine
		cfg.EnvSet = map[string]string{EnvCodexHome: home}
		for k, v := range tc.set {
			cfg.EnvSet[k] = v
		}
		err := HiddenLogin(cfg, tc.keyed)
		if !tc.hidden {
			if err != nil {
				t.Errorf("%s: %v, want none", tc.name, err)
			}
			continue
		}
		var we *wire.Error
		if !errors.As(err, &we) || we.Class != wire.ProviderAuthError {
			t.Fatalf("%s: err %v, want a %s", tc.name, err, wire.ProviderAuthError)
		}
		for _, s := range []string{login, EnvCodexAPIKey, "credential_files", map[bool]string{true: "env_allow", false: "env_key"}[tc.keyed]} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not name %s", tc.name, err, s)
			}
		}
		if tc.keyed {
			if _, err := spec(cfg).Invoke(Request{Prompt: "hi"}, adapter.Call{Model: "gpt-5.5"}, "/w"); !errors.As(err, &we) {
				t.Errorf("%s: Invoke = %v, want the error", tc.name, err)
			}
		}
	}
	if err := os.Remove(login); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.EnvAllow, cfg.Confine, cfg.EnvSet = nil, confined, map[string]string{EnvCodexHome: home}
	if err := HiddenLogin(cfg, true); err != nil {
		t.Errorf("no auth.json: %v, want none", err)
	}
}
