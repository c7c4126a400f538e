package codex

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

func TestProviderFromConfig(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"transcripts' config", fakeConfigTOML, "fake"},
		{"no provider selected", "model = \"gpt-5.5\"\n[model_providers.fake]\nname = \"x\"\n", ""},
		{"built-in provider", "model_provider = \"openai\"\n", ""},
		{"selected but not defined", "model_provider = \"mine\"\n[model_providers.other]\nname = \"o\"\n", ""},
		{"quoted table key", "model_provider = 'mine' # comment\n[model_providers.\"mine\"]\nname = \"m\"\n", "mine"},
		{"dotted key definition", "model_provider = \"mine\"\nmodel_providers.mine.name = \"m\"\n", "mine"},
		{"inline table definition", "model_provider = \"mine\"\n[model_providers]\nmine = { name = \"m\" }\n", "mine"},
		{"model_provider inside a table is not the selection", "[profiles.x]\nmodel_provider = \"mine\"\n[model_providers.mine]\nname = \"m\"\n", ""},
		{"profile selects", "model_provider = \"a\"\nprofile = \"p\"\n[profiles.p]\nmodel_provider = \"b\"\n[model_providers.a]\nname = \"a\"\n[model_providers.b]\nname = \"b\"\n", "b"},
		{"dotted id cannot be addressed", "model_provider = \"my.p\"\n[model_providers.\"my.p\"]\nname = \"m\"\n", ""},
		{"header inside a multi-line string", "model_provider = \"mine\"\ndeveloper_instructions = \"\"\"\n[model_providers.mine]\n\"\"\"\n", ""},
		{"header inside a multi-line array", "model_provider = \"mine\"\nx = [\n[model_providers.mine]\n]\n", ""},
		{"array of tables is skipped", "[[model_providers_list]]\nmodel_provider = \"mine\"\n[model_providers.mine]\nname=\"m\"\n", ""},
		{"escaped value is not read", "model_provider = \"mi\\u006ee\"\n[model_providers.mine]\nname = \"m\"\n", ""},
		{"CRLF", "model_provider = \"mine\"\r\n[model_providers.mine]\r\nname = \"m\"\r\n", "mine"},
		{"garbage", "[[[\n= = =\n\"unterminated\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := providerFromConfig([]byte(tt.in)); got != tt.want {
				t.Errorf("providerFromConfig = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHomeDir(t *testing.T) {
	t.Setenv("HOME", "/home/op")
	t.Setenv(EnvCodexHome, "/srv/codex")
	tests := []struct {
		name  string
		allow []string
		set   map[string]string
		want  string
	}{
		{"allowed CODEX_HOME", []string{EnvCodexHome}, nil, "/srv/codex"},
		{"fixed CODEX_HOME wins", []string{EnvCodexHome}, map[string]string{EnvCodexHome: "/opt/c"}, "/opt/c"},
		{"CODEX_HOME not allowed: the child uses HOME", nil, nil, "/home/op/.codex"},
		{"relative CODEX_HOME is unknown", nil, map[string]string{EnvCodexHome: "rel"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (home{allow: tt.allow, set: tt.set}).dir(); got != tt.want {
				t.Errorf("dir = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestThreadTotal(t *testing.T) {
	const id = "01a22a8b-564f-7be0-9f56-beadbebf0082"
	abs, err := filepath.Abs(conformance.Testdata(t, "normalize", Name, "S1-resume", "codex_home"))
	if err != nil {
		t.Fatal(err)
	}
	h := home{set: map[string]string{EnvCodexHome: abs}}
	if got, want := h.threadTotal(id), (counts{input: 20014, output: 40}); got == nil || *got != want {
		t.Errorf("threadTotal = %+v, want %+v", got, want)
	}
	if got := h.threadTotal("01a22a8b-0000-7000-8000-000000000000"); got != nil {
		t.Errorf("threadTotal of an unknown thread = %+v, want nil", got)
	}
	if got := h.threadTotal("../../etc"); got != nil {
		t.Errorf("threadTotal of a bad id = %+v, want nil", got)
	}

	tests := []struct {
		name string
		in   string
		want *counts
	}{
		{"no records", `{"type":"session_meta","payload":{}}` + "\n", nil},
		{"last wins, null info skipped", strings.Join([]string{
			`{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1,"output_tokens":1}}}}`,
			`{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":5,"cached_input_tokens":2,"output_tokens":3,"reasoning_output_tokens":1}}}}`,
			`{"type":"event_msg","payload":{"type":"token_count","info":null}}`,
		}, "\n"), &counts{input: 5, cached: 2, output: 3, reasoning: 1}},
		{"unreadable record", `{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":-1}}}}`, nil},
		{"no final newline", `{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":7}}}}`, &counts{input: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := lastTotal(strings.NewReader(tt.in))
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Errorf("lastTotal = %+v, want %+v", got, tt.want)
			}
		})
	}

	// Two rollouts for one thread are ambiguous: no baseline.
	dir := t.TempDir()
	for _, day := range []string{"01", "02"} {
		p := filepath.Join(dir, "sessions", "2026", "11", day)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "rollout-x-"+id+".jsonl"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := (home{set: map[string]string{EnvCodexHome: dir}}).threadTotal(id); got != nil {
		t.Errorf("threadTotal with two rollouts = %+v, want nil", got)
	}
}

func TestRunUsage(t *testing.T) {
	const id = "01a22a8b-564f-7be0-9f56-beadbebf0082"
	total := counts{input: 100, cached: 10, output: 20, reasoning: 5}
	tests := []struct {
		name     string
		resumeID string
		thread   string
		baseline *counts
		want     *counts // nil: no usage
	}{
		{"new thread: the total is the run's", "", id, nil, &total},
		{"resumed, baseline known", id, id, &counts{input: 60, cached: 4, output: 12, reasoning: 1}, &counts{input: 40, cached: 6, output: 8, reasoning: 4}},
		{"resumed, baseline unknown", id, id, nil, nil},
		{"resumed, baseline larger than the total", id, id, &counts{input: 101}, nil},
		{"resume started another thread", id, "01a22a8b-0000-7000-8000-000000000000", &counts{input: 60}, &total},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewParser("m", tt.resumeID)
			p.baseline, p.threadID = tt.baseline, tt.thread
			got := p.runUsage(total)
			switch {
			case tt.want == nil && got != nil:
				t.Errorf("runUsage = %+v, want none", got)
			case tt.want != nil && (got == nil || *got != *tt.want.usage()):
				t.Errorf("runUsage = %+v, want %+v", got, tt.want.usage())
			}
		})
	}
}
