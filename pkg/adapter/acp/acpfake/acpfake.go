// Package acpfake is a scriptable ACP agent for tests and benchmarks: the
// agent side of the Agent Client Protocol over stdio, through
// github.com/coder/acp-go-sdk, with no model behind it. Its reply to a
// prompt echoes the prompt and the number of turns it has seen, so a test
// can tell a follow-up in the same live process (the history grows) from
// a fresh one. Words in the prompt script it:
//
//   - [tool]: a read tool call, completed;
//   - [permission]: an execute tool call that asks permission first
//     (options allow_once, reject_once); allowed it completes, rejected it
//     fails;
//   - [slow]: text every 20 ms for up to 10 s, until the turn is cancelled;
//   - [paced]: text every 20 ms, 40 times;
//   - [server_error], [quota]: the turn fails as a model API's 500 or 429
//     would (a JSON-RPC error);
//   - [plan]: a two-entry plan;
//   - [mcp]: the reply names the MCP servers session/new gave it;
//   - [exit]: the process exits at once, mid-turn.
//
// It advertises loadSession when its state directory is set
// (ACPFAKE_STATE): it writes each session's turns there and replays them
// on session/load, from any process.
//
// With ANTHROPIC_BASE_URL set it asks that Messages API for each turn,
// sending the session's whole conversation (every earlier prompt and its
// echo, then the prompt; ANTHROPIC_API_KEY as x-api-key), and adds the
// model's text to its reply ("model: <text>"); a failed request fails the
// turn. A loaded session's request carries the turns of before, as a
// real agent's would (pkg/adapter/cli/fakemodel records it).
package acpfake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// StateEnv names the directory the agent keeps its sessions in; unset,
// it cannot load a session.
const StateEnv = "ACPFAKE_STATE"

// Main runs the agent on stdin and stdout until stdin closes, then exits.
func Main() {
	a := &agent{state: os.Getenv(StateEnv), sessions: map[sdk.SessionId]*session{}}
	conn := sdk.NewAgentSideConnection(a, os.Stdout, os.Stdin)
	a.conn = conn
	conn.SetLogger(slog.New(slog.DiscardHandler))
	<-conn.Done()
	os.Exit(0)
}

type session struct {
	History []string `json:"history"` // the prompts, in order
	MCP     []string `json:"mcp"`
	cancel  context.CancelFunc
}

type agent struct {
	conn  *sdk.AgentSideConnection
	state string

	mu       sync.Mutex
	next     int
	sessions map[sdk.SessionId]*session
}

func (a *agent) Initialize(context.Context, sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	return sdk.InitializeResponse{ProtocolVersion: sdk.ProtocolVersionNumber,
		AgentCapabilities: sdk.AgentCapabilities{LoadSession: a.state != ""},
		AgentInfo:         &sdk.Implementation{Name: "acpfake", Version: "1"},
		AuthMethods:       []sdk.AuthMethod{}}, nil
}

func (a *agent) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, nil
}

func serverNames(ms []sdk.McpServer) []string {
	var out []string
	for _, m := range ms {
		switch {
		case m.Stdio != nil:
			out = append(out, m.Stdio.Name+"="+m.Stdio.Command)
		case m.Http != nil:
			out = append(out, m.Http.Name+"="+m.Http.Url)
		case m.Sse != nil:
			out = append(out, m.Sse.Name+"="+m.Sse.Url)
		}
	}
	return out
}

func (a *agent) NewSession(_ context.Context, p sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next++
	// Without a state dir the ids repeat from process to process, so
	// that two runs of one script stream the same chunks; with one they
	// are unique, for session/load (random: a sandboxed agent's pid is
	// its namespace's, the same in every run).
	id := sdk.SessionId(fmt.Sprintf("fake-%d", a.next))
	if a.state != "" {
		id = sdk.SessionId(fmt.Sprintf("fake-%s-%d", rand.Text(), a.next))
	}
	a.sessions[id] = &session{MCP: serverNames(p.McpServers)}
	return sdk.NewSessionResponse{SessionId: id}, nil
}

func (a *agent) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	if a.state == "" {
		return sdk.LoadSessionResponse{}, sdk.NewMethodNotFound("session/load")
	}
	b, err := os.ReadFile(filepath.Join(a.state, filepath.Base(string(p.SessionId))+".json"))
	if err != nil {
		return sdk.LoadSessionResponse{}, sdk.NewInvalidParams(map[string]any{"error": "no such session"})
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil {
		return sdk.LoadSessionResponse{}, sdk.NewInternalError(map[string]any{"error": err.Error()})
	}
	s.MCP = serverNames(p.McpServers)
	for i, h := range s.History {
		_ = a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: p.SessionId, Update: sdk.UpdateUserMessageText(h)})
		_ = a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: p.SessionId, Update: sdk.UpdateAgentMessageText(reply(h, i+1))})
	}
	a.mu.Lock()
	a.sessions[p.SessionId] = &s
	a.mu.Unlock()
	return sdk.LoadSessionResponse{}, nil
}

func reply(prompt string, turn int) string {
	return fmt.Sprintf("echo: %s (turn %d)", prompt, turn)
}

func (a *agent) Cancel(_ context.Context, p sdk.CancelNotification) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[p.SessionId]; s != nil && s.cancel != nil {
		s.cancel()
	}
	return nil
}

func (a *agent) update(ctx context.Context, id sdk.SessionId, u sdk.SessionUpdate) error {
	return a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: id, Update: u})
}

func (a *agent) Prompt(parent context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	a.mu.Lock()
	s := a.sessions[p.SessionId]
	if s == nil {
		a.mu.Unlock()
		return sdk.PromptResponse{}, sdk.NewInvalidParams(map[string]any{"error": "no such session"})
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	s.cancel = cancel
	var text []string
	for _, b := range p.Prompt {
		if b.Text != nil {
			text = append(text, b.Text.Text)
		}
	}
	prompt := strings.Join(text, "\n")
	s.History = append(s.History, prompt)
	turn := len(s.History)
	mcp := s.MCP
	history := slices.Clone(s.History)
	a.mu.Unlock()
	defer a.save(p.SessionId)

	id := p.SessionId
	if strings.Contains(prompt, "[exit]") {
		os.Exit(3)
	}
	if err := a.update(ctx, id, sdk.UpdateAgentThoughtText("considering turn "+fmt.Sprint(turn))); err != nil {
		return sdk.PromptResponse{}, err
	}
	if strings.Contains(prompt, "[plan]") {
		_ = a.update(ctx, id, sdk.UpdatePlan(sdk.PlanEntry{Content: "read", Priority: "high", Status: "completed"}, sdk.PlanEntry{Content: "answer", Priority: "medium", Status: "pending"}))
	}
	if strings.Contains(prompt, "[tool]") {
		tc := sdk.ToolCallId(fmt.Sprintf("read-%d", turn))
		_ = a.update(ctx, id, sdk.StartToolCall(tc, "Read README.md", sdk.WithStartKind(sdk.ToolKindRead), sdk.WithStartRawInput(map[string]any{"path": "README.md"})))
		_ = a.update(ctx, id, sdk.UpdateToolCall(tc, sdk.WithUpdateStatus(sdk.ToolCallStatusCompleted), sdk.WithUpdateContent([]sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock("# readme"))})))
	}
	if strings.Contains(prompt, "[lost_tool]") {
		// A shell that could not start: the call begins and is never
		// reported completed or failed (codex-acp without bubblewrap).
		tc := sdk.ToolCallId(fmt.Sprintf("lost-%d", turn))
		_ = a.update(ctx, id, sdk.StartToolCall(tc, "Run echo hi", sdk.WithStartKind(sdk.ToolKindExecute), sdk.WithStartStatus(sdk.ToolCallStatusInProgress)))
	}
	if strings.Contains(prompt, "[permission]") {
		tc := sdk.ToolCallId(fmt.Sprintf("exec-%d", turn))
		kind := sdk.ToolKindExecute
		title := "Run rm -rf build"
		_ = a.update(ctx, id, sdk.StartToolCall(tc, title, sdk.WithStartKind(kind), sdk.WithStartStatus(sdk.ToolCallStatusPending), sdk.WithStartRawInput(map[string]any{"command": "rm -rf build"})))
		resp, err := a.conn.RequestPermission(ctx, sdk.RequestPermissionRequest{SessionId: id,
			ToolCall: sdk.ToolCallUpdate{ToolCallId: tc, Title: &title, Kind: &kind},
			Options: []sdk.PermissionOption{
				{OptionId: "allow", Name: "Allow once", Kind: sdk.PermissionOptionKindAllowOnce},
				{OptionId: "reject", Name: "Reject", Kind: sdk.PermissionOptionKindRejectOnce},
			}})
		if err != nil {
			return sdk.PromptResponse{}, err
		}
		switch {
		case resp.Outcome.Selected != nil && resp.Outcome.Selected.OptionId == "allow":
			_ = a.update(ctx, id, sdk.UpdateToolCall(tc, sdk.WithUpdateStatus(sdk.ToolCallStatusCompleted), sdk.WithUpdateContent([]sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock("removed build"))})))
			_ = a.update(ctx, id, sdk.UpdateAgentMessageText("I ran the command. "))
		case resp.Outcome.Cancelled != nil:
			return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
		default:
			_ = a.update(ctx, id, sdk.UpdateToolCall(tc, sdk.WithUpdateStatus(sdk.ToolCallStatusFailed), sdk.WithUpdateContent([]sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock("permission denied"))})))
			_ = a.update(ctx, id, sdk.UpdateAgentMessageText("I was not allowed to run it. "))
		}
	}
	switch {
	case strings.Contains(prompt, "[server_error]"):
		return sdk.PromptResponse{}, &sdk.RequestError{Code: -32603, Message: "Internal error", Data: map[string]any{"details": "API Error: 500 Internal Server Error"}}
	case strings.Contains(prompt, "[quota]"):
		return sdk.PromptResponse{}, &sdk.RequestError{Code: -32603, Message: "Internal error", Data: map[string]any{"details": "API Error: 429 rate limit exceeded"}}
	}
	ticks := 0
	switch {
	case strings.Contains(prompt, "[slow]"):
		ticks = 500
	case strings.Contains(prompt, "[paced]"):
		ticks = 40
	}
	if ticks > 0 {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < ticks; i++ {
			select {
			case <-ctx.Done():
				return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
			case <-tick.C:
				if err := a.update(ctx, id, sdk.UpdateAgentMessageText(".")); err != nil {
					if errors.Is(ctx.Err(), context.Canceled) {
						return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
					}
					return sdk.PromptResponse{}, err
				}
			}
		}
	}
	out := reply(prompt, turn)
	if strings.Contains(prompt, "[mcp]") {
		out += " mcp=" + strings.Join(mcp, ",")
	}
	if base := os.Getenv("ANTHROPIC_BASE_URL"); base != "" {
		said, err := askModel(ctx, base, history)
		if err != nil {
			return sdk.PromptResponse{}, &sdk.RequestError{Code: -32603, Message: "Internal error", Data: map[string]any{"details": "API Error: " + err.Error()}}
		}
		out += " model: " + said
	}
	half := len(out) / 2
	_ = a.update(ctx, id, sdk.UpdateAgentMessageText(out[:half]))
	_ = a.update(ctx, id, sdk.UpdateAgentMessageText(out[half:]))
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn, Usage: &sdk.Usage{InputTokens: 10 * turn, OutputTokens: 5, TotalTokens: 10*turn + 5}}, nil
}

// askModel sends the conversation of history (its last entry the
// prompt) to the Messages API at base and returns the text it answered.
func askModel(ctx context.Context, base string, history []string) (string, error) {
	var msgs []map[string]any
	for i, h := range history {
		msgs = append(msgs, map[string]any{"role": "user", "content": h})
		if i < len(history)-1 {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": reply(h, i+1)})
		}
	}
	body, err := json.Marshal(map[string]any{"model": "acpfake", "max_tokens": 256, "stream": false, "messages": msgs})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", os.Getenv("ANTHROPIC_API_KEY"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var m struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil {
		return "", err
	}
	var said []string
	for _, c := range m.Content {
		if c.Type == "text" {
			said = append(said, c.Text)
		}
	}
	return strings.Join(said, ""), nil
}

// save writes the session's turns for a later session/load.
func (a *agent) save(id sdk.SessionId) {
	if a.state == "" {
		return
	}
	a.mu.Lock()
	b, err := json.Marshal(a.sessions[id])
	a.mu.Unlock()
	if err == nil {
		_ = os.WriteFile(filepath.Join(a.state, filepath.Base(string(id))+".json"), b, 0o600)
	}
}

func (a *agent) CloseSession(context.Context, sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	return sdk.CloseSessionResponse{}, nil
}

func (a *agent) ListSessions(context.Context, sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	return sdk.ListSessionsResponse{}, sdk.NewMethodNotFound("session/list")
}

func (a *agent) ResumeSession(context.Context, sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	return sdk.ResumeSessionResponse{}, sdk.NewMethodNotFound("session/resume")
}

func (a *agent) SetSessionConfigOption(context.Context, sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	return sdk.SetSessionConfigOptionResponse{}, sdk.NewMethodNotFound("session/set_config_option")
}

func (a *agent) SetSessionMode(context.Context, sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	return sdk.SetSessionModeResponse{}, sdk.NewMethodNotFound("session/set_mode")
}
