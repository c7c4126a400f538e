//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/fakemodel"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// acpRunner is a subprocess-runner binary hosting adapter acp for the
// profiles of an acpMesh.
type acpRunner struct {
	id  string
	cmd *exec.Cmd
	log *servicetest.Buffer
	// exited is closed once the process has been waited for; err is then
	// what Wait returned.
	exited chan struct{}
	err    error
	// stop sends SIGTERM and fails the test unless the runner then exits
	// cleanly within 60s (or had been SIGKILLed); it runs once.
	stop func()
}

// startACPRunner starts runner id of bin for m's ACP profiles, with the
// environment up's own runner would have (m.env: the agents' HOME, CODEX_HOME,
// keys and base URLs) and the runners' shared state directory, confined
// as up's runner confines its agents (the sandbox on, the runner's
// default), and waits until it says it started. Its cleanup
// stops it (acpRunner.stop), which the test must do itself before it
// stops up.
func startACPRunner(t *testing.T, m *acpMesh, bin, id, stateDir string) *acpRunner {
	t.Helper()
	env := merge(m.env, map[string]string{
		tagVar:                       m.tag + "/" + id,
		"AGENTMESH_NATS_URL":         m.natsURL,
		"AGENTMESH_RUNNER_ID":        id,
		"AGENTMESH_RUNNER_ADAPTERS":  "acp",
		"AGENTMESH_PROFILES_DIR":     m.profilesDir,
		"AGENTMESH_WORKSPACE_ROOT":   m.workRoot,
		"AGENTMESH_RUNNER_STATE_DIR": stateDir,
		"AGENTMESH_HTTP_ADDR":        "",
	})
	r := &acpRunner{id: id, cmd: exec.Command(bin), log: &servicetest.Buffer{}, exited: make(chan struct{})}
	r.cmd.Env = environ(env)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.exited)
	}()
	r.stop = sync.OnceFunc(func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
			if r.err != nil && !r.killed() {
				t.Errorf("runner %s: %v\n%s", id, r.err, r.log.String())
			}
		case <-time.After(60 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
			t.Errorf("runner %s did not stop within 60s of SIGTERM\n%s", id, r.log.String())
		}
		if t.Failed() {
			t.Logf("runner %s log:\n%s", id, r.log.String())
		}
	})
	t.Cleanup(r.stop)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(r.log.String(), "runner started") {
		select {
		case <-r.exited:
			t.Fatalf("runner %s exited before it started: %v\n%s", id, r.err, r.log.String())
		case <-time.After(100 * time.Millisecond): // polling another process's log; nothing to wait on
		}
		if time.Now().After(deadline) {
			t.Fatalf("runner %s did not start within 60s\n%s", id, r.log.String())
		}
	}
	return r
}

// killed says the runner, once exited, was ended by SIGKILL.
func (r *acpRunner) killed() bool {
	ws, ok := r.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// waitFile waits until path exists and returns what it holds.
// waitFile waits until path exists and returns what it holds; writer is
// closed if what writes it ends first.
func waitFile(t *testing.T, path string, wait time.Duration, writer <-chan struct{}) string {
	t.Helper()
	deadline := time.After(wait)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		select {
		case <-writer:
			t.Fatalf("%s: the script ended before writing it", path)
		case <-deadline:
			t.Fatalf("%s: not written within %s", path, wait)
		case <-time.After(100 * time.Millisecond): // the script writes it; nothing to wait on
		}
	}
}

// TestACPNodeClientRunnerKilled is acceptance 2's second case: an editor
// (testdata/acp-client/kill.mjs, with the official ACP client library)
// drives `agentmesh acp --profile codex-acp` against agentmesh up, whose own
// runner hosts only the fixture, so that the real codex-acp runs on one of
// two subprocess-runner processes. After the first prompt, the runner that
// owns the session is SIGKILLed. The second prompt resumes the session on
// the other runner through session/load from the checkpoint: it ends
// end_turn, and the model request it makes carries the first turn. The
// lost run ends failed with SessionLost; no agent process survives.
func TestACPNodeClientRunnerKilled(t *testing.T) {
	testNodeClientResume(t, "acp-kill", func(t *testing.T, _ *acpMesh, _ *runs.Store, owner *acpRunner, first runs.Run) wire.State {
		if err := owner.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-owner.exited
		t.Logf("SIGKILLed %s, the owner of run %s", owner.id, first.Record.RunID)
		return wire.StateFailed
	})
}

// TestACPNodeClientSuspended is issue 37's acceptance 3 with a real
// agent: the same editor and runners, but after the first prompt the
// session is left idle: it is suspended after its grace (the profiles'
// session.suspend_after, acpSuspendAfter), its run ending succeeded and
// its agent gone, and its runner is then stopped. The second prompt
// resumes it on the other runner through session/load: it ends end_turn,
// and its model request carries the first turn.
func TestACPNodeClientSuspended(t *testing.T) {
	testNodeClientResume(t, "acp-suspend", func(t *testing.T, m *acpMesh, _ *runs.Store, owner *acpRunner, first runs.Run) wire.State {
		ctx, cancel := context.WithTimeout(context.Background(), acpSuspendAfter+90*time.Second)
		defer cancel()
		st, err := m.client.Wait(ctx, tenant, first.Record.RunID)
		if err != nil || st.State != wire.StateSucceeded {
			t.Fatalf("the idle session's run %s ended %+v, %v; want succeeded (suspended)", first.Record.RunID, st, err)
		}
		owner.stop()
		t.Logf("run %s was suspended; stopped %s, its runner", first.Record.RunID, owner.id)
		return wire.StateSucceeded
	})
}

// testNodeClientResume drives kill.mjs through two subprocess runners:
// after its first prompt, between calls the first run's owner away (it
// returns the state the first run must end in), then checks that the
// second prompt resumed the session on the other runner with turn 1 in
// its model request.
func testNodeClientResume(t *testing.T, label string, between func(t *testing.T, m *acpMesh, store *runs.Store, owner *acpRunner, first runs.Run) wire.State) {
	modules := cacheModules(t, filepath.Join("@zed-industries", "agent-client-protocol", "package.json"))
	m := startACPMesh(t, label, "--runner-adapters", "fixture")
	a := acpAgents[slices.IndexFunc(acpAgents, func(a acpAgent) bool { return a.name == "codex-acp" })]
	bin := goBuild(t, m.repo, m.root, "./services/subprocess-runner")
	state := mkdir(t, m.root, "runner-state")
	runners := map[string]*acpRunner{}
	for _, id := range []string{"acp-runner-1", "acp-runner-2"} {
		runners[id] = startACPRunner(t, m, bin, id, state)
	}

	dir := nodeScriptDir(t, t.TempDir(), "acp-client", modules)
	tag := fmt.Sprintf("e2e %s node %d", label, time.Now().UnixNano())
	turnFile, killedFile := filepath.Join(dir, "turn-1-done"), filepath.Join(dir, "killed")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	node := exec.CommandContext(ctx, "node", "kill.mjs")
	node.Dir = dir
	node.Env = environ(map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": m.env["HOME"], "TMPDIR": m.env["TMPDIR"], tagVar: m.tag + "/node",
		"AGENTMESH_TEST_BIN": m.bin, "AGENTMESH_TEST_NATS_URL": m.natsURL, "AGENTMESH_TEST_PROFILE": a.name,
		"AGENTMESH_TEST_TENANT": tenant, "AGENTMESH_TEST_LABEL": tag,
		"AGENTMESH_TEST_TURN_FILE": turnFile, "AGENTMESH_TEST_KILLED_FILE": killedFile,
	})
	node.WaitDelay = 10 * time.Second
	var out, stderr bytes.Buffer
	node.Stdout, node.Stderr = &out, &stderr
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	nodeExited := make(chan struct{})
	var nodeErr error
	go func() {
		nodeErr = node.Wait()
		close(nodeExited)
	}()
	defer func() {
		cancel()
		<-nodeExited
	}()

	sessionID := waitFile(t, turnFile, 3*time.Minute, nodeExited)
	store := openRuns(t, m.natsURL)
	first := runOfConversation(t, store, sessionID, wire.StateRunning)
	owner, ok := runners[first.Record.Owner]
	if !ok {
		t.Fatalf("run %s of session %s is owned by %q, not one of the subprocess runners %v", first.Record.RunID, sessionID, first.Record.Owner, slices.Sorted(maps.Keys(runners)))
	}
	firstEnds := between(t, m, store, owner, first)
	write(t, killedFile, owner.id)

	<-nodeExited
	t.Logf("node kill.mjs:\n%s%s", out.String(), stderr.String())
	if nodeErr != nil {
		t.Fatalf("node kill.mjs: %v\nagentmesh up log:\n%s", nodeErr, m.upLog.String())
	}
	var res struct {
		OK          bool              `json:"ok"`
		Session     string            `json:"session_id"`
		StopReasons []string          `json:"stop_reasons"`
		Errors      []json.RawMessage `json:"errors"`
		Texts       []string          `json:"texts"`
		Prompts     []string          `json:"prompts"`
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("kill.mjs's last line is not its JSON summary: %v", err)
	}
	if !res.OK || res.Session != sessionID || len(res.Prompts) != 2 || len(res.Texts) != 2 {
		t.Fatalf("summary %+v", res)
	}
	if !slices.Equal(res.StopReasons, []string{"end_turn", "end_turn"}) {
		t.Fatalf("stop reasons %q (errors %s), want end_turn twice: the session resumed on the other runner", res.StopReasons, res.Errors)
	}
	for i, text := range res.Texts {
		if !strings.Contains(text, "42") {
			t.Errorf("prompt %d answered %q, want the answer", i+1, text)
		}
	}
	reqs := m.requestsFor(res.Prompts[1])
	if len(reqs) == 0 || !strings.Contains(reqs[0].Text(), res.Prompts[0]) || !strings.Contains(reqs[0].Text(), fakemodel.AnswerText) {
		t.Fatalf("the second prompt's model request lacks the first turn (a fresh conversation): %s", describeRequests(reqs))
	}
	// The resumed run is on the runner left, and the first one ended.
	second := runOfConversation(t, store, sessionID, "")
	if second.Record.RunID == first.Record.RunID || second.Record.Owner == owner.id {
		t.Errorf("the second prompt ran as %s on %q, want a new run on the runner left", second.Record.RunID, second.Record.Owner)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer wcancel()
	st, err := m.client.Wait(wctx, tenant, first.Record.RunID)
	if err != nil || st.State != firstEnds || (firstEnds == wire.StateFailed && !errors.Is(st.Error, wire.SessionLost)) {
		t.Errorf("the first run %s ended %+v, %v; want %s", first.Record.RunID, st, err, firstEnds)
	}
	for _, r := range runners {
		r.stop()
	}
	m.stop()
	if t.Failed() {
		t.Logf("agentmesh up log:\n%s", m.upLog.String())
	}
}

// openRuns opens the run records of the mesh at url.
func openRuns(t *testing.T, url string) *runs.Store {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := runs.Open(ctx, service.Deps{NC: nc, JS: js, Names: subject.Names{}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runOfConversation returns the newest run of the tenant on conversation
// conv, in state (any, if empty).
func runOfConversation(t *testing.T, s *runs.Store, conv string, state wire.State) runs.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var found runs.Run
	for r, err := range s.List(ctx, tenant) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Record.Conversation == conv && (state == "" || r.Record.State == state) && r.Record.Created >= found.Record.Created {
			found = r
		}
	}
	if found.Record.RunID == "" {
		t.Fatalf("no run of conversation %s in state %q", conv, state)
	}
	return found
}
