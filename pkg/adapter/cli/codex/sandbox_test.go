package codex

import (
	"slices"
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
