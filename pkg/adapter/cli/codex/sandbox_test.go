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
		{"OPENAI_BASE_URL for the built-in provider", "", map[string]string{EnvCodexHome: t.TempDir(), "OPENAI_BASE_URL": "http://proxy.internal:3128/v1"}, []string{"proxy.internal:3128"}},
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
