package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// cmdACP serves the Agent Client Protocol on stdin and stdout, as an
// editor's agent command: each ACP session is a conversation of the mesh,
// its prompts the turns of a session run of profile --profile on any
// runner (docs/contract.md §6.1). Diagnostics go to stderr; stdout is the
// protocol's.
func cmdACP(ctx context.Context, args []string, io *stdio) error {
	var f clientFlags
	fs := newFlagSet("acp", "--profile <profile> [flags]", io)
	f.register(fs, io)
	prof := fs.String("profile", io.envOr("AGENTMESH_PROFILE", ""), "profile of adapter acp whose agents run the sessions (default from $AGENTMESH_PROFILE)")
	mcp := fs.String("mcp", "", "MCP servers of the profile's allowlist to give every session, by name, comma-separated (the editor's own MCP servers are not forwarded: the mesh never runs a command an editor names)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usageErr("acp: unexpected arguments %q", pos)
	case *prof == "":
		return usageErr("acp: --profile is required")
	}
	var servers []string
	for _, n := range strings.Split(*mcp, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if err := subject.ValidToken("mcp server", n); err != nil {
				return usageErr("acp: --mcp: %v", err)
			}
			servers = append(servers, n)
		}
	}
	nc, c, err := f.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	a := newACPAgent(c, f.tenant, f.principal, *prof, servers, io.stderr)
	return a.serve(ctx, io.stdin, io.stdout)
}

// acpAgent is the mesh as an ACP agent.
type acpAgent struct {
	c                          *client.Client
	tenant, principal, profile string
	mcp                        []string
	log                        *slog.Logger
	conn                       *sdk.AgentSideConnection

	ctx      context.Context // the connection's: ends its runs' followers
	mu       sync.Mutex
	sessions map[sdk.SessionId]*acpSession
	wg       sync.WaitGroup
}

// acpSession is one ACP session: a conversation, and the session run live
// on it, if any.
type acpSession struct {
	id sdk.SessionId

	mu   sync.Mutex
	run  *acpRun // the live run; nil before the first prompt and after it ended
	busy bool    // a prompt is in progress
}

// acpRun is one session run as the server follows it.
type acpRun struct {
	id   string
	ends chan turnEnd // each turn's end, then the run's
}

type turnEnd struct {
	turn  int // 0: the run ended
	stop  sdk.StopReason
	usage *wire.Usage
	err   error
}

func newACPAgent(c *client.Client, tenant, principal, profile string, mcp []string, stderr io.Writer) *acpAgent {
	return &acpAgent{c: c, tenant: tenant, principal: principal, profile: profile, mcp: mcp,
		log: slog.New(slog.NewTextHandler(stderr, nil)), sessions: map[sdk.SessionId]*acpSession{}}
}

// serve speaks ACP on in and out until the peer disconnects or ctx ends,
// then cancels the live session runs it started and returns once their
// followers have.
func (a *acpAgent) serve(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.ctx = ctx
	a.conn = sdk.NewAgentSideConnection(a, out, in)
	a.conn.SetLogger(a.log)
	select {
	case <-a.conn.Done():
	case <-ctx.Done():
	}
	a.mu.Lock()
	for _, s := range a.sessions {
		s.mu.Lock()
		if s.run != nil {
			cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
			if _, err := a.c.Cancel(cctx, a.tenant, s.run.id); err != nil {
				a.log.Warn("cancel the session's run", "run_id", s.run.id, "err", err)
			}
			stop()
		}
		s.mu.Unlock()
	}
	a.mu.Unlock()
	cancel()
	a.wg.Wait()
	return nil
}

func (a *acpAgent) Initialize(context.Context, sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	return sdk.InitializeResponse{ProtocolVersion: sdk.ProtocolVersionNumber,
		AgentCapabilities: sdk.AgentCapabilities{LoadSession: true},
		AgentInfo:         &sdk.Implementation{Name: "agentmesh", Version: "1"},
		AuthMethods:       []sdk.AuthMethod{}}, nil
}

func (a *acpAgent) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, nil
}

func (a *acpAgent) session(id sdk.SessionId) (*acpSession, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[id]; s != nil {
		return s, nil
	}
	return nil, sdk.NewInvalidParams(map[string]any{"error": fmt.Sprintf("no session %q on this connection (session/new or session/load it first)", id)})
}

// NewSession opens a conversation. The editor's cwd and MCP servers stay
// on the editor's machine: the run's workspace is the runner's, its MCP
// servers the profile's (--mcp).
func (a *acpAgent) NewSession(context.Context, sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	id := sdk.SessionId(client.NewRunID())
	a.mu.Lock()
	a.sessions[id] = &acpSession{id: id}
	a.mu.Unlock()
	return sdk.NewSessionResponse{SessionId: id}, nil
}

// LoadSession reopens an earlier session's conversation. It first
// replays the conversation to the editor, as the ACP spec asks, before it
// answers: each run's first prompt and each later turn's (input chunks)
// as user_message_chunk, then what the agent said, thought and did
// (acpUpdate), in order, from the run events the mesh keeps
// (client.History). Its next prompt runs on the conversation, whose
// checkpoint names the agent's own session, so the runner's agent loads
// it (session/load) and the conversation goes on. A conversation the
// mesh has no log of (new to it, aged out, another tenant's) replays
// nothing.
func (a *acpAgent) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	if err := subject.ValidToken("sessionId", string(p.SessionId)); err != nil {
		return sdk.LoadSessionResponse{}, sdk.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	a.mu.Lock()
	s := a.sessions[p.SessionId]
	if s == nil {
		s = &acpSession{id: p.SessionId}
		a.sessions[p.SessionId] = s
	}
	a.mu.Unlock()
	h, err := a.c.History(ctx, a.tenant, string(p.SessionId))
	switch {
	case errors.Is(err, client.ErrNotFound):
		return sdk.LoadSessionResponse{}, nil
	case err != nil:
		return sdk.LoadSessionResponse{}, rpcError(err)
	}
	for _, u := range replay(h) {
		a.update(ctx, s, u)
	}
	return sdk.LoadSessionResponse{}, nil
}

// replay is a conversation's history as the session/update notifications
// that tell it to an editor, in order.
func replay(h client.History) []sdk.SessionUpdate {
	var out []sdk.SessionUpdate
	for _, r := range h.Runs {
		if r.Prompt != "" {
			out = append(out, sdk.UpdateUserMessageText(r.Prompt))
		}
		for i := range r.Chunks {
			c := &r.Chunks[i]
			switch c.Type {
			case wire.ChunkInput:
				if c.Content != "" {
					out = append(out, sdk.UpdateUserMessageText(c.Content))
				}
			case wire.ChunkError:
				out = append(out, acpErrorText(c))
			default:
				if u, ok := acpUpdate(c); ok {
					out = append(out, u)
				}
			}
		}
	}
	return out
}

// acpErrorText is an error chunk as the editor reads it: a line of the
// agent's message.
func acpErrorText(c *wire.Chunk) sdk.SessionUpdate {
	return sdk.UpdateAgentMessageText("\n[error " + string(c.Metadata.ErrorClass) + "] " + c.Content)
}

// Prompt is one turn: a follow-up of the session's live run, or the first
// turn of a new run on its conversation when none is live (the first
// prompt, after the idle end, or after its runner was lost: SessionLost).
func (a *acpAgent) Prompt(ctx context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	s, err := a.session(p.SessionId)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	var text []string
	for _, b := range p.Prompt {
		switch {
		case b.Text != nil:
			text = append(text, b.Text.Text)
		case b.ResourceLink != nil:
			text = append(text, b.ResourceLink.Uri)
		}
	}
	prompt := strings.Join(text, "\n")
	if strings.TrimSpace(prompt) == "" {
		return sdk.PromptResponse{}, sdk.NewInvalidParams(map[string]any{"error": "the prompt has no text"})
	}
	s.mu.Lock()
	if s.busy {
		s.mu.Unlock()
		return sdk.PromptResponse{}, sdk.NewInvalidRequest(map[string]any{"error": "a prompt of this session is in progress"})
	}
	s.busy = true
	run := s.run
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.busy = false; s.mu.Unlock() }()

	turn := 0
	if run != nil {
		rep, err := a.c.Send(ctx, a.tenant, run.id, prompt)
		switch {
		case err == nil:
			turn = rep.Turn
		case errors.Is(err, wire.SessionEnded), errors.Is(err, wire.SessionLost):
			a.log.Info("the session's run is gone; the prompt starts a run on its conversation", "run_id", run.id, "err", err)
			run = nil
		default:
			return sdk.PromptResponse{}, rpcError(err)
		}
	}
	if run == nil {
		if run, err = a.start(s, prompt); err != nil {
			return sdk.PromptResponse{}, rpcError(err)
		}
		turn = 1
	}
	for {
		select {
		case end := <-run.ends:
			switch {
			case end.turn == turn:
				return sdk.PromptResponse{StopReason: end.stop, Usage: acpUsage(end.usage)}, nil
			case end.turn == 0 && end.err != nil:
				return sdk.PromptResponse{}, rpcError(end.err)
			case end.turn == 0:
				return sdk.PromptResponse{StopReason: end.stop}, nil
			}
		case <-ctx.Done():
			// session/cancel (Cancel interrupts the turn): answer once the
			// turn has stopped, within a bound.
			t := time.NewTimer(interruptGrace)
			defer t.Stop()
			for {
				select {
				case end := <-run.ends:
					if end.turn == turn || end.turn == 0 {
						return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
					}
				case <-t.C:
					return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
				}
			}
		}
	}
}

// start submits the session's next run, on its conversation, and follows
// it.
func (a *acpAgent) start(s *acpSession, prompt string) (*acpRun, error) {
	req := map[string]any{"prompt": prompt}
	if len(a.mcp) > 0 {
		req["mcp_servers"] = a.mcp
	}
	b, err := msgpack.Marshal(req)
	if err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(a.ctx)
	id, events, err := a.c.Start(rctx, wire.RunRequest{RunID: client.NewRunID(), Tenant: a.tenant, Principal: a.principal,
		Profile: a.profile, Request: b, Conversation: string(s.id)})
	if err != nil {
		stop()
		return nil, err
	}
	run := &acpRun{id: id, ends: make(chan turnEnd, 64)}
	s.mu.Lock()
	s.run = run
	s.mu.Unlock()
	a.wg.Go(func() {
		defer stop()
		a.follow(rctx, s, run, events)
	})
	return run, nil
}

// follow relays a run's events to the editor as session/update
// notifications and its permission requests as session/request_permission,
// and hands each turn's end, then the run's, to the prompt waiting.
func (a *acpAgent) follow(ctx context.Context, s *acpSession, run *acpRun, events func(func(wire.Event, error) bool)) {
	ended := func(e turnEnd) {
		s.mu.Lock()
		if s.run == run {
			s.run = nil
		}
		s.mu.Unlock()
		run.ends <- e
	}
	for ev, err := range events {
		if err != nil {
			ended(turnEnd{err: err})
			return
		}
		if ev.Kind == wire.KindStatus {
			if st := ev.Status; st.State.Terminal() {
				e := turnEnd{stop: sdk.StopReasonEndTurn}
				switch {
				case st.State == wire.StateCancelled:
					e.stop = sdk.StopReasonCancelled
				case st.State != wire.StateSucceeded && st.Error != nil:
					e.err = st.Error
				case st.State != wire.StateSucceeded:
					e.err = fmt.Errorf("run %s %s", run.id, st.State)
				}
				ended(e)
				return
			}
			continue
		}
		c := ev.Chunk
		switch c.Type {
		case wire.ChunkTurnEnd:
			n := 0
			if c.Metadata.NumTurns != nil {
				n = *c.Metadata.NumTurns
			}
			run.ends <- turnEnd{turn: n, stop: sdk.StopReason(c.Metadata.StopReason), usage: c.Metadata.Usage}
		case wire.ChunkPermissionRequested:
			req := *c
			a.wg.Go(func() { a.askEditor(ctx, s, run, req) })
		case wire.ChunkError:
			a.update(ctx, s, acpErrorText(c))
		default:
			if u, ok := acpUpdate(c); ok {
				a.update(ctx, s, u)
			}
		}
	}
}

func (a *acpAgent) update(ctx context.Context, s *acpSession, u sdk.SessionUpdate) {
	if err := a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: s.id, Update: u}); err != nil && ctx.Err() == nil {
		a.log.Warn("session/update", "err", err)
	}
}

// acpUpdate is the session/update a chunk is to the editor; false for
// chunks the editor has no place for (system, input: its own prompt,
// result, permission_resolved).
func acpUpdate(c *wire.Chunk) (sdk.SessionUpdate, bool) {
	switch c.Type {
	case wire.ChunkText:
		return sdk.UpdateAgentMessageText(c.Content), c.Content != ""
	case wire.ChunkThinking:
		return sdk.UpdateAgentThoughtText(c.Content), c.Content != ""
	case wire.ChunkToolUse:
		kind, _ := c.ToolInput["kind"].(string)
		opts := []sdk.ToolCallStartOpt{sdk.WithStartStatus(sdk.ToolCallStatusPending), sdk.WithStartRawInput(c.ToolInput)}
		if kind != "" {
			opts = append(opts, sdk.WithStartKind(sdk.ToolKind(kind)))
		}
		return sdk.StartToolCall(sdk.ToolCallId(c.ToolID), c.ToolName, opts...), c.ToolID != ""
	case wire.ChunkToolResult:
		status := sdk.ToolCallStatusCompleted
		if c.IsError {
			status = sdk.ToolCallStatusFailed
		}
		out := fmt.Sprint(c.ToolOutput)
		if s, ok := c.ToolOutput.(string); ok {
			out = s
		}
		return sdk.UpdateToolCall(sdk.ToolCallId(c.ToolID), sdk.WithUpdateStatus(status),
			sdk.WithUpdateContent([]sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(out))})), c.ToolID != ""
	case wire.ChunkPlan:
		entries, _ := c.ToolOutput.([]any)
		var plan []sdk.PlanEntry
		for _, e := range entries {
			m, _ := e.(map[string]any)
			content, _ := m["content"].(string)
			prio, _ := m["priority"].(string)
			status, _ := m["status"].(string)
			plan = append(plan, sdk.PlanEntry{Content: content, Priority: sdk.PlanEntryPriority(prio), Status: sdk.PlanEntryStatus(status)})
		}
		return sdk.UpdatePlan(plan...), true
	}
	return sdk.SessionUpdate{}, false
}

// askEditor round-trips a permission request: the editor's choice is the
// session's answer; its cancelling the request denies it.
func (a *acpAgent) askEditor(ctx context.Context, s *acpSession, run *acpRun, c wire.Chunk) {
	var options []sdk.PermissionOption
	kinds := map[string]string{}
	raw, _ := c.ToolInput["options"].([]any)
	for _, o := range raw {
		m, _ := o.(map[string]any)
		id, _ := m["option_id"].(string)
		name, _ := m["name"].(string)
		kind, _ := m["kind"].(string)
		options = append(options, sdk.PermissionOption{OptionId: sdk.PermissionOptionId(id), Name: name, Kind: sdk.PermissionOptionKind(kind)})
		kinds[id] = kind
	}
	title := c.ToolName
	call := sdk.ToolCallUpdate{ToolCallId: sdk.ToolCallId(fmt.Sprint(c.ToolInput["tool_call_id"])), Title: &title}
	if k, _ := c.ToolInput["kind"].(string); k != "" {
		kind := sdk.ToolKind(k)
		call.Kind = &kind
	}
	resp, err := a.conn.RequestPermission(ctx, sdk.RequestPermissionRequest{SessionId: s.id, ToolCall: call, Options: options})
	allow, option := false, ""
	if err == nil && resp.Outcome.Selected != nil {
		option = string(resp.Outcome.Selected.OptionId)
		allow = strings.HasPrefix(kinds[option], "allow")
	}
	if err != nil && ctx.Err() != nil {
		return
	}
	actx, stop := context.WithTimeout(ctx, requestTimeout)
	defer stop()
	if _, err := a.c.Answer(actx, a.tenant, run.id, c.ToolID, allow, option); err != nil {
		a.log.Warn("answer the permission request", "run_id", run.id, "request", c.ToolID, "err", err)
	}
}

// Cancel interrupts the session's turn in progress.
func (a *acpAgent) Cancel(ctx context.Context, p sdk.CancelNotification) error {
	s, err := a.session(p.SessionId)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	run := s.run
	s.mu.Unlock()
	if run != nil {
		if _, err := a.c.Interrupt(ctx, a.tenant, run.id); err != nil {
			a.log.Warn("interrupt the turn", "run_id", run.id, "err", err)
		}
	}
	return nil
}

func (a *acpAgent) CloseSession(ctx context.Context, p sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	s, err := a.session(p.SessionId)
	if err != nil {
		return sdk.CloseSessionResponse{}, err
	}
	s.mu.Lock()
	run := s.run
	s.mu.Unlock()
	if run != nil {
		_, _ = a.c.Cancel(ctx, a.tenant, run.id)
	}
	a.mu.Lock()
	delete(a.sessions, p.SessionId)
	a.mu.Unlock()
	return sdk.CloseSessionResponse{}, nil
}

func (a *acpAgent) ListSessions(context.Context, sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	return sdk.ListSessionsResponse{}, sdk.NewMethodNotFound("session/list")
}

func (a *acpAgent) ResumeSession(context.Context, sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	return sdk.ResumeSessionResponse{}, sdk.NewMethodNotFound("session/resume")
}

func (a *acpAgent) SetSessionConfigOption(context.Context, sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	return sdk.SetSessionConfigOptionResponse{}, sdk.NewMethodNotFound("session/set_config_option")
}

func (a *acpAgent) SetSessionMode(context.Context, sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	return sdk.SetSessionModeResponse{}, sdk.NewMethodNotFound("session/set_mode")
}

// rpcError is a mesh error as the editor gets it: a JSON-RPC internal
// error carrying the class and message.
func rpcError(err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return sdk.NewInternalError(map[string]any{"class": string(we.Class), "message": we.Message})
	}
	return sdk.NewInternalError(map[string]any{"message": err.Error()})
}

func acpUsage(u *wire.Usage) *sdk.Usage {
	if u == nil {
		return nil
	}
	return &sdk.Usage{InputTokens: int(u.InputTokens), OutputTokens: int(u.OutputTokens), TotalTokens: int(u.InputTokens + u.OutputTokens)}
}
