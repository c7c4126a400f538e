package acp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestSandboxEgress: an ACP agent's sandboxed runs reach the model API of
// each vendor whose variables its environment holds, moved by the base
// URL variable or Codex's config.toml, else the vendor's default; its
// state directories are bound, Codex's login in them masked.
func TestSandboxEgress(t *testing.T) {
	for _, v := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR", "CODEX_HOME",
		"OPENAI_API_KEY", "OPENAI_BASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	codexHome := t.TempDir()
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte("model_provider = \"fake\"\n[model_providers.fake]\nbase_url = \"http://127.0.0.1:18702/v1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		allow []string
		set   map[string]string
		want  []string
	}{
		{"claude-acp at its base URL", []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR", "HOME"},
			map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9000", "CLAUDE_CONFIG_DIR": "/c"}, []string{"127.0.0.1:9000"}},
		{"claude-acp by default", []string{"ANTHROPIC_BASE_URL"}, map[string]string{"ANTHROPIC_API_KEY": "k"}, []string{"api.anthropic.com:443"}},
		{"codex-acp by its config.toml", []string{"CODEX_HOME", "OPENAI_API_KEY", "HOME"}, map[string]string{"CODEX_HOME": codexHome}, []string{"127.0.0.1:18702"}},
		{"codex-acp without a file", nil, map[string]string{"CODEX_HOME": t.TempDir()}, []string{"api.openai.com:443"}},
		{"gemini-acp at its base URL", []string{"GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "HOME"},
			map[string]string{"GEMINI_API_KEY": "k", "GOOGLE_GEMINI_BASE_URL": "https://gw.internal/gemini"}, []string{"gw.internal:443"}},
		{"gemini-acp by default", nil, map[string]string{"GEMINI_API_KEY": "k"}, []string{"generativelanguage.googleapis.com:443"}},
		{"a key variable allowed but unset names its API (cli.Key)", []string{"ANTHROPIC_API_KEY", "GEMINI_API_KEY"}, nil,
			[]string{"api.anthropic.com:443", "generativelanguage.googleapis.com:443"}},
		{"a configuration variable allowed but unset names nothing", []string{"CODEX_HOME", "CLAUDE_CONFIG_DIR"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.EnvAllow, cfg.EnvSet = tc.allow, tc.set
			pol, err := cfg.SandboxPolicy()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(pol.Egress, tc.want) {
				t.Errorf("egress %q, want %q", pol.Egress, tc.want)
			}
			if !slices.Equal(pol.StateVars, StateVars) {
				t.Errorf("state %q, want %q", pol.StateVars, StateVars)
			}
			// Codex's login is masked in codex-acp's runs.
			var logins []string
			if h := tc.set["CODEX_HOME"]; h != "" {
				logins = []string{filepath.Join(h, "auth.json")}
			}
			if !slices.Equal(pol.LoginFiles, logins) {
				t.Errorf("login files %q, want %q", pol.LoginFiles, logins)
			}
		})
	}
	// Unless the profile names it as a credential file.
	cfg := DefaultConfig()
	cfg.EnvSet, cfg.CredentialFiles = map[string]string{"CODEX_HOME": codexHome}, []string{filepath.Join(codexHome, "auth.json")}
	if pol, err := cfg.SandboxPolicy(); err != nil || pol.LoginFiles != nil {
		t.Errorf("codex-acp with its login as a credential file: login files %q (%v), want none", pol.LoginFiles, err)
	}
}

// TestConfinedArgs: codex-acp confined by the runner's sandbox runs its
// shell with Codex's sandbox mode danger-full-access (bubblewrap cannot
// run inside ours), unless its profile sets the mode; other agents get
// nothing.
func TestConfinedArgs(t *testing.T) {
	want := []string{"-c", `sandbox_mode="danger-full-access"`}
	bin := func(b string) cli.Config {
		return cli.Config{Binary: b, EnvSet: map[string]string{"CODEX_HOME": t.TempDir()}}
	}
	if got := confinedArgs(bin("/opt/bin/codex-acp-linux-x64"), nil); !slices.Equal(got, want) {
		t.Errorf("codex-acp: %q, want %q", got, want)
	}
	if got := confinedArgs(bin("codex-acp"), []string{"-c", `sandbox_mode="read-only"`}); got != nil {
		t.Errorf("codex-acp with its own sandbox_mode: %q, want nothing", got)
	}
	for _, b := range []string{"claude-agent-acp", "gemini"} {
		if got := confinedArgs(bin(b), nil); got != nil {
			t.Errorf("%s: %q, want nothing", b, got)
		}
	}
}

// TestUnresolvedToolCalls: a tool call whose outcome the agent never
// reported is a failed tool_result at the turn's end, once; one that
// completed is not.
func TestUnresolvedToolCalls(t *testing.T) {
	seen := Calls{}
	for _, u := range []sdk.SessionUpdate{
		{ToolCall: &sdk.SessionUpdateToolCall{ToolCallId: "a", Title: "echo hi", Status: "pending"}},
		{ToolCall: &sdk.SessionUpdateToolCall{ToolCallId: "b", Title: "ls", Status: "in_progress"}},
		sdk.UpdateToolCall("b", sdk.WithUpdateStatus("completed")),
	} {
		if _, err := Map(u, seen, true); err != nil {
			t.Fatal(err)
		}
	}
	// a never said what it does, so its tool_use was held: it comes
	// now, before its failed result.
	got := Unresolved(seen, "never reported")
	if len(got) != 2 || got[0].Type != wire.ChunkToolUse || got[0].ToolID != "a" || got[0].ToolName != "echo hi" ||
		got[1].Type != wire.ChunkToolResult || got[1].ToolID != "a" || !got[1].IsError || got[1].ToolOutput != "never reported" {
		t.Fatalf("Unresolved = %+v, want a's tool_use and one failed tool_result for it", got)
	}
	if again := Unresolved(seen, "x"); len(again) != 0 {
		t.Fatalf("second Unresolved = %+v, want none", again)
	}
}

// TestToolUseNamesWhatItDoes replays each recorded agent's shell call
// (testdata/acp): its one tool_use names the command, from the call's
// input or its title, and comes before its one tool_result.
// claude-agent-acp announces the call as "Terminal" with the input {} and
// sends the command in its next update; gemini sends no tool_call, only
// the update that completes it.
func TestToolUseNamesWhatItDoes(t *testing.T) {
	for _, agent := range []string{"claude-agent-acp", "codex-acp", "gemini-cli"} {
		t.Run(agent, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "acp", agent, "permission-allow.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			calls := Calls{}
			var chunks []wire.Chunk
			for line := range strings.Lines(string(b)) {
				var rec struct {
					Dir string `json:"dir"`
					Msg struct {
						Method string                  `json:"method"`
						Params sdk.SessionNotification `json:"params"`
					} `json:"msg"`
				}
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatal(err)
				}
				if rec.Dir != "agent->client" || rec.Msg.Method != "session/update" {
					continue
				}
				out, err := Map(rec.Msg.Params.Update, calls, true)
				if err != nil {
					t.Fatal(err)
				}
				chunks = append(chunks, out...)
			}
			chunks = append(chunks, Unresolved(calls, "never reported")...)
			var uses, results []wire.Chunk
			for _, c := range chunks {
				switch c.Type {
				case wire.ChunkToolUse:
					uses = append(uses, c)
				case wire.ChunkToolResult:
					if len(uses) == 0 {
						t.Errorf("a tool_result before any tool_use: %+v", c)
					}
					results = append(results, c)
				}
			}
			if len(uses) != 1 || len(results) != 1 || results[0].IsError || uses[0].ToolID != results[0].ToolID {
				t.Fatalf("tool_use %+v, tool_result %+v; want one of each, for one call, the result not failed", uses, results)
			}
			named, _ := json.Marshal(map[string]any{"name": uses[0].ToolName, "input": uses[0].ToolInput})
			if !strings.Contains(string(named), "echo hello-from-tool") {
				t.Errorf("the tool_use does not name the command: %s", named)
			}
			if uses[0].ToolInput["kind"] != "execute" {
				t.Errorf("the tool_use's kind is %v, want execute", uses[0].ToolInput["kind"])
			}
		})
	}
}
