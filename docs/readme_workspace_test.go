package docs_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The test agent: this test binary, copied as claude onto the runner's
// PATH, plays Claude Code. It edits its working directory (a line added
// to notes.txt, a binary file added) and prints Claude Code's transcript
// S1, which the test puts beside it; or, when its prompt says so, then
// fails as Claude Code does on a 500 from its model API (failWith500),
// or hangs until the run's deadline (hangAfterEdit).
const (
	agentLine = "a line from the agent\n"
	agentBlob = "\x00\x01\xfe\xff no newline"
	// A prompt holding failWith500 or hangAfterEdit makes the agent fail
	// or hang after its edit.
	failWith500   = "then-fail-with-500"
	hangAfterEdit = "then-hang"
)

func init() {
	if filepath.Base(os.Args[0]) != "claude" {
		return
	}
	os.Exit(playClaude())
}

func playClaude() int {
	exe, err := os.Executable()
	if err != nil {
		return 2
	}
	transcript, err := os.ReadFile(filepath.Join(filepath.Dir(exe), "S1.stdout.ndjson"))
	if err != nil {
		return 2
	}
	notes, err := os.ReadFile("notes.txt")
	if err != nil {
		return 2
	}
	if os.WriteFile("notes.txt", append(notes, agentLine...), 0o644) != nil || os.WriteFile("agent.bin", []byte(agentBlob), 0o644) != nil {
		return 2
	}
	prompt := os.Args[len(os.Args)-1]
	switch {
	case strings.Contains(prompt, hangAfterEdit):
		time.Sleep(time.Hour)
	case strings.Contains(prompt, failWith500):
		init, _, _ := bytes.Cut(transcript, []byte("\n"))
		var sys struct {
			SessionID string `json:"session_id"`
		}
		_ = json.Unmarshal(init, &sys)
		res, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "is_error": true, "api_error_status": 500,
			"result":    "API Error: 500 {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}",
			"num_turns": 1, "session_id": sys.SessionID, "total_cost_usd": 0})
		_, _ = os.Stdout.Write(append(append(init, '\n'), append(res, '\n')...))
		return 1
	}
	_, err = os.Stdout.Write(transcript)
	if err != nil {
		return 2
	}
	return 0
}

// lookalike makes a directory that looks like the repository's root to
// the commands run in it: each entry of the root linked, bin/ the test's
// own; what they create stays in it.
func lookalike(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "bin" || e.Name() == ".git" || strings.HasPrefix(e.Name(), ".agentmesh") {
			continue
		}
		if err := os.Symlink(filepath.Join(abs, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(bin, "bin"), filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fakeClaude puts the test agent, as claude, and the transcript it
// prints into a directory of their own and returns it.
func fakeClaude(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	copySelf(t, filepath.Join(dir, "claude"))
	s1, err := os.ReadFile(filepath.Join(root, "testdata", "cli", "claude-code", "S1.stdout.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "S1.stdout.ndjson"), s1, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tree reads the files under dir, .git left out.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadmeWorkspaces runs the README's "Workspaces" commands and the
// HTTP ones of docs/export-and-redaction.md, as written, as a new user
// would: agentmesh up with the sandbox on (its default) and the git
// allow-list of the README's export, a test agent as claude on PATH, a
// snapshot pushed and run on, its patch applied to a fresh clone; a
// file:// git source and --push the same; then the same run through
// POST /v1/runs with plain HTTP. Every run's patch, applied to a fresh
// clone of the source, gives the agent's tree byte for byte. Then the
// errors, each naming its flag or field: a remote outside the
// allow-list, a snapshot never pushed (CLI and HTTP), a snapshot over
// the runner's limit. Last, a chat completions conversation on the
// snapshot (agentmesh_workspace), its second turn's patch holding both.
func TestReadmeWorkspaces(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts agentmesh")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	m := &readmeMesh{t: t, bin: t.TempDir(), vars: map[string]string{}}
	m.dir = lookalike(t, m.bin)
	m.vars["PWD"] = m.dir
	// The test's own settings, not the README's: the agent on PATH, its
	// process-group records and the runner's workspace limit (below the
	// size of the big tree pushed at the end).
	m.env = append(m.env, "PATH="+fakeClaude(t)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"AGENTMESH_RUNNER_STATE_DIR="+t.TempDir(), "AGENTMESH_RUNNER_WORKSPACE_MAX_BYTES=262144")
	m.build("make build")
	for _, line := range readmeBlock(t, "Workspaces") {
		t.Logf("$ %s", line)
		m.command(line)
	}
	for _, line := range docBlock(t, "docs/export-and-redaction.md", "### Workspaces") {
		t.Logf("$ %s", line)
		m.command(line)
	}
	if !strings.Contains(m.upLog.String(), " sandbox=on") {
		t.Fatalf("up did not say its runner confines the runs (sandbox=on); its log:\n%s", m.upLog.String())
	}
	if len(m.runs) != 4 {
		t.Fatalf("the blocks ran %d runs %v; want the snapshot, git, push and HTTP runs", len(m.runs), m.runs)
	}
	source := tree(t, filepath.Join(m.dir, "demo"))
	want := maps.Clone(source)
	want["notes.txt"] += agentLine
	want["agent.bin"] = agentBlob
	// The README applied the snapshot run's patch, the doc the HTTP
	// run's; the git and push runs' are applied here the same way.
	checkouts := map[string]string{m.runs[0]: "checkout", m.runs[3]: "checkout-http"}
	for i, run := range m.runs[1:3] {
		dir := []string{"checkout-git", "checkout-push"}[i]
		m.shell("git clone -q demo " + dir)
		m.agentmesh("artifacts apply", []string{"artifacts", "apply", "--dir", dir, run})
		checkouts[run] = dir
	}
	for run, dir := range checkouts {
		if got := tree(t, filepath.Join(m.dir, dir)); !maps.Equal(got, want) {
			t.Errorf("%s after run %s's patch holds %q; want the agent's tree %q", dir, run, got, want)
		}
	}

	// The errors, through the same mesh.
	fails := func(says []string, args ...string) {
		t.Helper()
		stdout, stderr, err := m.try(args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("agentmesh %s: %v; want exit 1\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
			return
		}
		for _, s := range says {
			if !strings.Contains(stdout+stderr, s) {
				t.Errorf("agentmesh %s does not say %q:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), s, stdout, stderr)
			}
		}
	}
	elsewhere := filepath.Join(t.TempDir(), "elsewhere.git")
	fails([]string{"workspace.git.url: git remote", "is not in the allow-list"}, "run", "-p", "claude-code", "--git", "file://"+elsewhere+"@main", "x")
	unknown := "sha256:" + strings.Repeat("0", 64)
	fails([]string{"run: --snapshot: snapshot " + unknown + " is not stored for tenant default"}, "run", "-p", "claude-code", "--snapshot", unknown, "x")
	big := filepath.Join(t.TempDir(), "big")
	if err := os.MkdirAll(big, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(big, "notes.txt"), bytes.Repeat([]byte("0123456789abcdef"), 32<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	fails([]string{"workspace.snapshot: snapshot is over the size limit of 262144 bytes"}, "run", "-p", "claude-code", "--push", big, "x")

	post := func(path, body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://"+m.gateway+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+m.vars["KEY"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	resp, b := post("/v1/runs", `{"profile":"claude-code","request":{"prompt":"x"},"workspace":{"snapshot":"`+unknown+`"}}`)
	var e struct {
		Error struct {
			Code, Param string
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Error.Code != "snapshot_not_found" || e.Error.Param != "workspace.snapshot" {
		t.Errorf("POST /v1/runs of a snapshot never pushed: %s %s; want 400 snapshot_not_found naming workspace.snapshot", resp.Status, b)
	}

	// A conversation of chat completions names the same object as
	// agentmesh_workspace on its first request; its continuation carries
	// on from what that run left (the conversation's head): the second
	// run's patch, cumulative, holds both turns' edits.
	first := `[{"role":"user","content":"add a line to notes.txt"}]`
	resp, b = post("/v1/chat/completions", `{"model":"claude-code","messages":`+first+`,"agentmesh_workspace":{"snapshot":"`+m.vars["SNAP"]+`"}}`)
	var chat struct {
		Choices []struct {
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &chat) != nil || len(chat.Choices) != 1 {
		t.Fatalf("chat completion with agentmesh_workspace: %s %s", resp.Status, b)
	}
	turn1 := resp.Header.Get("x-agentmesh-run-id")
	history := strings.TrimSuffix(first, "]") + "," + string(chat.Choices[0].Message) + `,{"role":"user","content":"add another"}]`
	resp, b = post("/v1/chat/completions", `{"model":"claude-code","messages":`+history+`}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the conversation's second request: %s %s", resp.Status, b)
	}
	turn2 := resp.Header.Get("x-agentmesh-run-id")
	m.shell("git clone -q demo checkout-chat")
	m.agentmesh("artifacts apply", []string{"artifacts", "apply", "--dir", "checkout-chat", turn2})
	twice := maps.Clone(want)
	twice["notes.txt"] += agentLine
	if got := tree(t, filepath.Join(m.dir, "checkout-chat")); turn1 == "" || !maps.Equal(got, twice) {
		t.Errorf("checkout-chat after run %s's patch (the second of a conversation after %s) holds %q; want both turns' edits %q", turn2, turn1, got, twice)
	}
	resp, b = post("/v1/chat/completions", `{"model":"claude-code","messages":`+history+`,"agentmesh_workspace":{"snapshot":"`+m.vars["SNAP"]+`"}}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"param":"agentmesh_workspace"`) {
		t.Errorf("a continuation naming a workspace: %s %s; want 400 naming agentmesh_workspace", resp.Status, b)
	}

	// Issue 37, acceptance 2: a run that edits its workspace and then
	// fails, on a 500 from the model API or at its deadline, stores its
	// patch; --from-run goes on from what it left.
	for _, how := range []struct{ prompt, state string }{{failWith500, "failed"}, {hangAfterEdit, "timed_out"}} {
		stdout, stderr, err := m.try("run", "-p", "claude-code", "--snapshot", m.vars["SNAP"], "--deadline", "5s", "edit, "+how.prompt)
		var ee *exec.ExitError
		id := runIDLine.FindStringSubmatch(stdout)
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || id == nil || !strings.Contains(stdout, "["+how.state) {
			t.Fatalf("a run that edits, %s: %v, want exit 1 and %s\nstdout:\n%s\nstderr:\n%s", how.prompt, err, how.state, stdout, stderr)
		}
		dir := "checkout-" + how.state
		m.shell("git clone -q demo " + dir)
		m.agentmesh("artifacts apply", []string{"artifacts", "apply", "--dir", dir, id[1]})
		if got := tree(t, filepath.Join(m.dir, dir)); !maps.Equal(got, want) {
			t.Errorf("%s after the %s run %s's patch holds %q; want the agent's edit %q", dir, how.state, id[1], got, want)
		}
		out := m.agentmesh("run --from-run", []string{"run", "-p", "claude-code", "--from-run", id[1], "go on"})
		next := runIDLine.FindStringSubmatch(out)
		if next == nil {
			t.Fatalf("run --from-run %s printed no run id:\n%s", id[1], out)
		}
		dir += "-continued"
		m.shell("git clone -q demo " + dir)
		m.agentmesh("artifacts apply", []string{"artifacts", "apply", "--dir", dir, next[1]})
		if got := tree(t, filepath.Join(m.dir, dir)); !maps.Equal(got, twice) {
			t.Errorf("%s after run %s (from run %s) holds %q; want both edits %q", dir, next[1], id[1], got, twice)
		}
	}
}
