package profile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/profile"
)

func TestShippedProfilesLoad(t *testing.T) {
	r, err := profile.Load("../../profiles")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fixture", "claude-code", "codex", "gemini", "pi", "openai", "anthropic", "ollama", "nlip-example"} {
		p, pin, err := r.Resolve(name)
		if err != nil {
			t.Fatalf("resolve %s: %v", name, err)
		}
		if pin.Provider != p.Adapter || pin.Model != p.Model || len(pin.ProfileHash) != 64 || !strings.HasPrefix(pin.RegistryVersion, name+":") {
			t.Errorf("pin of %s = %+v", name, pin)
		}
	}
	if p, _, err := r.Resolve("sonnet"); err != nil || p.Name != "anthropic" {
		t.Errorf("alias sonnet resolved to %s; it belongs to the anthropic profile", p.Name)
	}
	if p, _, err := r.Resolve("gemini/gemini-2.5-flash"); err != nil || p.Name != "gemini" {
		t.Errorf("provider/model = %v, %v", p, err)
	}
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

const base = `schema: 1
name: x
adapter: fixture
transport: in_process
model: m1
pricing: {input: "1.5", output: "0"}
`

func TestLoadRejects(t *testing.T) {
	tests := []struct {
		name, body, wantField string
	}{
		{"unknown field", base + "temperature: 1\n", "temperature"},
		{"bad transport", strings.Replace(base, "in_process", "carrier-pigeon", 1), "transport"},
		{"bad price", strings.Replace(base, `"1.5"`, `"-1"`, 1), "pricing.input"},
		{"unknown token class", base + "pricing: {input: \"1\", vibes: \"2\"}\n", ""},
		{"subprocess without binary", strings.Replace(base, "in_process", "subprocess", 1), "binary"},
		{"remote with a bad base_url", strings.Replace(base, "in_process", "remote", 1) + "base_url: ftp://x\n", "base_url"},
		{"zero attempts", base + "policy: {max_attempts: -1}\n", "policy.max_attempts"},
		{"schema", strings.Replace(base, "schema: 1", "schema: 2", 1), "schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "x.yaml", tt.body)
			_, err := profile.Load(dir)
			if !errors.Is(err, profile.ErrInvalid) || !strings.Contains(err.Error(), "x.yaml") || !strings.Contains(err.Error(), tt.wantField) {
				t.Fatalf("Load = %v, want ErrInvalid naming x.yaml and %q", err, tt.wantField)
			}
		})
	}
}

func TestAliasCollision(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", base+"aliases: [fast]\n")
	write(t, dir, "b.yaml", strings.Replace(base, "name: x", "name: y", 1)+"aliases: [fast]\n")
	if _, err := profile.Load(dir); err == nil || !strings.Contains(err.Error(), "b.yaml") || !strings.Contains(err.Error(), `"fast"`) {
		t.Fatalf("Load = %v, want an alias collision naming b.yaml", err)
	}
}

func TestHashIgnoresFormattingNotValues(t *testing.T) {
	hash := func(body string) (string, string) {
		dir := t.TempDir()
		write(t, dir, "x.yaml", body)
		r, err := profile.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, pin, err := r.Resolve("x")
		if err != nil {
			t.Fatal(err)
		}
		return pin.ProfileHash, pin.RegistryVersion
	}
	h1, v1 := hash(base)
	reformatted := "# a comment\nmodel: m1\npricing:\n  output: \"0\"\n  input: \"1.5\"\ntransport: in_process\nadapter: fixture\nname: x\nschema: 1\n"
	if h2, v2 := hash(reformatted); h2 != h1 || v2 != v1 {
		t.Fatalf("reformatted profile changed hash %s → %s", h1, h2)
	}
	if h3, v3 := hash(strings.Replace(base, `"1.5"`, `"1.6"`, 1)); h3 == h1 || v3 == v1 {
		t.Fatal("a changed price kept the hash")
	}
}
