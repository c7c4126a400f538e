package runnerservice_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/acp/acpfake"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/fakemodel"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// acpFakeEnv makes the test binary the fake ACP agent (acpfake).
const acpFakeEnv = "AGENTMESH_TEST_ACP_FAKE"

// acpGrace is the session.suspend_after of the test's ACP profiles.
const acpGrace = 2 * time.Second

// writeACPProfile writes profile name of adapter acp into dir: the test
// binary as the fake ACP agent, its sessions kept in state (bound into
// the sandbox as CLAUDE_CONFIG_DIR is), asking the Messages API at model
// for each turn, one session at a time, suspended after acpGrace.
func writeACPProfile(t *testing.T, dir, name, state, model string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`schema: 1
name: %s
adapter: acp
transport: subprocess
model: fake-%s
pricing: {input: "1", output: "2", cache_read: "0", cache_write: "0", reasoning: "2"}
binary: %s
install_hint: the test binary, run as a fake ACP agent
env:
  %s: "1"
  %s: %s
  CLAUDE_CONFIG_DIR: %s
  ANTHROPIC_BASE_URL: %s
  GORACE: atexit_sleep_ms=0
session: {suspend_after: %s, idle_timeout: 10m}
policy: {max_attempts: 1, max_active: 1}
`, name, name, exe, acpFakeEnv, acpfake.StateEnv, state, state, model, acpGrace)
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// session is what a test saw of one session run's events: when each
// arrived in the run's own clock (the events' ts).
type session struct {
	id              string
	running, turn1  int64 // ts of the running status, of turn 1's turn_end
	ended           int64 // ts of the terminal status
	status          wire.Status
	text            strings.Builder
	turnEndArrived  chan struct{}
	endArrived      chan struct{}
	closeOnce, once sync.Once
}

// follow starts req and records its events until it ends.
func follow(ctx context.Context, t *testing.T, c *client.Client, req wire.RunRequest, wg *sync.WaitGroup) *session {
	t.Helper()
	id, events, err := c.Start(ctx, req)
	if err != nil {
		t.Fatalf("start %s: %v", req.Profile, err)
	}
	s := &session{id: id, turnEndArrived: make(chan struct{}), endArrived: make(chan struct{})}
	wg.Go(func() {
		defer s.once.Do(func() { close(s.endArrived) })
		defer s.closeOnce.Do(func() { close(s.turnEndArrived) })
		for ev, err := range events {
			if err != nil {
				t.Errorf("run %s: %v", id, err)
				return
			}
			switch {
			case ev.Kind == wire.KindStatus && ev.Status.State == wire.StateRunning:
				s.running = ev.TS
			case ev.Kind == wire.KindStatus && ev.Status.State.Terminal():
				s.ended, s.status = ev.TS, *ev.Status
				return
			case ev.Kind == wire.KindChunk && ev.Chunk.Type == wire.ChunkText:
				s.text.WriteString(ev.Chunk.Content)
			case ev.Kind == wire.KindChunk && ev.Chunk.Type == wire.ChunkTurnEnd && *ev.Chunk.Metadata.NumTurns == 1:
				s.turn1 = ev.TS
				s.closeOnce.Do(func() { close(s.turnEndArrived) })
			}
		}
	})
	return s
}

func wait(t *testing.T, what string, ch <-chan struct{}, within time.Duration) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("%s: not within %s", what, within)
	}
}

// agentProcesses lists the host's processes whose environment names the
// fake agents' state dir: the agents, wherever the sandbox put them.
func agentProcesses(state string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/environ"); err == nil && strings.Contains(string(b), acpfake.StateEnv+"="+state+"\x00") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestACPSessionsAtPoolScale is issue 37's acceptance 3, through the
// real subprocess runner with its sandbox on: three ACP profiles, each
// max_active 1, submitted together on one runner run at once (each
// starts before any session ends, and each ends its turn 1); a session that goes idle is suspended
// within its grace (session.suspend_after), its agent gone, so that a
// fourth session of its profile, waiting for that profile's slot,
// starts; the suspended session's next prompt, a run on its
// conversation, is taken by a second runner (the first stopped) and
// loads the agent's session (session/load): its reply is turn 2's, and
// its model request carries turn 1.
func TestACPSessionsAtPoolScale(t *testing.T) {
	srv := natstest.RunJetStream(t)
	model := fakemodel.New(fakemodel.Answer)
	if err := model.Start(""); err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	profiles, state := t.TempDir(), t.TempDir()
	names := []string{"acp-a", "acp-b", "acp-c"}
	for _, n := range names {
		writeACPProfile(t, profiles, n, state, model.URL())
	}
	env := func(id string) map[string]string {
		return map[string]string{
			"AGENTMESH_RUNNER_ID": id, "AGENTMESH_RUNNER_ADAPTERS": "acp", "AGENTMESH_PROFILES_DIR": profiles,
			"AGENTMESH_WORKSPACE_ROOT": t.TempDir(), "AGENTMESH_RUNNER_STATE_DIR": t.TempDir(),
		}
	}
	first, common := subprocessRunner(t, srv.ClientURL(), env("first"))
	_, c := meshFront(t, common, env("first"))
	nc, _ := natstest.Connect(t, srv)
	if md := servicetest.CheckMicro(t, nc, "agentmesh-runner").Metadata; md["max_active"] != "acp:3" || md["profile_max_active"] != "acp-a:1,acp-b:1,acp-c:1" {
		t.Errorf("the runner advertises max_active %q and profile_max_active %q, want acp:3 (its profiles' together) and each profile's 1", md["max_active"], md["profile_max_active"])
	}
	run := func(profile, conv, prompt string) wire.RunRequest {
		req, _ := wire.Marshal(map[string]any{"prompt": prompt})
		return wire.RunRequest{RunID: client.NewRunID(), Tenant: "acme", Principal: "alice", Profile: profile, Conversation: conv, Request: req}
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel() // before the wait: a session that never ends stops being followed
	var sessions []*session
	for _, n := range names {
		sessions = append(sessions, follow(ctx, t, c, run(n, "conv-"+n, "first "+n), &wg))
	}
	for i, s := range sessions {
		wait(t, names[i]+"'s turn 1", s.turnEndArrived, 60*time.Second)
	}
	// A fourth session of acp-a waits for acp-a's slot, which the first
	// session holds until it is suspended.
	fourth := follow(ctx, t, c, run("acp-a", "conv-d", "first d"), &wg)
	for i, s := range sessions {
		wait(t, names[i]+"'s end", s.endArrived, 30*time.Second)
	}
	wait(t, "the fourth session's turn 1", fourth.turnEndArrived, 30*time.Second)
	wait(t, "the fourth session's end", fourth.endArrived, 30*time.Second)
	if t.Failed() {
		return
	}
	lastStart, firstEnd := int64(0), sessions[0].ended
	for i, s := range sessions {
		lastStart, firstEnd = max(lastStart, s.running), min(firstEnd, s.ended)
		if s.status.State != wire.StateSucceeded {
			t.Errorf("%s's session ended %s (%v), want succeeded (suspended)", names[i], s.status.State, s.status.Error)
		}
		if idle := time.Duration(s.ended - s.turn1); idle < acpGrace || idle > acpGrace+5*time.Second {
			t.Errorf("%s's session ended %s after its turn, want its grace %s (and the teardown)", names[i], idle, acpGrace)
		}
		if want := fmt.Sprintf("echo: first %s (turn 1) model: %s", names[i], fakemodel.AnswerText); s.text.String() != want {
			t.Errorf("%s said %q, want %q", names[i], s.text.String(), want)
		}
	}
	if lastStart >= firstEnd {
		t.Errorf("the three profiles' sessions did not run at once: the last started at %d, the first ended at %d", lastStart, firstEnd)
	}
	if fourth.running < sessions[0].ended {
		t.Errorf("the fourth acp-a session started at %d, before the first gave acp-a's slot back at %d", fourth.running, sessions[0].ended)
	}
	if fourth.status.State != wire.StateSucceeded {
		t.Errorf("the fourth session ended %s (%v)", fourth.status.State, fourth.status.Error)
	}
	if ps := agentProcesses(state); len(ps) > 0 {
		t.Errorf("suspended sessions left agent processes: %v", ps)
	}

	// The first runner goes; the next prompt of the first session is
	// taken by the second.
	first.Stop(t)
	second, _ := subprocessRunner(t, srv.ClientURL(), env("second"))
	defer second.Stop(t)
	before := len(model.Requests())
	resumed := follow(ctx, t, c, run("acp-a", "conv-acp-a", "second a"), &wg)
	wait(t, "the resumed session's turn", resumed.turnEndArrived, 60*time.Second)
	wait(t, "the resumed session's end", resumed.endArrived, 30*time.Second)
	if want := "echo: second a (turn 2) model: " + fakemodel.AnswerText; resumed.text.String() != want || resumed.status.State != wire.StateSucceeded {
		t.Errorf("the resumed session said %q and ended %s (%v), want %q (its turn 2) and succeeded", resumed.text.String(), resumed.status.State, resumed.status.Error, want)
	}
	rec, err := c.Status(t.Context(), "acme", resumed.id)
	if err != nil || rec.Owner != "second" {
		t.Errorf("the resumed session's record = owner %q, %v; want the second runner", rec.Owner, err)
	}
	reqs := model.Requests()[before:]
	if len(reqs) != 1 || reqs[0].LatestUserText() != "second a" || !strings.Contains(reqs[0].Text(), "first acp-a") {
		t.Errorf("the resumed turn's model requests = %+v, want one whose conversation carries turn 1 (\"first acp-a\")", reqs)
	}
}
