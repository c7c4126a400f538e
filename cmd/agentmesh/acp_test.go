package main

import (
	"context"
	"io"
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
}

func (e *editor) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	e.mu.Lock()
	defer e.mu.Unlock()
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
	nc, _ := natstest.ConnectURL(t, m.url)
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	toAgent, agentIn := io.Pipe()
	agentOut, toEditor := io.Pipe()
	_, _, errOut := testIO(nil)
	a := newACPAgent(c, "default", "local", "acp-fake", nil, errOut)
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
