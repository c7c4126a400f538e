package cli_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
)

// TestSandboxPolicyKeys: a Key whose variable the child would get makes
// its API keyed (the base-URL variable's, else the default), with the
// key from EnvSet or the runner's environment; one the child would not
// get still gives its API's egress when the child's environment names
// it (a login of the CLI's own), and none otherwise.
func TestSandboxPolicyKeys(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-runner-0123456789")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:4010")
	t.Setenv("GEMINI_API_KEY", "")
	keys := []cli.Key{cli.AnthropicKey, cli.GeminiKey}
	for _, tc := range []struct {
		name      string
		cfg       cli.Config
		egress    []string
		keyed     []string // URL KeyVar BaseURLVar Header
		keyValues []string
	}{
		{"runner's key and base URL",
			cli.Config{EnvAllow: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"}, Keys: keys, Egress: []string{"default:443"}},
			[]string{"127.0.0.1:4010"}, []string{"http://127.0.0.1:4010 ANTHROPIC_API_KEY ANTHROPIC_BASE_URL x-api-key"}, []string{"sk-runner-0123456789"}},
		{"runner's key, default URL",
			cli.Config{EnvAllow: []string{"ANTHROPIC_API_KEY"}, Keys: keys},
			[]string{"api.anthropic.com:443"}, []string{"https://api.anthropic.com ANTHROPIC_API_KEY ANTHROPIC_BASE_URL x-api-key"}, []string{"sk-runner-0123456789"}},
		{"profile's key",
			cli.Config{EnvSet: map[string]string{"GEMINI_API_KEY": "g-profile-0123456789"}, Keys: keys},
			[]string{"generativelanguage.googleapis.com:443"}, []string{"https://generativelanguage.googleapis.com GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL x-goog-api-key"}, []string{"g-profile-0123456789"}},
		{"named, unset: a login of its own",
			cli.Config{EnvAllow: []string{"GEMINI_API_KEY"}, Keys: keys},
			[]string{"generativelanguage.googleapis.com:443"}, nil, nil},
		{"not named",
			cli.Config{EnvAllow: []string{"HOME"}, Keys: keys, Egress: []string{"default:443"}},
			[]string{"default:443"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.cfg.SandboxPolicy()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Egress, tc.egress) {
				t.Errorf("egress %q, want %q", p.Egress, tc.egress)
			}
			var keyed, values []string
			for _, k := range p.Keyed {
				keyed = append(keyed, strings.Join([]string{k.URL, k.KeyVar, k.BaseURLVar, k.Header}, " "))
				values = append(values, k.Key.Reveal())
			}
			if !slices.Equal(keyed, tc.keyed) || !slices.Equal(values, tc.keyValues) {
				t.Errorf("keyed %q (keys %q), want %q (%q)", keyed, values, tc.keyed, tc.keyValues)
			}
		})
	}
}

// TestWithoutKeys: no key variable reaches a child that has no network.
func TestWithoutKeys(t *testing.T) {
	c := cli.Config{EnvAllow: []string{"ANTHROPIC_API_KEY", "HOME"}, EnvSet: map[string]string{"GEMINI_API_KEY": "g", "X": "y"},
		Keys: []cli.Key{cli.AnthropicKey, cli.GeminiKey}}
	w := c.WithoutKeys()
	if !slices.Equal(w.EnvAllow, []string{"HOME"}) || len(w.EnvSet) != 1 || w.EnvSet["X"] != "y" || w.Keys != nil {
		t.Errorf("WithoutKeys = allow %q set %q keys %v", w.EnvAllow, w.EnvSet, w.Keys)
	}
	if len(c.EnvAllow) != 2 || len(c.EnvSet) != 2 {
		t.Error("WithoutKeys changed its receiver")
	}
	// The variable a CLI's configuration file names for its key too.
	c = cli.Config{EnvAllow: []string{"CFG_KEY", "HOME"}, EnvSet: map[string]string{"CFG_KEY": "k", "X": "y"},
		ConfigBaseURLs: func(env func(string) (string, bool)) ([]cli.BaseURL, error) {
			if v, _ := env("CFG_KEY"); v == "" {
				return nil, nil
			}
			return []cli.BaseURL{{URL: "https://api.example/v1", KeyVar: "CFG_KEY", Header: sandbox.HeaderBearer}}, nil
		}}
	if w := c.WithoutKeys(); !slices.Equal(w.EnvAllow, []string{"HOME"}) || len(w.EnvSet) != 1 || w.EnvSet["X"] != "y" {
		t.Errorf("WithoutKeys of a config file's key = allow %q set %q", w.EnvAllow, w.EnvSet)
	}
	// And another variable holding the same key (Codex's CODEX_API_KEY
	// beside OPENAI_API_KEY).
	c.EnvSet["OTHER_KEY"] = "k"
	if w := c.WithoutKeys(); !slices.Equal(w.EnvAllow, []string{"HOME"}) || len(w.EnvSet) != 1 || w.EnvSet["X"] != "y" {
		t.Errorf("WithoutKeys of a key held by two variables = allow %q set %q", w.EnvAllow, w.EnvSet)
	}
}

// TestProxyURL: an unconfined CLI has no proxy URL; a confined one has
// one for the API whose key its sandbox holds, and for no other.
func TestProxyURL(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-openai-0123456789")
	c := cli.Config{EnvAllow: []string{"OPENAI_API_KEY"},
		Keys: []cli.Key{{Var: "OPENAI_API_KEY", URL: "https://api.openai.com/v1", Header: sandbox.HeaderBearer}}}
	if u, ok := c.ProxyURL("https://api.openai.com/v1"); ok {
		t.Errorf("unconfined: ProxyURL = %q, want none", u)
	}
	p, err := c.SandboxPolicy()
	if err != nil {
		t.Fatal(err)
	}
	s, err := sandbox.New(sandbox.Config{}, p)
	if err != nil {
		t.Fatal(err)
	}
	c.Confine = s
	if u, ok := c.ProxyURL("https://api.openai.com/v1"); !ok || u != "http://api.openai.com:443/v1" {
		t.Errorf("confined: ProxyURL = %q, %v, want http://api.openai.com:443/v1", u, ok)
	}
	if u, ok := c.ProxyURL("https://api.anthropic.com"); ok {
		t.Errorf("confined: ProxyURL of another API = %q, want none", u)
	}
}
