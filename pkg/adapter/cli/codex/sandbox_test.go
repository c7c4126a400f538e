package codex

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
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
