package mesh_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/acp"
	"github.com/agentmesh/agentmesh/pkg/adapter/acp/acpfake"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
	sdk "github.com/coder/acp-go-sdk"
	"github.com/nats-io/nats-server/v2/server"
)

// acpFakeEnv makes this test binary the fake ACP agent (acpfake).
const acpFakeEnv = "AGENTMESH_TEST_ACP_FAKE"

// acpMesh is a node hosting adapter acp over the fake agent, profile
// "acp-fake", with the shortest timers its profile accepts (1 s).
func acpMesh(t *testing.T, srv *server.Server) *client.Client {
	t.Helper()
	a, err := acp.New(acp.Config{
		Config: cli.Config{Binary: os.Args[0], InstallHint: "the test binary", WorkspaceRoot: t.TempDir(),
			EnvSet: map[string]string{acpFakeEnv: "1", acpfake.StateEnv: t.TempDir(), "GORACE": "atexit_sleep_ms=0"}},
		PermissionTimeout: profile.MinSessionTimeout, IdleTimeout: profile.MinSessionTimeout,
		MCPServers: map[string]sdk.McpServer{"docs": {Stdio: &sdk.McpServerStdio{Name: "docs", Command: "/usr/bin/docs-mcp", Args: []string{}, Env: []sdk.EnvVariable{}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	profiles := acpProfiles(t)
	startNodeWith(t, srv, mesh.Config{}, profiles, a)
	return newClient(t, srv)
}

// acpProfiles holds profile "acp-fake" of adapter acp, its agent this
// test binary.
func acpProfiles(t *testing.T) *profile.Registry {
	t.Helper()
	profiles, err := profile.New(profile.Profile{Name: "acp-fake", Adapter: acp.Name, Transport: wire.TransportSubprocess,
		Model: "fake", Binary: os.Args[0], InstallHint: "the test binary",
		Pricing: map[string]string{"input": "1", "output": "2", "cache_read": "0", "cache_write": "0", "reasoning": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	return profiles
}

func acpRun(t *testing.T, req map[string]any) wire.RunRequest {
	return wire.RunRequest{RunID: client.NewRunID(), Tenant: tenant, Principal: "alice", Profile: "acp-fake", Request: clienttest.Msgpack(t, req)}
}

// A session through the mesh: a follow-up in the same live agent (which
// sees the first turn), a permission request approved through the client,
// one nobody answers (denied at the timeout, and the stream says so), an
// interrupt mid-turn, then the idle end; every event gapless, and a
// follow-up to the ended session refused with SessionEnded.
func TestACPSessionThroughTheMesh(t *testing.T) {
	srv := natstest.RunJetStream(t)
	c := acpMesh(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := acpRun(t, map[string]any{"prompt": "first"})
	id, events, err := c.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	next := map[int]string{1: "second [permission]", 2: "third [permission]", 3: "fourth [slow]"}
	var evs []wire.Event
	dots := 0
	for ev, err := range events {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		if ev.Kind != wire.KindChunk {
			continue
		}
		ch := ev.Chunk
		switch ch.Type {
		case wire.ChunkTurnEnd:
			if p, ok := next[*ch.Metadata.NumTurns]; ok {
				rep, err := c.Send(ctx, tenant, id, p)
				if err != nil || rep.Turn != *ch.Metadata.NumTurns+1 {
					t.Fatalf("Send %q = %+v, %v", p, rep, err)
				}
			}
		case wire.ChunkPermissionRequested:
			if strings.HasPrefix(ch.ToolName, "Run") && dots == 0 && !answered(evs) {
				rep, err := c.Answer(ctx, tenant, id, ch.ToolID, true, "")
				if err != nil || rep.OptionID != "allow" {
					t.Fatalf("Answer = %+v, %v", rep, err)
				}
			}
		case wire.ChunkText:
			if ch.Content == "." {
				if dots++; dots == 3 {
					if _, err := c.Interrupt(ctx, tenant, id); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	checkGapless(t, evs)
	if st := last(evs); st.State != wire.StateSucceeded {
		t.Fatalf("session ended %s: %v (%s)", st.State, st.Error, describe(evs))
	}
	var resolved []wire.Chunk
	var ends []string
	var text strings.Builder
	for _, ev := range evs {
		if ev.Kind != wire.KindChunk {
			continue
		}
		switch ev.Chunk.Type {
		case wire.ChunkPermissionResolved:
			resolved = append(resolved, *ev.Chunk)
		case wire.ChunkTurnEnd:
			ends = append(ends, ev.Chunk.Metadata.StopReason)
		case wire.ChunkText:
			text.WriteString(ev.Chunk.Content)
		}
	}
	if len(resolved) != 2 || resolved[0].ToolOutput.(map[string]any)["by"] != "client" || resolved[1].ToolOutput.(map[string]any)["by"] != "timeout" ||
		resolved[1].Metadata.ErrorClass != wire.PermissionTimeout {
		t.Errorf("permission_resolved chunks %+v", resolved)
	}
	if got := strings.Join(ends, ","); got != "end_turn,end_turn,end_turn,cancelled" {
		t.Errorf("turn ends %s", got)
	}
	for _, want := range []string{"echo: first (turn 1)", "I ran the command. echo: second [permission] (turn 2)", "I was not allowed to run it. echo: third [permission] (turn 3)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text %q lacks %q", text.String(), want)
		}
	}
	if _, err := c.Send(ctx, tenant, id, "too late"); !errors.Is(err, wire.SessionEnded) {
		t.Errorf("Send to the ended session = %v, want SessionEnded", err)
	}
	if _, err := c.Answer(ctx, tenant, id, "perm-1", true, ""); !errors.Is(err, wire.SessionEnded) {
		t.Errorf("Answer to the ended session = %v, want SessionEnded", err)
	}
}

// answered reports whether a permission was resolved already (the second
// request is left to time out).
func answered(evs []wire.Event) bool {
	for _, ev := range evs {
		if ev.Kind == wire.KindChunk && ev.Chunk.Type == wire.ChunkPermissionResolved {
			return true
		}
	}
	return false
}

// An MCP server outside the profile's allowlist, or one defined in the
// request, is refused at submission with a typed error naming the field;
// nothing runs.
func TestACPSessionRefusesMCPOutsideTheAllowlist(t *testing.T) {
	srv := natstest.RunJetStream(t)
	c := acpMesh(t, srv)
	for name, servers := range map[string][]any{
		"outside the allowlist": {"shell"},
		"a command":             {map[string]any{"name": "x", "command": "/bin/sh"}},
	} {
		_, evs := clienttest.Run(t, c, acpRun(t, map[string]any{"prompt": "p", "mcp_servers": servers}))
		st := last(evs)
		if st.State != wire.StateRejected || st.Error == nil || st.Error.Class != wire.AgenticRequestValidationError || !strings.Contains(st.Error.Message, "mcp_servers[0]") {
			t.Errorf("%s: %s %+v", name, describe(evs), st.Error)
		}
	}
}

// A run that is not a session (the fixture adapter) refuses a follow-up
// with SessionEnded; so does a run that does not exist, with a
// validation error.
func TestFollowUpToARunThatIsNotASession(t *testing.T) {
	srv := natstest.RunJetStream(t)
	startNode(t, srv, mesh.Config{})
	c := newClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := submitRunning(ctx, t, c, fixtureReq{Prompt: "slow", DelayMS: 3000})
	if _, err := c.Send(ctx, tenant, id, "more"); !errors.Is(err, wire.SessionEnded) || !strings.Contains(err.Error(), "not a session") {
		t.Errorf("Send to a fixture run = %v, want SessionEnded: not a session", err)
	}
	if _, err := c.Send(ctx, tenant, "no-such-run", "more"); !errors.Is(err, wire.AgenticRequestValidationError) {
		t.Errorf("Send to no run = %v", err)
	}
	_, _ = c.Cancel(ctx, tenant, id)
}

// The test binary doubles as a runner process hosting adapter acp over
// the fake agent, its sessions' state in the given dir, against the NATS
// URL, until killed.
const (
	acpRunnerEnv   = "AGENTMESH_TEST_ACP_RUNNER_URL"
	acpRunnerID    = "AGENTMESH_TEST_ACP_RUNNER_ID"
	acpRunnerState = "AGENTMESH_TEST_ACP_RUNNER_STATE"
)

// acpGrace is the grace of the fake agent's teardown in these tests;
// the runner's ack wait and the lease TTL must be above its bound.
const acpGrace = 300 * time.Millisecond

func acpAdapter(state, root string) (*acp.Adapter, error) {
	return acp.New(acp.Config{
		Config: cli.Config{Binary: os.Args[0], InstallHint: "the test binary", WorkspaceRoot: root, Grace: acpGrace,
			EnvSet: map[string]string{acpFakeEnv: "1", acpfake.StateEnv: state, "GORACE": "atexit_sleep_ms=0"}},
		PermissionTimeout: profile.MinSessionTimeout, IdleTimeout: 5 * time.Second,
	})
}

func runACPRunner(url string) int {
	return serveRunner(url, "acp-runner", os.Getenv(acpRunnerID), 6*time.Second, func() (adapter.Adapter, func(), error) {
		root, err := os.MkdirTemp("", "acp-runner")
		if err != nil {
			return nil, nil, err
		}
		a, err := acpAdapter(os.Getenv(acpRunnerState), root)
		return a, func() { _ = os.RemoveAll(root) }, err
	})
}

func startACPRunner(t *testing.T, srv *server.Server, id, state string) *exec.Cmd {
	t.Helper()
	return startChild(t, true, acpRunnerEnv+"="+srv.ClientURL(), acpRunnerID+"="+id, acpRunnerState+"="+state)
}

// untilTurnEnd reads events until the turn_end of turn n, returning the
// text said on the way.
func untilTurnEnd(t *testing.T, events func(func(wire.Event, error) bool), n int) string {
	t.Helper()
	var text strings.Builder
	for ev, err := range events {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == wire.KindStatus && ev.Status.State.Terminal() {
			t.Fatalf("the run ended %s (%v) before turn %d ended", ev.Status.State, ev.Status.Error, n)
		}
		if ev.Kind != wire.KindChunk {
			continue
		}
		switch ev.Chunk.Type {
		case wire.ChunkText:
			text.WriteString(ev.Chunk.Content)
		case wire.ChunkTurnEnd:
			if *ev.Chunk.Metadata.NumTurns == n {
				return text.String()
			}
		}
	}
	t.Fatalf("the events ended before turn %d did", n)
	return ""
}

// The session's runner is SIGKILLed between two turns: a follow-up to it
// is refused with SessionLost (never queued anywhere else), and the next
// run on its conversation, taken by a second runner, loads the agent's
// session (session/load) from the checkpoint and goes on with the history
// (turn 2), not a fresh conversation. The lost run ends failed, never
// attempted again.
func TestACPSessionResumesOnAnotherRunnerAfterSIGKILL(t *testing.T) {
	srv := natstest.RunJetStream(t)
	cfg := mesh.Config{WithoutRunner: true}
	cfg.Topology.LeaseTTL = 6 * time.Second
	state := t.TempDir()
	a, err := acpAdapter(state, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	profiles := acpProfiles(t)
	startNodeWith(t, srv, cfg, profiles, a)
	c := newClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	doomed := startACPRunner(t, srv, "doomed", state)
	req := acpRun(t, map[string]any{"prompt": "first"})
	req.Conversation = "conv-1"
	id, events, err := c.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := untilTurnEnd(t, events, 1); got != "echo: first (turn 1)" {
		t.Fatalf("turn 1 said %q", got)
	}
	kill(t, doomed)
	startACPRunner(t, srv, "second", state)

	if _, err := c.Send(ctx, tenant, id, "second"); !errors.Is(err, wire.SessionLost) {
		t.Fatalf("Send to the session whose runner died = %v, want SessionLost", err)
	}
	next := acpRun(t, map[string]any{"prompt": "second"})
	next.Conversation = "conv-1"
	id2, events2, err := c.Start(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if got := untilTurnEnd(t, events2, 1); got != "echo: second (turn 2)" {
		t.Fatalf("the resumed session said %q, want its turn 2 (the history loaded)", got)
	}
	if _, err := c.Cancel(ctx, tenant, id2); err != nil {
		t.Fatal(err)
	}
	lost := collect(t, c, id)
	if st := last(lost); st.State != wire.StateFailed {
		t.Fatalf("the lost session ended %s: %s", st.State, describe(lost))
	}
	for _, ev := range lost {
		if ev.Kind == wire.KindStatus && ev.Status.State == wire.StateRunning && ev.Status.Attempt != 1 {
			t.Fatalf("the lost session was attempted again: %s", describe(lost))
		}
	}
}
