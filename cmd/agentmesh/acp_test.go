package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentmesh/agentmesh/pkg/adapter/acp"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
)

// editor is an ACP client, as an editor is: it records the text each
// session is told and answers permission requests with allow.
type editor struct {
	acp.NoTools
	mu     sync.Mutex
	text   map[sdk.SessionId]*strings.Builder
	asked  int
	allow  bool
	onText func(string)
	log    []string // every update, in order (record)
}

// record logs an update as a line: "user: …", "agent: …", "thought: …"
// (the chunks of one message joined), "tool_call <id> <title> <status>
// <raw input>", "tool_update <id> <status> <text>".
func (e *editor) record(u sdk.SessionUpdate) {
	text := func(c sdk.ContentBlock) string {
		if c.Text != nil {
			return c.Text.Text
		}
		return "?"
	}
	add := func(kind, s string) {
		if n := len(e.log); n > 0 && strings.HasPrefix(e.log[n-1], kind+": ") {
			e.log[n-1] += s
			return
		}
		e.log = append(e.log, kind+": "+s)
	}
	switch {
	case u.UserMessageChunk != nil:
		add("user", text(u.UserMessageChunk.Content))
	case u.AgentMessageChunk != nil:
		add("agent", text(u.AgentMessageChunk.Content))
	case u.AgentThoughtChunk != nil:
		add("thought", text(u.AgentThoughtChunk.Content))
	case u.ToolCall != nil:
		in, _ := json.Marshal(u.ToolCall.RawInput)
		e.log = append(e.log, fmt.Sprintf("tool_call %s %s %s %s", u.ToolCall.ToolCallId, u.ToolCall.Title, u.ToolCall.Status, in))
	case u.ToolCallUpdate != nil:
		var out []string
		for _, c := range u.ToolCallUpdate.Content {
			if c.Content != nil {
				out = append(out, text(c.Content.Content))
			}
		}
		status := ""
		if u.ToolCallUpdate.Status != nil {
			status = string(*u.ToolCallUpdate.Status)
		}
		e.log = append(e.log, fmt.Sprintf("tool_update %s %s %s", u.ToolCallUpdate.ToolCallId, status, strings.Join(out, "")))
	default:
		e.log = append(e.log, "other")
	}
}

func (e *editor) updates() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.log)
}

func (e *editor) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.record(n.Update)
	if u := n.Update.AgentMessageChunk; u != nil && u.Content.Text != nil {
		if e.text[n.SessionId] == nil {
			e.text[n.SessionId] = &strings.Builder{}
		}
		e.text[n.SessionId].WriteString(u.Content.Text.Text)
		if e.onText != nil {
			e.onText(u.Content.Text.Text)
		}
	}
	return nil
}

func (e *editor) said(id sdk.SessionId) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.text[id] == nil {
		return ""
	}
	return e.text[id].String()
}

func (e *editor) RequestPermission(_ context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	e.mu.Lock()
	e.asked++
	allow := e.allow
	e.mu.Unlock()
	for _, o := range p.Options {
		if strings.HasPrefix(string(o.Kind), map[bool]string{true: "allow", false: "reject"}[allow]) {
			return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(o.OptionId)}, nil
		}
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
}

// connectEditor serves agentmesh acp for profile acp-fake of m on pipes
// and returns an editor's connection to it; closing it ends the server.
func connectEditor(t *testing.T, m *testMesh, e *editor) (*sdk.ClientSideConnection, func()) {
	t.Helper()
	return connectEditorAs(t, m, e, "default")
}

// connectEditorAs is connectEditor for a tenant's agentmesh acp.
func connectEditorAs(t *testing.T, m *testMesh, e *editor, tenant string) (*sdk.ClientSideConnection, func()) {
	t.Helper()
	nc, _ := natstest.ConnectURL(t, m.url)
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	toAgent, agentIn := io.Pipe()
	agentOut, toEditor := io.Pipe()
	_, _, errOut := testIO(nil)
	a := newACPAgent(c, tenant, "local", "acp-fake", nil, errOut)
	done := make(chan error, 1)
	go func() { done <- a.serve(context.Background(), toAgent, toEditor) }()
	conn := sdk.NewClientSideConnection(e, agentIn, agentOut)
	stop := func() {
		_ = agentIn.Close()
		_ = toEditor.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not return after the editor left")
		}
		<-conn.Done()
	}
	return conn, stop
}

// An editor drives a pooled agent through agentmesh acp: initialize,
// session/new, a prompt and a follow-up in the same live session (the
// agent sees the first turn), a permission request round-tripped to the
// editor and allowed, a cancel mid-turn, then, on a new connection,
// session/load of the earlier session, whose next prompt continues the
// conversation on a fresh agent (session/load on the runner).
func TestACPServerDrivenByAnEditor(t *testing.T) {
	// The fake agent keeps its sessions in a directory of the host
	// (ACPFAKE_STATE), which a sandboxed run does not see: session/load on
	// a fresh agent needs it, so this test runs the agent unsandboxed.
	t.Setenv("AGENTMESH_SANDBOX", "off")
	m := startUpWith(t, acpProfiles(t), false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := &editor{text: map[sdk.SessionId]*strings.Builder{}, allow: true}
	conn, stop := connectEditor(t, m, e)
	init, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber})
	if err != nil || !init.AgentCapabilities.LoadSession {
		t.Fatalf("initialize = %+v, %v", init, err)
	}
	ns, err := conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: "/editor/project", McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	prompt := func(text string) sdk.PromptResponse {
		t.Helper()
		resp, err := conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}})
		if err != nil {
			t.Fatalf("prompt %q: %v", text, err)
		}
		return resp
	}
	if r := prompt("first"); r.StopReason != sdk.StopReasonEndTurn || !strings.Contains(e.said(ns.SessionId), "echo: first (turn 1)") {
		t.Fatalf("first prompt: %+v, said %q", r, e.said(ns.SessionId))
	}
	if r := prompt("second [permission]"); r.StopReason != sdk.StopReasonEndTurn || !strings.Contains(e.said(ns.SessionId), "I ran the command. echo: second [permission] (turn 2)") {
		t.Fatalf("second prompt: %+v, said %q", r, e.said(ns.SessionId))
	}
	if e.asked != 1 {
		t.Errorf("the editor was asked %d times, want 1", e.asked)
	}
	dots := 0
	e.mu.Lock()
	e.onText = func(s string) {
		if s == "." {
			if dots++; dots == 3 {
				go func() { _ = conn.Cancel(ctx, sdk.CancelNotification{SessionId: ns.SessionId}) }()
			}
		}
	}
	e.mu.Unlock()
	if r := prompt("count [slow]"); r.StopReason != sdk.StopReasonCancelled {
		t.Fatalf("the cancelled prompt: %+v", r)
	}
	e.mu.Lock()
	e.onText = nil
	e.mu.Unlock()
	if r := prompt("fourth"); r.StopReason != sdk.StopReasonEndTurn || !strings.Contains(e.said(ns.SessionId), "echo: fourth (turn 4)") {
		t.Fatalf("the prompt after the cancel: %+v, said %q", r, e.said(ns.SessionId))
	}
	stop() // the editor goes: its session run is cancelled

	e2 := &editor{text: map[sdk.SessionId]*strings.Builder{}}
	conn2, stop2 := connectEditor(t, m, e2)
	defer stop2()
	if _, err := conn2.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn2.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: ns.SessionId, Cwd: "/editor/project", McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := conn2.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("after the load")}})
	if err != nil || resp.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt after the load: %+v, %v", resp, err)
	}
	if got := e2.said(ns.SessionId); !strings.Contains(got, "echo: after the load (turn 5)") {
		t.Errorf("after the load the agent said %q, want turn 5 (the conversation continued)", got)
	}
}

// session/load replays the conversation before it answers: every run of
// it (two here: the first editor's, cancelled when it left, and the one
// the second editor's prompt started after its load), each turn's user
// message, the agent's thoughts, tool call and its result, and its
// message, in order. Another tenant's agentmesh acp loading the same
// session id is told nothing, and the client's History of it is
// ErrNotFound for that tenant.
func TestACPLoadReplaysHistory(t *testing.T) {
	t.Setenv("AGENTMESH_SANDBOX", "off") // the fake agent's session/load reads host state (see above)
	m := startUpWith(t, acpProfiles(t), false)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	open := func(e *editor, tenant string) (*sdk.ClientSideConnection, func()) {
		conn, stop := connectEditorAs(t, m, e, tenant)
		if _, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
			t.Fatal(err)
		}
		return conn, stop
	}
	prompt := func(conn *sdk.ClientSideConnection, id sdk.SessionId, text string) {
		t.Helper()
		if r, err := conn.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}}); err != nil || r.StopReason != sdk.StopReasonEndTurn {
			t.Fatalf("prompt %q: %+v, %v", text, r, err)
		}
	}
	load := func(conn *sdk.ClientSideConnection, e *editor, id sdk.SessionId) []string {
		t.Helper()
		if _, err := conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: id, Cwd: "/editor/project", McpServers: []sdk.McpServer{}}); err != nil {
			t.Fatalf("session/load: %v", err)
		}
		return e.updates() // the SDK hands the response over once the notifications before it are handled
	}

	e1 := &editor{text: map[sdk.SessionId]*strings.Builder{}}
	conn1, stop1 := open(e1, "default")
	ns, err := conn1.NewSession(ctx, sdk.NewSessionRequest{Cwd: "/editor/project", McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	prompt(conn1, ns.SessionId, "first [tool]")
	prompt(conn1, ns.SessionId, "second")
	stop1()

	run1 := []string{
		"user: first [tool]",
		"thought: considering turn 1",
		`tool_call read-1 Read README.md pending {"kind":"read","path":"README.md"}`,
		"tool_update read-1 completed # readme",
		"agent: echo: first [tool] (turn 1)",
		"user: second",
		"thought: considering turn 2",
		"agent: echo: second (turn 2)",
	}
	e2 := &editor{text: map[sdk.SessionId]*strings.Builder{}}
	conn2, stop2 := open(e2, "default")
	if got := load(conn2, e2, ns.SessionId); !slices.Equal(got, run1) {
		t.Fatalf("the first load replayed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(run1, "\n"))
	}
	prompt(conn2, ns.SessionId, "third")
	stop2()

	want := append(slices.Clone(run1), "user: third", "thought: considering turn 3", "agent: echo: third (turn 3)")
	e3 := &editor{text: map[sdk.SessionId]*strings.Builder{}}
	conn3, stop3 := open(e3, "default")
	defer stop3()
	if got := load(conn3, e3, ns.SessionId); !slices.Equal(got, want) {
		t.Fatalf("the second load replayed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	nc, _ := natstest.ConnectURL(t, m.url)
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.History(ctx, "default", string(ns.SessionId))
	if err != nil || len(h.Runs) != 2 || h.Runs[0].Prompt != "first [tool]" || h.Runs[1].Prompt != "third" {
		t.Fatalf("History = %+v, %v; want two runs, of prompts %q and %q", h, err, "first [tool]", "third")
	}
	if _, err := c.History(ctx, "other", string(ns.SessionId)); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("tenant other's History of default's conversation: %v, want ErrNotFound", err)
	}
	e4 := &editor{text: map[sdk.SessionId]*strings.Builder{}}
	conn4, stop4 := open(e4, "other")
	defer stop4()
	if got := load(conn4, e4, ns.SessionId); len(got) != 0 {
		t.Errorf("tenant other's session/load of default's session replayed %q", got)
	}
}
