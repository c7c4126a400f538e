package acp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/acp"
	"github.com/agentmesh/agentmesh/pkg/adapter/acp/acpfake"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// beFake makes this test binary the fake ACP agent when it is started as
// one.
const beFake = "ACP_TEST_BE_FAKE"

func TestMain(m *testing.M) {
	if os.Getenv(beFake) == "1" {
		acpfake.Main()
	}
	goleak.VerifyTestMain(m)
}

// newAdapter is adapter acp over the fake agent (this binary), its
// sessions' state in a temp dir unless state is "-".
func newAdapter(t *testing.T, edit func(*acp.Config)) (*acp.Adapter, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	cfg := acp.Config{
		Config: cli.Config{Binary: exe, InstallHint: "(the test binary)", WorkspaceRoot: t.TempDir(), Grace: conformance.Grace,
			EnvSet: map[string]string{beFake: "1", acpfake.StateEnv: state}},
		PermissionTimeout: time.Second, IdleTimeout: time.Second,
		MCPServers: map[string]sdk.McpServer{"docs": {Stdio: &sdk.McpServerStdio{Name: "docs", Command: "/usr/bin/docs-mcp", Args: []string{}, Env: []sdk.EnvVariable{}}}},
	}
	if edit != nil {
		edit(&cfg)
	}
	a, err := acp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, state
}

func request(t *testing.T, a *acp.Adapter, fields map[string]any) any {
	t.Helper()
	req, err := a.Validate(conformance.Encode(t, fields))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// collect runs the stream, calling each(i, chunk) after every chunk; it
// returns the chunks and the stream's error.
func collect(t *testing.T, a *acp.Adapter, call adapter.Call, each func(i int, c wire.Chunk)) ([]wire.Chunk, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []wire.Chunk
	for c, err := range a.Stream(ctx, call) {
		if err != nil {
			return out, err
		}
		out = append(out, c)
		if each != nil {
			each(len(out)-1, c)
		}
	}
	return out, nil
}

func types(chunks []wire.Chunk) []wire.ChunkType {
	var out []wire.ChunkType
	for _, c := range chunks {
		if len(out) == 0 || out[len(out)-1] != c.Type || !c.IsDelta {
			out = append(out, c.Type)
		}
	}
	return out
}

var text = conformance.Text

func checkRules(t *testing.T, a *acp.Adapter, chunks []wire.Chunk, err error) {
	t.Helper()
	for _, p := range conformance.Check(a.Capabilities(), chunks, err, conformance.Ran) {
		t.Error(p)
	}
}

// A run without a session is one turn: system, thinking, text, a result
// with the turn's usage, and the agent is gone when Stream returns.
func TestOneTurn(t *testing.T) {
	a, _ := newAdapter(t, nil)
	chunks, err := collect(t, a, adapter.Call{RunID: "r", Request: request(t, a, map[string]any{"prompt": "hello [tool]"}), Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkRules(t, a, chunks, err)
	want := []wire.ChunkType{wire.ChunkSystem, wire.ChunkThinking, wire.ChunkToolUse, wire.ChunkToolResult, wire.ChunkText, wire.ChunkResult}
	if got := types(chunks); !slices.Equal(got, want) {
		t.Fatalf("chunk types %v, want %v", got, want)
	}
	if got := text(chunks); got != "echo: hello [tool] (turn 1)" {
		t.Errorf("text %q", got)
	}
	res := chunks[len(chunks)-1]
	if u := res.Metadata.Usage; u == nil || u.InputTokens != 10 || u.OutputTokens != 5 || res.Metadata.StopReason != "end_turn" {
		t.Errorf("result %+v", res.Metadata)
	}
	if chunks[0].Metadata.ProviderSessionID == "" || chunks[0].Metadata.Provider != acp.Name {
		t.Errorf("system chunk %+v", chunks[0].Metadata)
	}
}

// A tool call the agent starts and never reports completed or failed is a
// failed tool_result at the turn's end, before the turn's result: never
// silence.
func TestToolCallNeverResolved(t *testing.T) {
	a, _ := newAdapter(t, nil)
	chunks, err := collect(t, a, adapter.Call{RunID: "r", Request: request(t, a, map[string]any{"prompt": "hello [lost_tool]"}), Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkRules(t, a, chunks, err)
	want := []wire.ChunkType{wire.ChunkSystem, wire.ChunkThinking, wire.ChunkToolUse, wire.ChunkText, wire.ChunkToolResult, wire.ChunkResult}
	if got := types(chunks); !slices.Equal(got, want) {
		t.Fatalf("chunk types %v, want %v", got, want)
	}
	at := func(typ wire.ChunkType) wire.Chunk {
		return chunks[slices.IndexFunc(chunks, func(c wire.Chunk) bool { return c.Type == typ })]
	}
	use, res := at(wire.ChunkToolUse), at(wire.ChunkToolResult)
	if res.ToolID != use.ToolID || !res.IsError || !strings.Contains(fmt.Sprint(res.ToolOutput), "without reporting this tool call completed or failed") {
		t.Errorf("tool_result %+v for tool_use %+v, want a failed result for it", res, use)
	}
}

// A session takes follow-ups in the same live process: the second turn
// sees the first (the agent counts its history), each turn ends with
// turn_end, and the session ends by its idle timeout with one result
// over both turns.
func TestSessionFollowUp(t *testing.T) {
	a, _ := newAdapter(t, nil)
	s := adapter.NewSession()
	var sent bool
	chunks, err := collect(t, a, adapter.Call{RunID: "r", Request: request(t, a, map[string]any{"prompt": "first"}), Session: s}, func(_ int, c wire.Chunk) {
		if c.Type == wire.ChunkTurnEnd && !sent {
			sent = true
			if turn, ahead, err := s.Send("second"); err != nil || turn != 2 || ahead != 0 {
				t.Errorf("Send = %d, %d, %v", turn, ahead, err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRules(t, a, chunks, err)
	want := []wire.ChunkType{wire.ChunkSystem, wire.ChunkThinking, wire.ChunkText, wire.ChunkTurnEnd, wire.ChunkInput, wire.ChunkThinking, wire.ChunkText, wire.ChunkTurnEnd, wire.ChunkResult}
	if got := types(chunks); !slices.Equal(got, want) {
		t.Fatalf("chunk types %v, want %v", got, want)
	}
	if got := text(chunks); got != "echo: first (turn 1)echo: second (turn 2)" {
		t.Errorf("text %q", got)
	}
	res := chunks[len(chunks)-1]
	if u := res.Metadata.Usage; u == nil || u.InputTokens != 30 || u.OutputTokens != 10 || *res.Metadata.NumTurns != 2 {
		t.Errorf("result %+v", res.Metadata)
	}
	if _, _, err := s.Send("late"); !errors.Is(err, wire.SessionEnded) {
		t.Errorf("Send after the idle end = %v, want SessionEnded", err)
	}
}

// permission runs a [permission] prompt in a session, answering each
// permission_requested chunk with answer (nil: nobody answers).
func permission(t *testing.T, edit func(*acp.Config), answer func(s *adapter.Session, id string)) ([]wire.Chunk, *adapter.Session) {
	t.Helper()
	a, _ := newAdapter(t, edit)
	s := adapter.NewSession()
	chunks, err := collect(t, a, adapter.Call{RunID: "r", Request: request(t, a, map[string]any{"prompt": "clean up [permission]"}), Session: s}, func(_ int, c wire.Chunk) {
		if c.Type == wire.ChunkPermissionRequested && answer != nil {
			answer(s, c.ToolID)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRules(t, a, chunks, err)
	return chunks, s
}

func find(chunks []wire.Chunk, typ wire.ChunkType) (wire.Chunk, bool) {
	for _, c := range chunks {
		if c.Type == typ {
			return c, true
		}
	}
	return wire.Chunk{}, false
}

func TestPermissionApproved(t *testing.T) {
	chunks, s := permission(t, nil, func(s *adapter.Session, id string) {
		if o, err := s.Answer(id, true, ""); err != nil || o != "allow" {
			t.Errorf("Answer = %q, %v", o, err)
		}
	})
	req, ok := find(chunks, wire.ChunkPermissionRequested)
	if !ok || req.ToolName != "Run rm -rf build" || req.ToolInput["kind"] != "execute" || len(req.ToolInput["options"].([]any)) != 2 {
		t.Fatalf("permission_requested %+v", req)
	}
	res, _ := find(chunks, wire.ChunkPermissionResolved)
	if res.ToolID != req.ToolID || res.Content != "allow" || res.ToolOutput.(map[string]any)["by"] != "client" {
		t.Errorf("permission_resolved %+v", res)
	}
	if tr, _ := find(chunks, wire.ChunkToolResult); tr.IsError || tr.ToolOutput != "removed build" {
		t.Errorf("tool_result %+v", tr)
	}
	if _, err := s.Answer(req.ToolID, true, ""); err == nil {
		t.Error("a second answer was taken")
	}
}

func TestPermissionDenied(t *testing.T) {
	chunks, _ := permission(t, nil, func(s *adapter.Session, id string) {
		if _, err := s.Answer(id, true, "reject"); !errors.Is(err, wire.AgenticRequestValidationError) {
			t.Errorf("allow naming a rejecting option = %v", err)
		}
		if o, err := s.Answer(id, false, ""); err != nil || o != "reject" {
			t.Errorf("Answer = %q, %v", o, err)
		}
	})
	if tr, _ := find(chunks, wire.ChunkToolResult); !tr.IsError || tr.ToolOutput != "permission denied" {
		t.Errorf("tool_result %+v", tr)
	}
	if !strings.Contains(text(chunks), "not allowed") {
		t.Errorf("text %q", text(chunks))
	}
}

// An unanswered request is denied at the permission timeout, the stream
// says so (by timeout, PermissionTimeout), and a late answer gets that
// typed error.
func TestPermissionTimeout(t *testing.T) {
	chunks, s := permission(t, nil, nil)
	res, ok := find(chunks, wire.ChunkPermissionResolved)
	if !ok || res.Content != "reject" || res.ToolOutput.(map[string]any)["by"] != "timeout" || res.Metadata.ErrorClass != wire.PermissionTimeout {
		t.Fatalf("permission_resolved %+v", res)
	}
	if tr, _ := find(chunks, wire.ChunkToolResult); !tr.IsError {
		t.Errorf("tool_result %+v", tr)
	}
	if _, err := s.Answer(res.ToolID, true, ""); !errors.Is(err, wire.PermissionTimeout) {
		t.Errorf("a late answer = %v, want PermissionTimeout", err)
	}
}

// The policies decide without asking: deny refuses everything,
// allow_read_only refuses a command. Neither publishes a request.
func TestPermissionPolicies(t *testing.T) {
	for _, policy := range []string{acp.PolicyDeny, acp.PolicyAllowReadOnly} {
		chunks, _ := permission(t, func(c *acp.Config) { c.Policy = policy }, func(*adapter.Session, string) { t.Error("a policy asked") })
		res, ok := find(chunks, wire.ChunkPermissionResolved)
		if !ok || res.Content != "reject" || res.ToolOutput.(map[string]any)["by"] != "policy" {
			t.Errorf("%s: permission_resolved %+v", policy, res)
		}
	}
	// Without a session (a v1/v2 submitter) ask cannot ask: it denies,
	// and no session chunk type appears.
	a, _ := newAdapter(t, nil)
	chunks, err := collect(t, a, adapter.Call{RunID: "r", Request: request(t, a, map[string]any{"prompt": "x [permission] [plan]"})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if c.Type.Version() > 1 {
			t.Errorf("a %s chunk in a run without a session", c.Type)
		}
	}
	if tr, _ := find(chunks, wire.ChunkToolResult); !tr.IsError {
		t.Errorf("tool_result %+v", tr)
	}
}

// An interrupt cancels the turn in progress (stop_reason cancelled) and
// the session takes the next prompt.
func TestInterrupt(t *testing.T) {
	a, _ := newAdapter(t, nil)
	s := adapter.NewSession()
	dots := 0
	chunks, err := collect(t, a, adapter.Call{RunID: "r", Request: request(t, a, map[string]any{"prompt": "count [slow]"}), Session: s}, func(_ int, c wire.Chunk) {
		if c.Type == wire.ChunkText && c.Content == "." {
			if dots++; dots == 3 {
				if err := s.Interrupt(); err != nil {
					t.Error(err)
				}
				if _, _, err := s.Send("after"); err != nil {
					t.Error(err)
				}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var ends []string
	for _, c := range chunks {
		if c.Type == wire.ChunkTurnEnd {
			ends = append(ends, c.Metadata.StopReason)
		}
	}
	if !slices.Equal(ends, []string{"cancelled", "end_turn"}) || !strings.HasSuffix(text(chunks), "echo: after (turn 2)") {
		t.Errorf("turn ends %v, text %q", ends, text(chunks))
	}
}

// MCP servers come from the profile's allowlist by name, to session/new;
// a name outside it, or a definition in the request, is refused.
func TestMCPAllowlist(t *testing.T) {
	a, _ := newAdapter(t, nil)
	chunks, err := collect(t, a, adapter.Call{RunID: "r", Request: request(t, a, map[string]any{"prompt": "[mcp]", "mcp_servers": []any{"docs"}})}, nil)
	if err != nil || !strings.Contains(text(chunks), "mcp=docs=/usr/bin/docs-mcp") {
		t.Fatalf("text %q, %v", text(chunks), err)
	}
	for name, servers := range map[string][]any{
		"outside the allowlist": {"shell"},
		"a command":             {map[string]any{"name": "x", "command": "/bin/sh", "args": []any{"-c", "id"}}},
		"named twice":           {"docs", "docs"},
	} {
		_, err := a.Validate(conformance.Encode(t, map[string]any{"prompt": "p", "mcp_servers": servers}))
		if !errors.Is(err, wire.AgenticRequestValidationError) || !strings.Contains(err.Error(), "mcp_servers[") {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
}

// A session's next run loads the agent's session (session/load) from
// the checkpoint, in a new process: the history carries over and the
// replay is not new content. An agent that cannot load fails the run with
// SessionLost rather than start afresh.
func TestLoad(t *testing.T) {
	a, _ := newAdapter(t, nil)
	var sid []byte
	if _, err := collect(t, a, adapter.Call{RunID: "r1", Request: request(t, a, map[string]any{"prompt": "first"}), SaveCheckpoint: func(b []byte) { sid = b }}, nil); err != nil || len(sid) == 0 {
		t.Fatalf("first run: %v, checkpoint %q", err, sid)
	}
	// The same state dir, a new process.
	chunks, err := collect(t, a, adapter.Call{RunID: "r2", Request: request(t, a, map[string]any{"prompt": "again"}), Checkpoint: sid}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(chunks); got != "echo: again (turn 2)" {
		t.Errorf("text after load %q", got)
	}
	noLoad, _ := newAdapter(t, func(c *acp.Config) { c.EnvSet[acpfake.StateEnv] = "" })
	_, err = collect(t, noLoad, adapter.Call{RunID: "r3", Request: request(t, noLoad, map[string]any{"prompt": "again"}), Checkpoint: sid}, nil)
	if !errors.Is(err, wire.SessionLost) {
		t.Errorf("load without loadSession = %v, want SessionLost", err)
	}
}

// A session waits for its next prompt for its suspend grace when a later
// run can load it (the agent declares loadSession and the call keeps its
// id: SaveCheckpoint), stored again at its turn end, and ends saying it
// was suspended; otherwise (no conversation, or an agent that cannot
// load, as Gemini's) for its idle timeout, and it says it ended.
func TestSuspend(t *testing.T) {
	edit := func(state string) func(*acp.Config) {
		return func(c *acp.Config) {
			c.SuspendAfter, c.IdleTimeout = time.Second, 4*time.Second
			c.EnvSet[acpfake.StateEnv] = state
		}
	}
	for _, tc := range []struct {
		name       string
		state      string // "": the agent cannot load
		checkpoint bool
		wait       time.Duration
		why        string
	}{
		{"suspended", "dir", true, time.Second, "was suspended"},
		{"not on a conversation", "dir", false, 4 * time.Second, "and ended"},
		{"an agent that cannot load", "", true, 4 * time.Second, "and ended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := tc.state
			if state != "" {
				state = t.TempDir()
			}
			a, _ := newAdapter(t, edit(state))
			s := adapter.NewSession()
			call := adapter.Call{RunID: "r", Request: request(t, a, map[string]any{"prompt": "first"}), Session: s}
			saved := 0
			if tc.checkpoint {
				call.SaveCheckpoint = func([]byte) { saved++ }
			}
			var turnEnd time.Time
			chunks, err := collect(t, a, call, func(_ int, c wire.Chunk) {
				if c.Type == wire.ChunkTurnEnd {
					turnEnd = time.Now()
				}
			})
			waited := time.Since(turnEnd)
			if err != nil || chunks[len(chunks)-1].Type != wire.ChunkResult {
				t.Fatalf("stream: %v, %v", types(chunks), err)
			}
			if waited < tc.wait || waited > tc.wait+2*time.Second {
				t.Errorf("the session ended %s after its turn, want %s", waited, tc.wait)
			}
			if _, _, err := s.Send("late"); !errors.Is(err, wire.SessionEnded) || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("Send after the end = %v, want SessionEnded saying it %s", err, tc.why)
			}
			if tc.checkpoint && saved != 2 {
				t.Errorf("the session id was saved %d times, want at the start and at the turn end", saved)
			}
		})
	}
}

// A run on a conversation whose agent session was last active longer ago
// than the suspended timeout does not load it, nor start afresh: it fails
// SessionEnded naming the setting; a younger one loads.
func TestSuspendedTimeout(t *testing.T) {
	a, _ := newAdapter(t, func(c *acp.Config) { c.SuspendedTimeout = time.Hour })
	var sid []byte
	if _, err := collect(t, a, adapter.Call{RunID: "r1", Request: request(t, a, map[string]any{"prompt": "first"}), SaveCheckpoint: func(b []byte) { sid = b }}, nil); err != nil {
		t.Fatal(err)
	}
	chunks, err := collect(t, a, adapter.Call{RunID: "r2", Request: request(t, a, map[string]any{"prompt": "again"}), Checkpoint: sid, CheckpointAt: time.Now().Add(-2 * time.Hour)}, nil)
	if !errors.Is(err, wire.SessionEnded) || !strings.Contains(err.Error(), "session.suspended_timeout") || len(chunks) != 0 {
		t.Errorf("load of a session idle 2h = %v, %v; want SessionEnded naming session.suspended_timeout, and nothing said", types(chunks), err)
	}
	chunks, err = collect(t, a, adapter.Call{RunID: "r3", Request: request(t, a, map[string]any{"prompt": "again"}), Checkpoint: sid, CheckpointAt: time.Now().Add(-time.Minute)}, nil)
	if err != nil || text(chunks) != "echo: again (turn 2)" {
		t.Errorf("load of a session idle 1m = %q, %v", text(chunks), err)
	}
}

// An agent that dies mid-turn fails the stream with the transport's
// typed error, after what it had said.
func TestAgentExits(t *testing.T) {
	a, _ := newAdapter(t, nil)
	_, err := collect(t, a, adapter.Call{RunID: "r", Request: request(t, a, map[string]any{"prompt": "[exit]"})}, nil)
	if !errors.Is(err, wire.ProviderTransportError) {
		t.Fatalf("err = %v, want a ProviderTransportError", err)
	}
}

// Cancelling the run's context ends the stream with no chunk of its own
// and takes the agent down.
func TestCancel(t *testing.T) {
	a, _ := newAdapter(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last wire.Chunk
	var err error
	for c, e := range a.Stream(ctx, adapter.Call{RunID: "r", Request: request(t, a, map[string]any{"prompt": "[slow]"})}) {
		if e != nil {
			err = e
			break
		}
		last = c
		if c.Content == "." {
			cancel()
		}
	}
	if err == nil || last.Type == wire.ChunkResult {
		t.Errorf("after cancel: last %+v, err %v", last, err)
	}
}

// TestConformance runs the conformance suite over adapter acp, its
// streams scripted by their prompts against the fake agent.
func TestConformance(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	prompt := func(p string) map[string]any { return map[string]any{"prompt": p} }
	conformance.Run(t, conformance.Subject{
		Name: acp.Name,
		New: func(cfg cli.Config) (adapter.Adapter, error) {
			return acp.New(acp.Config{Config: cfg, PermissionTimeout: time.Second, IdleTimeout: time.Second})
		},
		Config:   cli.Config{Binary: exe, InstallHint: "(the test binary)", EnvSet: map[string]string{beFake: "1"}},
		Scripted: true,
		Model:    "fake",
		Request:  prompt,
		Streams: []conformance.Stream{
			{Name: "happy", Request: prompt("What is the answer?")},
			{Name: "tool", Request: prompt("read it [tool] [plan]")},
			{Name: "permission", Request: prompt("clean [permission]")},
			{Name: "quota", Request: prompt("[quota]")},
			{Name: "server_error", Request: prompt("[server_error]")},
		},
		Happy:        "happy",
		Errors:       []string{"quota", "server_error"},
		ServerErrors: []string{"server_error"},
		Slow:         conformance.Stream{Name: "paced", Request: prompt("count [paced]")},
		Reasoning:    "considering turn",
	})
}
