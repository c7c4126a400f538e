package profile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// loadOne loads a directory holding only x.yaml of body, failing t if it
// does not load.
func loadOne(t *testing.T, body string) *profile.Registry {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, "x.yaml", body)
	r, err := profile.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const base = `schema: 1
name: x
adapter: fixture
transport: in_process
model: m1
pricing: {input: "1.5", output: "0"}
`

// remote is a valid remote profile for the loader's base_url checks.
const remote = `schema: 1
name: r
adapter: openai
transport: remote
model: gpt-x
pricing: {input: "1", output: "1"}
`

// TestLoadRejects has one case per problem the loader finds without the
// adapters: each fails Load with ErrInvalid, naming the file and the field.
func TestLoadRejects(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]string // file name → content
		// wantFile and wantField must both be in the error; want, if set, too.
		wantFile, wantField, want string
	}{
		{name: "unknown field", in: map[string]string{"x.yaml": base + "temperature: 1\n"}, wantFile: "x.yaml", wantField: "temperature", want: "unknown field"},
		{name: "two documents", in: map[string]string{"x.yaml": base + "---\n" + base}, wantFile: "x.yaml", wantField: "", want: "one profile document per file"},
		{name: "unknown capability", in: map[string]string{"x.yaml": base + "capabilities: {resumable: false, transport: remote}\n"}, wantFile: "x.yaml", wantField: "capabilities.transport", want: "unknown field"},
		{name: "field defined twice", in: map[string]string{"x.yaml": base + "model: m2\n"}, wantFile: "x.yaml", wantField: "model", want: "defined twice"},
		{name: "wrong type", in: map[string]string{"x.yaml": base + "context_window: big\n"}, wantFile: "x.yaml", wantField: "context_window", want: "into int"},
		{name: "wrong type in a map", in: map[string]string{"x.yaml": strings.Replace(base, `"1.5"`, "[1]", 1)}, wantFile: "x.yaml", wantField: "pricing.input", want: "!!seq"},
		{name: "wrong type of a section", in: map[string]string{"x.yaml": base + "policy: 3\n"}, wantFile: "x.yaml", wantField: "policy", want: "mapping"},
		{name: "bad transport", in: map[string]string{"x.yaml": strings.Replace(base, "in_process", "carrier-pigeon", 1)}, wantFile: "x.yaml", wantField: "transport"},
		{name: "bad price", in: map[string]string{"x.yaml": strings.Replace(base, `"1.5"`, `"-1"`, 1)}, wantFile: "x.yaml", wantField: "pricing.input"},
		{name: "unknown token class", in: map[string]string{"x.yaml": strings.Replace(base, `output: "0"`, `vibes: "2"`, 1)}, wantFile: "x.yaml", wantField: "pricing.vibes"},
		{name: "subprocess without binary", in: map[string]string{"x.yaml": strings.Replace(base, "in_process", "subprocess", 1)}, wantFile: "x.yaml", wantField: "binary"},
		{name: "credential_files on an in-process profile", in: map[string]string{"x.yaml": base + "credential_files: [/root/.claude/.credentials.json]\n"}, wantFile: "x.yaml", wantField: "binary", want: "credential_files are for subprocess profiles only"},
		{name: "relative credential_files", in: map[string]string{"x.yaml": strings.Replace(base, "in_process", "subprocess", 1) + "binary: claude\ncredential_files: [.claude/.credentials.json]\n"}, wantFile: "x.yaml", wantField: "credential_files", want: "absolute path"},
		{name: "remote field on an in-process profile", in: map[string]string{"x.yaml": base + "base_url: https://example.com\n"}, wantFile: "x.yaml", wantField: "base_url"},
		{name: "remote without base_url", in: map[string]string{"r.yaml": remote}, wantFile: "r.yaml", wantField: "base_url", want: "required"},
		{name: "base_url scheme", in: map[string]string{"r.yaml": remote + "base_url: ftp://example.com\n"}, wantFile: "r.yaml", wantField: "base_url", want: "scheme"},
		{name: "base_url with userinfo", in: map[string]string{"r.yaml": remote + "base_url: https://user:pw@example.com\n"}, wantFile: "r.yaml", wantField: "base_url", want: "userinfo"},
		{name: "loopback base_url without allow_loopback", in: map[string]string{"r.yaml": remote + "base_url: http://127.0.0.1:8080\n"}, wantFile: "r.yaml", wantField: "base_url", want: "allow_loopback: true"},
		{name: "localhost base_url without allow_loopback", in: map[string]string{"r.yaml": remote + "base_url: http://localhost:11434\n"}, wantFile: "r.yaml", wantField: "base_url", want: "allow_loopback: true"},
		{name: "metadata base_url even with allow_loopback", in: map[string]string{"r.yaml": remote + "base_url: http://169.254.169.254/latest\nallow_loopback: true\n"}, wantFile: "r.yaml", wantField: "base_url", want: "169.254.169.254"},
		{name: "private base_url", in: map[string]string{"r.yaml": remote + "base_url: https://10.1.2.3/v1\n"}, wantFile: "r.yaml", wantField: "base_url", want: "private"},
		{name: "resumable without resume_field", in: map[string]string{"x.yaml": base + "capabilities: {resumable: true}\n"}, wantFile: "x.yaml", wantField: "capabilities.resume_field"},
		{name: "negative attempts", in: map[string]string{"x.yaml": base + "policy: {max_attempts: -1}\n"}, wantFile: "x.yaml", wantField: "policy.max_attempts", want: "must be > 0, got -1"},
		// An explicit 0 is refused, not taken for "absent" (docs/contract.md §4.5).
		{name: "zero attempts", in: map[string]string{"x.yaml": base + "policy: {max_attempts: 0}\n"}, wantFile: "x.yaml", wantField: "policy.max_attempts", want: "must be > 0, got 0"},
		{name: "zero attempts in block style", in: map[string]string{"x.yaml": base + "policy:\n  max_active: 2\n  max_attempts: 0\n"}, wantFile: "x.yaml", wantField: "policy.max_attempts", want: "must be > 0, got 0"},
		{name: "null attempts", in: map[string]string{"x.yaml": base + "policy: {max_attempts: null}\n"}, wantFile: "x.yaml", wantField: "policy.max_attempts", want: "must be > 0"},
		{name: "zero active", in: map[string]string{"x.yaml": base + "policy: {max_active: 0}\n"}, wantFile: "x.yaml", wantField: "policy.max_active", want: "must be > 0, got 0"},
		{name: "negative active", in: map[string]string{"x.yaml": base + "policy: {max_active: -3}\n"}, wantFile: "x.yaml", wantField: "policy.max_active", want: "must be > 0, got -3"},
		{name: "short suspend grace", in: map[string]string{"x.yaml": base + "session: {suspend_after: 500ms}\n"}, wantFile: "x.yaml", wantField: "session.suspend_after", want: "must be at least 1s, got 500ms"},
		{name: "short suspended timeout", in: map[string]string{"x.yaml": base + "session: {suspended_timeout: 10ms}\n"}, wantFile: "x.yaml", wantField: "session.suspended_timeout", want: "must be at least 1s, got 10ms"},
		{name: "negative waiting", in: map[string]string{"x.yaml": base + "policy: {max_waiting: -1}\n"}, wantFile: "x.yaml", wantField: "policy.max_waiting", want: "must be >= 0, got -1"},
		{name: "zero schema", in: map[string]string{"x.yaml": strings.Replace(base, "schema: 1", "schema: 0", 1)}, wantFile: "x.yaml", wantField: "schema", want: "version 0"},
		{name: "schema", in: map[string]string{"x.yaml": strings.Replace(base, "schema: 1", "schema: 2", 1)}, wantFile: "x.yaml", wantField: "schema"},
		{name: "duplicate name", in: map[string]string{"a.yaml": base, "b.yaml": strings.Replace(base, "model: m1", "model: m2", 1)}, wantFile: "b.yaml", wantField: "name", want: "a.yaml"},
		{name: "alias collision", in: map[string]string{
			"a.yaml": base + "aliases: [fast]\n",
			"b.yaml": strings.NewReplacer("name: x", "name: y", "model: m1", "model: m2").Replace(base) + "aliases: [fast]\n",
		}, wantFile: "b.yaml", wantField: "aliases", want: `"fast"`},
		{name: "alias is another profile's name", in: map[string]string{
			"a.yaml": base + "aliases: [y]\n",
			"b.yaml": strings.NewReplacer("name: x", "name: y", "model: m1", "model: m2").Replace(base),
		}, wantFile: "a.yaml", wantField: "aliases", want: `"y" is the name of profile y`},
		{name: "duplicate adapter and model", in: map[string]string{
			"a.yaml": base,
			"b.yaml": strings.Replace(base, "name: x", "name: y", 1),
		}, wantFile: "b.yaml", wantField: "model", want: "a.yaml"},
		{name: "fallback to an unknown profile", in: map[string]string{"x.yaml": base + "policy: {fallback: [nope]}\n"}, wantFile: "x.yaml", wantField: "policy.fallback", want: `"nope" is not a profile`},
		{name: "stall_after too short", in: map[string]string{"x.yaml": base + "policy: {stall_after: 10ms}\n"}, wantFile: "x.yaml", wantField: "policy.stall_after", want: "at least 100ms"},
		{name: "unreachable_after too short", in: map[string]string{"x.yaml": base + "policy: {unreachable_after: 10ms}\n"}, wantFile: "x.yaml", wantField: "policy.unreachable_after", want: "at least 100ms"},
		{name: "stall_after not a duration", in: map[string]string{"x.yaml": base + "policy: {stall_after: soon}\n"}, wantFile: "x.yaml", wantField: "policy"},
		{name: "fallback to itself", in: map[string]string{"x.yaml": base + "policy: {fallback: [x]}\n"}, wantFile: "x.yaml", wantField: "policy.fallback", want: "itself"},
		{name: "fallback named twice", in: map[string]string{
			"a.yaml": base + "policy: {fallback: [y, y]}\n",
			"b.yaml": strings.NewReplacer("name: x", "name: y", "model: m1", "model: m2").Replace(base),
		}, wantFile: "a.yaml", wantField: "policy.fallback", want: "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tt.in {
				write(t, dir, name, body)
			}
			_, err := profile.Load(dir)
			if err == nil {
				t.Fatal("Load = nil, want an error")
			}
			msg := err.Error()
			if !errors.Is(err, profile.ErrInvalid) || !strings.Contains(msg, filepath.Join(dir, tt.wantFile)) ||
				!strings.Contains(msg, tt.wantField) || !strings.Contains(msg, tt.want) {
				t.Fatalf("Load = %v\nwant ErrInvalid naming %s, %q and %q", err, tt.wantFile, tt.wantField, tt.want)
			}
		})
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", strings.Replace(base, "in_process", "carrier-pigeon", 1)+"policy: {max_active: -1}\n")
	write(t, dir, "b.yaml", remote+"base_url: http://127.0.0.1\n")
	_, err := profile.Load(dir)
	for _, want := range []string{"a.yaml: transport", "a.yaml: policy.max_active", "b.yaml: base_url"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load = %v, want a problem %q among all of them", err, want)
		}
	}
}

func TestLoadAcceptsTheOptionalFields(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", base+"capabilities: {resumable: true, resume_field: resume, emits_tool_events: true, reports_usage: true}\npolicy: {fallback: [y], stall_after: 90s, unreachable_after: 45s}\n")
	write(t, dir, "b.yaml", strings.NewReplacer("name: x", "name: y", "model: m1", "model: m2").Replace(base)+"policy: {fallback: [x]}\n")
	write(t, dir, "r.yaml", remote+"base_url: http://[::1]:8080/v1\nallow_loopback: true\n")
	r, err := profile.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := r.Get("x")
	want := profile.Capabilities{Resumable: true, ResumeField: "resume", EmitsToolEvents: true, ReportsUsage: true}
	if p.Capabilities == nil || *p.Capabilities != want || strings.Join(p.Policy.Fallback, ",") != "y" {
		t.Fatalf("x = capabilities %+v, fallback %v", p.Capabilities, p.Policy.Fallback)
	}
	if got := p.StallAfter(); got != 90*time.Second {
		t.Fatalf("x stall_after = %s, want 90s", got)
	}
	if y, _ := r.Get("y"); y.StallAfter() != 0 {
		t.Fatalf("in-process y without stall_after stalls after %s, want never", y.StallAfter())
	}
	if got := p.UnreachableAfter(); got != 45*time.Second {
		t.Fatalf("x unreachable_after = %s, want 45s", got)
	}
	if y, _ := r.Get("y"); y.UnreachableAfter() != profile.DefaultUnreachableAfter {
		t.Fatalf("y without unreachable_after: %s, want the default", y.UnreachableAfter())
	}
}

// TestLoadPolicyDefaults: a policy number left out takes its default; one
// given is kept as given (max_waiting 0 is a real value: no bound of its
// own).
func TestLoadPolicyDefaults(t *testing.T) {
	tests := []struct {
		name                    string
		in                      string
		attempts, active, queue int
	}{
		{name: "no policy", in: base, attempts: 3, active: 1},
		{name: "empty policy", in: base + "policy: {}\n", attempts: 3, active: 1},
		{name: "null policy", in: base + "policy:\n", attempts: 3, active: 1},
		{name: "only max_waiting 0", in: base + "policy: {max_waiting: 0}\n", attempts: 3, active: 1},
		{name: "all given", in: base + "policy: {max_attempts: 1, max_active: 4, max_waiting: 7}\n", attempts: 1, active: 4, queue: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := loadOne(t, tt.in).Get("x")
			if got := p.Policy; got.MaxAttempts != tt.attempts || got.MaxActive != tt.active || got.MaxWaiting != tt.queue || p.MaxAttempts != tt.attempts {
				t.Fatalf("policy = %+v (MaxAttempts %d), want attempts %d, active %d, waiting %d", got, p.MaxAttempts, tt.attempts, tt.active, tt.queue)
			}
		})
	}
}

func TestHashIgnoresFormattingNotValues(t *testing.T) {
	hash := func(body string) (string, string) {
		_, pin, err := loadOne(t, body).Resolve("x")
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
