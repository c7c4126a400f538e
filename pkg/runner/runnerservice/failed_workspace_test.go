package runnerservice_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/agentmesh/agentmesh/pkg/workspace"
)

// editAgentEnv turns the test binary into the editing agent: it appends
// a line to notes.txt and reports what the file held before; when its
// prompt holds failAfterEdit it then fails as Claude Code does on a 500
// from its model API.
const (
	editAgentEnv  = "EDIT_AGENT_SPEC"
	failAfterEdit = "then-fail-with-500"
)

// editSpec is the editing agent's spec: the Claude Code transcript it
// prints.
type editSpec struct{ Lines []string }

func init() {
	if os.Getenv(editAgentEnv) == "" {
		return
	}
	before, _ := os.ReadFile("notes.txt")
	if err := os.WriteFile("notes.txt", append(before, "edited\n"...), 0o644); err != nil {
		os.Exit(2)
	}
	if strings.Contains(strings.Join(os.Args, " "), failAfterEdit) {
		res, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "is_error": true, "api_error_status": 500,
			"result": "API Error: 500 Internal server error", "num_turns": 1, "total_cost_usd": 0})
		fmt.Println(string(res))
		os.Exit(1)
	}
	var s editSpec
	code, _ := playAgent(editAgentEnv, &s, func() ([]string, []string) {
		return s.Lines, []string{"before: " + strings.ReplaceAll(string(before), "\n", "|")}
	})
	os.Exit(code)
}

// TestFailedRunContinuesOnAnotherRunner (issue 37, acceptance 2): through
// the real subprocess runner, sandbox on, a run on a pushed snapshot
// edits its workspace and then fails on a 500 from its model API; its
// status names its patch. With that runner gone, a run naming it
// (workspace.from_run) on another runner starts from what it left.
func TestFailedRunContinuesOnAnotherRunner(t *testing.T) {
	srv := natstest.RunJetStream(t)
	profiles := t.TempDir()
	agentProfile{Name: "editor", SpecVar: editAgentEnv, Spec: editSpec{Lines: transcriptS1(t)}, MaxActive: 1}.write(t, profiles)
	env := func(id string) map[string]string {
		return map[string]string{"AGENTMESH_RUNNER_ID": id, "AGENTMESH_RUNNER_ADAPTERS": "claude-code", "AGENTMESH_PROFILES_DIR": profiles,
			"AGENTMESH_WORKSPACE_ROOT": t.TempDir(), "AGENTMESH_RUNNER_STATE_DIR": t.TempDir()}
	}
	first, common := subprocessRunner(t, srv.ClientURL(), env("first"))
	ctx, c := meshFront(t, common, env("first"))
	_, js := natstest.Connect(t, srv)
	store, err := artifacts.Open(ctx, js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "notes.txt"), []byte("source\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var tarball bytes.Buffer
	if err := workspace.Pack(src, &tarball, 0); err != nil {
		t.Fatal(err)
	}
	snap, err := store.PushSnapshot(ctx, "acme", &tarball)
	if err != nil {
		t.Fatal(err)
	}
	run := func(prompt string, ws wire.WorkspaceSource) (string, string, wire.Status) {
		t.Helper()
		req, _ := wire.Marshal(map[string]any{"prompt": prompt})
		return runToEnd(ctx, t, c, wire.RunRequest{V: 2, Tenant: "acme", Principal: "p", Profile: "editor", Request: req, Workspace: &ws})
	}
	failed, _, st := run("edit, "+failAfterEdit, wire.WorkspaceSource{Snapshot: snap})
	if st.State != wire.StateFailed || st.Sandbox != "" || st.Artifacts == nil || st.Artifacts.Patch == nil || st.Artifacts.Patch.Size == 0 {
		t.Fatalf("run %s ended %s (%v), sandbox %q, artifacts %+v; want failed in the sandbox, its patch stored", failed, st.State, st.Error, st.Sandbox, st.Artifacts)
	}
	first.Stop(t)
	subprocessRunner(t, srv.ClientURL(), env("second"))
	next, report, st := run("go on", wire.WorkspaceSource{FromRun: failed})
	if st.State != wire.StateSucceeded || st.Sandbox != "" {
		t.Fatalf("run %s from run %s ended %s (%v), sandbox %q; want succeeded in the sandbox", next, failed, st.State, st.Error, st.Sandbox)
	}
	if report != "before: source|edited|" {
		t.Errorf("run %s on the second runner saw notes.txt as %q; want what the failed run left, %q", next, report, "before: source|edited|")
	}
}
