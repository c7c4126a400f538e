package pi

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestConfigBaseURLs: a sandboxed run's egress follows every baseUrl Pi's
// models.json names (a provider's, a model's), read as Pi reads it (//
// comments, trailing commas), found by PI_CODING_AGENT_DIR or else HOME;
// with none, Pi's default host.
func TestConfigBaseURLs(t *testing.T) {
	const models = `{
  // the proxy in front of Anthropic
  "providers": {
    "proxy": {"baseUrl": "https://llm-proxy.internal/anthropic", "api": "anthropic-messages", "apiKey": "K",
      "models": [{"id": "m", "baseUrl": "http://10.0.0.7:8080/v1",},],},
    "local": {"baseUrl": "http://127.0.0.1:11434/v1", "note": "a // that is text"},
    "anthropic": {"headers": {"x": "y"}}
  }
}`
	agentDir := t.TempDir()
	userHome := t.TempDir()
	for _, d := range []string{agentDir, filepath.Join(userHome, ".pi", "agent")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "models.json"), []byte(models), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"127.0.0.1:11434", "llm-proxy.internal:443", "10.0.0.7:8080"}
	for _, tc := range []struct {
		name string
		set  map[string]string
		want []string
	}{
		{"PI_CODING_AGENT_DIR", map[string]string{EnvAgentDir: agentDir}, want},
		{"HOME without PI_CODING_AGENT_DIR", map[string]string{"HOME": userHome}, want},
		{"no models.json: Pi's default host", map[string]string{EnvAgentDir: t.TempDir()}, []string{"api.anthropic.com:443"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.EnvAllow = nil
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
	t.Run("a models.json Pi cannot read is an error naming it", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"providers": {`), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.EnvSet = map[string]string{EnvAgentDir: dir}
		if _, err := cfg.SandboxPolicy(); err == nil || !strings.Contains(err.Error(), "models.json") {
			t.Errorf("err %v, want one naming models.json", err)
		}
	})
}
