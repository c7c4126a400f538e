package docs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/acp/acpfake"
)

// The session test's agent: this test binary, copied as claude-agent-acp
// onto the runner's PATH, is the scriptable ACP agent (acpfake), which
// keeps its sessions where Claude's agent would, under
// CLAUDE_CONFIG_DIR, so that a session suspended on one run loads on the
// next.
func init() {
	if filepath.Base(os.Args[0]) != "claude-agent-acp" {
		return
	}
	if dir := os.Getenv("CLAUDE_CONFIG_DIR"); dir != "" {
		state := filepath.Join(dir, "acpfake")
		if os.MkdirAll(state, 0o700) != nil {
			os.Exit(2)
		}
		os.Setenv(acpfake.StateEnv, state)
	}
	acpfake.Main()
}

// fakeACPAgent puts the test agent, as claude-agent-acp, into a
// directory of its own and returns it.
func fakeACPAgent(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	copySelf(t, filepath.Join(dir, "claude-agent-acp"))
	return dir
}

// copySelf copies this test binary to path, executable: run by that
// name, it plays the agent the name is.
func copySelf(t *testing.T, path string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestSessionsDocCommands runs docs/sessions.md's commands of a
// suspended session, as written: agentmesh up with the sandbox on, the
// shipped claude-acp profile with a test agent as claude-agent-acp; turn
// 1 on a conversation ends succeeded once the session suspends; send
// starts the run that loads it, which answers as turn 2 of the same
// agent session; the runs API's history of the conversation holds both
// runs and both prompts.
func TestSessionsDocCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts agentmesh")
	}
	m := &readmeMesh{t: t, bin: t.TempDir(), vars: map[string]string{}}
	m.dir = lookalike(t, m.bin)
	m.vars["PWD"] = m.dir
	// A home of the test's own: the block keeps the agent's sessions
	// under it.
	m.vars["HOME"] = t.TempDir()
	m.env = append(m.env, "PATH="+fakeACPAgent(t)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"AGENTMESH_RUNNER_STATE_DIR="+t.TempDir(), "HOME="+m.vars["HOME"])
	m.build("make build")
	for _, line := range docBlock(t, "docs/sessions.md", "### A suspended session, from the command line") {
		t.Logf("$ %s", line)
		m.command(line)
		if strings.HasPrefix(line, "bin/agentmesh follow") {
			// The resumed run is turn 2 of the agent's session, which
			// it loaded: the agent counts the turn before it.
			if !strings.Contains(m.out, "echo: now add a test for it (turn 2)") || !strings.Contains(m.out, "[succeeded") {
				t.Fatalf("%s: the resumed run is not turn 2 of the session:\n%s", line, m.out)
			}
		}
	}
	if !strings.Contains(m.upLog.String(), " sandbox=on") {
		t.Fatalf("up did not say its runner confines the runs (sandbox=on); its log:\n%s", m.upLog.String())
	}
	if len(m.runs) != 2 {
		t.Fatalf("the block ran %d runs %v; want the session's first and the one that resumed it", len(m.runs), m.runs)
	}
	var h struct {
		Runs []struct {
			RunID  string `json:"run_id"`
			Prompt string `json:"prompt"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(m.out), &h); err != nil {
		t.Fatalf("the history is not JSON: %v\n%s", err, m.out)
	}
	if len(h.Runs) != 2 || h.Runs[0].RunID != m.runs[0] || h.Runs[1].RunID != m.runs[1] ||
		h.Runs[0].Prompt != "fix the failing test" || h.Runs[1].Prompt != "now add a test for it" {
		t.Errorf("the conversation's history: %s; want runs %v with their prompts", m.out, m.runs)
	}
}
