// Package acp is the adapter family of agents that speak the Agent Client
// Protocol (JSON-RPC 2.0 over stdio): Claude Code through
// @zed-industries/claude-agent-acp, Codex through @zed-industries/codex-acp,
// Gemini CLI with --acp, each a profile of adapter acp. It
// runs the agent on the shared subprocess transport (pkg/adapter/cli/proc:
// process group, sandbox, teardown), speaks ACP to it as the client
// through github.com/coder/acp-go-sdk, and maps its session/update
// notifications onto the chunk contract (docs/contract.md §1.1, §6.1).
//
// A run of a submitter that reads contract v3 is a session (Call.Session):
// after each turn it yields a turn_end chunk and waits for the next
// follow-up prompt, up to the profile's idle timeout, or its suspend grace
// when a later run can load the session (the agent declares loadSession
// and the run is on a conversation): the run then ends and frees its
// slot, and the next run on the conversation loads it; the agent's
// session/request_permission becomes a permission_requested chunk a client
// answers. Without a session the run is one turn, and a permission
// request the policy would ask about is denied.
package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/codex"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/workspace"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Name is the adapter's name.
const Name = "acp"

// handshakeTimeout bounds initialize, session/new and session/load (an
// agent that starts but never answers).
const handshakeTimeout = 60 * time.Second

// The permission policies (profile session.permission_policy).
const (
	PolicyAsk           = profile.PermissionAsk
	PolicyAllowReadOnly = profile.PermissionAllowReadOnly
	PolicyDeny          = profile.PermissionDeny
)

// readOnlyKinds are the ACP tool kinds allow_read_only allows.
var readOnlyKinds = map[sdk.ToolKind]bool{"read": true, "search": true, "fetch": true, "think": true}

// Config is the operator's side of one ACP agent: its process (binary,
// environment, workspace root, grace, sandbox: cli.Config), its argv, and
// its sessions' settings.
type Config struct {
	cli.Config
	// Args follow the binary.
	Args []string
	// Policy is ask, allow_read_only or deny (default ask).
	Policy string
	// PermissionTimeout: an asked request unanswered this long is denied.
	PermissionTimeout time.Duration
	// IdleTimeout ends a session that waited this long for a prompt.
	IdleTimeout time.Duration
	// SuspendAfter suspends a session that can be (its agent loads
	// sessions and it is on a conversation) once it waited this long for
	// a prompt, when shorter than IdleTimeout: its run ends, its agent
	// with it, and the next run on its conversation loads it.
	SuspendAfter time.Duration
	// SuspendedTimeout: a run on a conversation whose agent session was
	// last active longer ago than this does not load it (SessionEnded).
	SuspendedTimeout time.Duration
	// MCPServers is the allowlist a request names its servers from.
	MCPServers map[string]sdk.McpServer
}

// Request is the typed request of adapter acp.
type Request struct {
	// Prompt is the first turn's prompt.
	Prompt string
	// MCPServers names the session's MCP servers from the profile's
	// allowlist.
	MCPServers []string
}

// Adapter is one ACP agent. It is safe for concurrent use.
type Adapter struct{ cfg Config }

// New checks cfg and returns the adapter.
func New(cfg Config) (*Adapter, error) {
	switch cfg.Policy {
	case "":
		cfg.Policy = PolicyAsk
	case PolicyAsk, PolicyAllowReadOnly, PolicyDeny:
	default:
		return nil, fmt.Errorf("acp: permission policy %q is not ask, allow_read_only or deny", cfg.Policy)
	}
	if cfg.PermissionTimeout <= 0 {
		cfg.PermissionTimeout = profile.DefaultPermissionTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = profile.DefaultIdleTimeout
	}
	if cfg.SuspendAfter <= 0 {
		cfg.SuspendAfter = profile.DefaultSuspendAfter
	}
	if cfg.SuspendedTimeout <= 0 {
		cfg.SuspendedTimeout = profile.DefaultSuspendedTimeout
	}
	if cfg.Binary == "" {
		return nil, errors.New("acp: an agent binary is required")
	}
	if cfg.WorkspaceRoot == "" {
		cfg.WorkspaceRoot = "."
	}
	cfg.Args = slices.Clone(cfg.Args)
	cfg.MCPServers = maps.Clone(cfg.MCPServers)
	return &Adapter{cfg: cfg}, nil
}

func (a *Adapter) Name() string { return Name }

// Capabilities: a subprocess agent with tool events and usage; not
// resumable by a request field (a session resumes through session/load).
func (a *Adapter) Capabilities() wire.Capabilities {
	return wire.Capabilities{Transport: wire.TransportSubprocess, EmitsToolEvents: true, ReportsUsage: true}
}

func (a *Adapter) RuntimeKeys() []string { return []string{cli.RuntimeWorkspace} }

// Interactive: its runs can be sessions (adapter.Interactive).
func (a *Adapter) Interactive() bool { return true }

// TokenClasses are the classes ACP's usage carries.
func (a *Adapter) TokenClasses() []string {
	return []string{"input", "output", "cache_read", "cache_write", "reasoning"}
}

// TeardownBound is the subprocess transport's (proc.MaxTeardown).
func (a *Adapter) TeardownBound() time.Duration { return proc.MaxTeardown(a.cfg.Grace) }

// request is Request as it is decoded: mcp_servers entries are checked to
// be names before they are taken.
type request struct {
	Prompt     string `msgpack:"prompt"`
	MCPServers []any  `msgpack:"mcp_servers,omitempty"`
}

// Validate decodes the request strictly: a non-empty prompt, and MCP
// servers named from the profile's allowlist, never defined in the
// request.
func (a *Adapter) Validate(b []byte) (any, error) {
	var r request
	if err := wire.DecodeStrict(b, &r); err != nil {
		return nil, wire.Errorf(wire.AgenticRequestValidationError, "acp request: %v", err)
	}
	if strings.TrimSpace(r.Prompt) == "" {
		return nil, wire.Errorf(wire.AgenticRequestValidationError, "acp request: field \"prompt\" is required")
	}
	req := &Request{Prompt: r.Prompt}
	seen := map[string]bool{}
	for i, v := range r.MCPServers {
		name, ok := v.(string)
		if !ok {
			return nil, wire.Errorf(wire.AgenticRequestValidationError, "acp request: field \"mcp_servers[%d]\": an MCP server is named from the profile's allowlist (session.mcp_servers); a request cannot define one (command, url or args), got %T", i, v)
		}
		if _, ok := a.cfg.MCPServers[name]; !ok {
			return nil, wire.Errorf(wire.AgenticRequestValidationError, "acp request: field \"mcp_servers[%d]\": %.64q is not in the profile's MCP allowlist (allowed: %s)", i, name, a.allowed())
		}
		if seen[name] {
			return nil, wire.Errorf(wire.AgenticRequestValidationError, "acp request: field \"mcp_servers[%d]\": %.64q is named twice", i, name)
		}
		seen[name] = true
		req.MCPServers = append(req.MCPServers, name)
	}
	return req, nil
}

func (a *Adapter) allowed() string {
	if len(a.cfg.MCPServers) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(a.cfg.MCPServers)), ", ")
}

// Stream runs the agent for one attempt: one turn, or a session's turns.
func (a *Adapter) Stream(ctx context.Context, call adapter.Call) iter.Seq2[wire.Chunk, error] {
	return func(yield func(wire.Chunk, error) bool) {
		g := adapter.NewGuard(yield)
		req, ok := call.Request.(*Request)
		if !ok {
			g.Fail(wire.Errorf(wire.AgenticRequestValidationError, "acp: request is %T, not a validated request", call.Request))
			return
		}
		rel, _ := call.Runtime[cli.RuntimeWorkspace].(string)
		if v, present := call.Runtime[cli.RuntimeWorkspace]; present && rel == "" && v != nil {
			g.Fail(wire.Errorf(wire.AgenticRequestValidationError, "runtime %s must be a string, got %T", cli.RuntimeWorkspace, v))
			return
		}
		dir, err := workspace.Resolve(a.cfg.WorkspaceRoot, rel)
		if err != nil {
			g.Fail(err)
			return
		}
		r, err := a.start(ctx, dir)
		if err != nil {
			g.Fail(err)
			return
		}
		defer r.stop()
		r.run(g, req, call, dir)
	}
}

var quiet = slog.New(slog.DiscardHandler)

// item is what the connection's handlers hand the stream: chunks, in
// order.
type item []wire.Chunk

// agentRun is one attempt's agent process and connection.
type agentRun struct {
	a       *Adapter
	ctx     context.Context
	cancel  context.CancelCauseFunc
	conn    *sdk.ClientSideConnection
	stdin   *os.File
	exited  chan struct{} // closed when the process has been torn down
	procErr error         // the transport's error, once exited is closed
	items   chan item

	sid     sdk.SessionId // set by run (setSID) under mu; read under mu by the handlers
	session *adapter.Session

	mu       sync.Mutex
	tools    Calls // the turns' tool calls as mapped (Map)
	loading  bool  // session/load replays history: not new content
	asked    int
	cancelAt chan struct{} // closed when the turn in progress is interrupted
}

// start launches the agent and connects to it.
func (a *Adapter) start(parent context.Context, dir string) (*agentRun, error) {
	if isCodexACP(a.cfg.Config) {
		// Confined, it cannot read a login the sandbox masks.
		if err := codex.HiddenLogin(a.cfg.Config, false); err != nil {
			return nil, err
		}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, wire.Errorf(wire.ProviderTransportError, "acp: stdin pipe: %v", err)
	}
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancelCause(parent)
	r := &agentRun{a: a, ctx: ctx, cancel: cancel, stdin: inW, exited: make(chan struct{}), items: make(chan item), tools: Calls{}}
	var once sync.Once
	closeIn := func() { once.Do(func() { _ = inR.Close() }) }
	args := a.cfg.Args
	if a.cfg.Confine != nil {
		args = append(confinedArgs(a.cfg.Config, args), args...)
	}
	ps := proc.Spec{
		Binary: a.cfg.Binary, InstallHint: a.cfg.InstallHint, Args: args, Dir: dir,
		Env: proc.AllowEnv(a.cfg.EnvAllow, a.cfg.EnvSet), Stdin: inR, Grace: a.cfg.Grace,
		StateDir: a.cfg.StateDir, Confine: a.cfg.Confine,
		OnStart: func(int) { closeIn() },
	}
	go func() {
		defer close(r.exited)
		defer closeIn()
		var line []byte
		for b, err := range proc.StreamRaw(ctx, ps) {
			if err != nil {
				r.procErr = err
				break
			}
			line = append(append(line[:0], b...), '\n')
			if _, err := outW.Write(line); err != nil {
				break
			}
		}
		_ = outW.CloseWithError(io.EOF)
	}()
	r.conn = sdk.NewClientSideConnection(client{r: r}, inW, outR)
	r.conn.SetLogger(quiet) // a closed connection is the run's end, not news
	return r, nil
}

// stop tears the agent down and waits until it is gone.
func (r *agentRun) stop() {
	r.cancel(errors.New("acp: stream ended"))
	_ = r.stdin.Close()
	<-r.exited
	<-r.conn.Done()
}

// fail is the error a broken connection means: the transport's own when
// the process ended (exit status, stderr tail), else a protocol error.
func (r *agentRun) fail(what string, err error) error {
	select {
	case <-r.conn.Done():
		// The agent's stdout ended: the transport's outcome (exit status,
		// stderr tail) follows as soon as proc has it.
		<-r.exited
	default:
	}
	select {
	case <-r.exited:
		if r.procErr != nil {
			return r.procErr
		}
		if r.ctx.Err() != nil {
			return context.Cause(r.ctx)
		}
		return wire.Errorf(wire.ProviderProcessError, "acp: agent %s exited during %s", r.a.cfg.Binary, what)
	default:
	}
	if r.ctx.Err() != nil {
		return context.Cause(r.ctx)
	}
	var re *sdk.RequestError
	if errors.As(err, &re) && re.Code == -32000 {
		return wire.Errorf(wire.ProviderAuthError, "acp: %s: the agent needs authentication: %s", what, re.Message)
	}
	return wire.Errorf(wire.ProviderProtocolError, "acp: %s: %v", what, err)
}

// call runs one request of the connection, watching the process: a
// request the agent never answers ends when it exits or ctx ends.
func call[T any](r *agentRun, what string, timeout time.Duration, f func(context.Context) (T, error)) (T, error) {
	ctx := r.ctx
	if timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, timeout)
		defer stop()
	}
	v, err := f(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && r.ctx.Err() == nil {
			return v, wire.Errorf(wire.ProviderStallError, "acp: the agent did not answer %s within %s", what, timeout)
		}
		return v, r.fail(what, err)
	}
	return v, nil
}

// run drives the session: handshake, then turns.
func (r *agentRun) run(g *adapter.Guard, req *Request, c adapter.Call, dir string) {
	r.session = c.Session
	init, err := call(r, "initialize", handshakeTimeout, func(ctx context.Context) (sdk.InitializeResponse, error) {
		return r.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber,
			ClientInfo: &sdk.Implementation{Name: "agentmesh", Version: "1"}})
	})
	if err != nil {
		g.Fail(err)
		return
	}
	servers := make([]sdk.McpServer, 0, len(req.MCPServers))
	for _, n := range req.MCPServers {
		servers = append(servers, r.a.cfg.MCPServers[n])
	}
	if len(c.Checkpoint) > 0 {
		// A session's next run on its conversation: load the agent's own
		// session when it can, else refuse rather than start afresh.
		if !init.AgentCapabilities.LoadSession {
			g.Fail(wire.Errorf(wire.SessionLost, "acp: agent %s cannot load session %s (no loadSession capability); it is not started afresh", r.a.cfg.Binary, c.Checkpoint))
			return
		}
		if idle := time.Since(c.CheckpointAt); !c.CheckpointAt.IsZero() && idle > r.a.cfg.SuspendedTimeout {
			g.Fail(wire.Errorf(wire.SessionEnded, "acp: session %s was last active %s ago, longer than its profile's session.suspended_timeout (%s); it is not loaded, and not started afresh: start a new conversation", c.Checkpoint, idle.Round(time.Second), r.a.cfg.SuspendedTimeout))
			return
		}
		r.setSID(sdk.SessionId(c.Checkpoint))
		r.setLoading(true)
		_, err = call(r, "session/load", handshakeTimeout, func(ctx context.Context) (sdk.LoadSessionResponse, error) {
			return r.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: r.sid, Cwd: dir, McpServers: servers})
		})
		r.setLoading(false)
		if err != nil {
			g.Fail(wire.Errorf(wire.SessionLost, "acp: session/load of %s: %v", r.sid, err))
			return
		}
	} else {
		ns, err := call(r, "session/new", handshakeTimeout, func(ctx context.Context) (sdk.NewSessionResponse, error) {
			return r.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: dir, McpServers: servers})
		})
		if err != nil {
			g.Fail(err)
			return
		}
		r.setSID(ns.SessionId)
	}
	if c.SaveCheckpoint != nil {
		c.SaveCheckpoint([]byte(r.sid))
	}
	sys := wire.Chunk{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: Name, Model: c.Model, ProviderSessionID: string(r.sid)}}
	if !g.Emit(sys) {
		return
	}
	// A session suspends rather than hold its slot while it waits, when
	// a later run can load it: its agent can, and its id is kept on a
	// conversation.
	wait, idleEnd := r.a.cfg.IdleTimeout, "ended"
	if init.AgentCapabilities.LoadSession && c.SaveCheckpoint != nil && r.a.cfg.SuspendAfter < wait {
		wait, idleEnd = r.a.cfg.SuspendAfter, "was suspended: the next run on its conversation loads it (session/load) on any runner"
	}
	var total wire.Usage
	prompt, turn, stopReason := req.Prompt, 1, ""
	for {
		resp, ok := r.turn(g, prompt)
		if !ok {
			return
		}
		stopReason = string(resp.StopReason)
		u := usage(resp.Usage)
		add(&total, u)
		if r.session == nil {
			break
		}
		n := turn
		end := wire.Chunk{Type: wire.ChunkTurnEnd, Metadata: wire.Metadata{NumTurns: &n, StopReason: stopReason}}
		if u != (wire.Usage{}) {
			end.Metadata.Usage = &u
		}
		if !g.Emit(end) {
			return
		}
		if c.SaveCheckpoint != nil {
			// Stored again: the checkpoint's time is the session's last
			// activity (session.suspended_timeout).
			c.SaveCheckpoint([]byte(r.sid))
		}
		next, t, ok := r.session.Next(r.ctx, wait, idleEnd)
		if !ok {
			if r.ctx.Err() != nil {
				g.Fail(context.Cause(r.ctx))
				return
			}
			break // idle: the session ends (or suspends) as a success
		}
		if !g.Emit(wire.Chunk{Type: wire.ChunkInput, Content: next, Metadata: wire.Metadata{NumTurns: &t}}) {
			return
		}
		prompt, turn = next, t
	}
	res := wire.Chunk{Type: wire.ChunkResult, Metadata: wire.Metadata{StopReason: stopReason}}
	turns := turn
	res.Metadata.NumTurns = &turns
	if total != (wire.Usage{}) {
		res.Metadata.Usage = &total
	}
	g.Emit(res)
}

type promptResult struct {
	resp sdk.PromptResponse
	err  error
}

// turn sends one prompt and yields what the agent reports until it
// answers. ok is false when the stream has ended (failed or stopped).
func (r *agentRun) turn(g *adapter.Guard, prompt string) (sdk.PromptResponse, bool) {
	done := make(chan promptResult, 1)
	interrupted := make(chan struct{})
	r.mu.Lock()
	r.cancelAt = interrupted
	r.mu.Unlock()
	go func() {
		resp, err := r.conn.Prompt(r.ctx, sdk.PromptRequest{SessionId: r.sid, Prompt: []sdk.ContentBlock{sdk.TextBlock(prompt)}})
		done <- promptResult{resp, err}
	}()
	var interrupts <-chan struct{}
	if r.session != nil {
		interrupts = r.session.Interrupts()
	}
	cancelled := false
	for {
		select {
		case it := <-r.items:
			if !g.Emit(it...) {
				r.cancel(errors.New("acp: stream ended"))
				<-done
				return sdk.PromptResponse{}, false
			}
		case <-interrupts:
			if !cancelled {
				cancelled = true
				close(interrupted) // pending permission requests answer cancelled
				_ = r.conn.Cancel(r.ctx, sdk.CancelNotification{SessionId: r.sid})
			}
		case res := <-done:
			var re *sdk.RequestError
			if res.err != nil && errors.As(res.err, &re) && r.ctx.Err() == nil && !r.disconnected() {
				// The agent declared the turn failed (its model API's
				// error): the one error chunk, after the calls it left.
				r.mu.Lock()
				failed := Unresolved(r.tools, "the agent's turn failed before it reported this tool call completed or failed")
				r.mu.Unlock()
				g.Emit(append(failed, wire.Chunk{Type: wire.ChunkError, Content: message(re), IsError: true, Metadata: wire.Metadata{ErrorClass: classify(re)}})...)
				return res.resp, false
			}
			if res.err != nil {
				g.Fail(r.fail("session/prompt", res.err))
				return res.resp, false
			}
			// The agent's updates before its answer have all been
			// handled (the SDK orders a response after them).
			r.mu.Lock()
			failed := Unresolved(r.tools, fmt.Sprintf("the agent ended its turn (%s) without reporting this tool call completed or failed", res.resp.StopReason))
			r.mu.Unlock()
			if !g.Emit(failed...) {
				r.cancel(errors.New("acp: stream ended"))
				return res.resp, false
			}
			return res.resp, true
		}
	}
}

// disconnected reports whether the agent's stdout has ended.
func (r *agentRun) disconnected() bool {
	select {
	case <-r.conn.Done():
		return true
	default:
		return false
	}
}

// message is an agent's error as the error chunk says it: its message and
// the detail it attached, bounded.
func message(re *sdk.RequestError) string {
	m := re.Message
	if d, ok := re.Data.(map[string]any); ok {
		for _, k := range []string{"details", "message", "error"} {
			if v, ok := d[k].(string); ok && v != "" && v != m {
				m += ": " + v
				break
			}
		}
	}
	if len(m) > 1024 {
		m = m[:1024]
	}
	if m == "" {
		m = fmt.Sprintf("the agent failed the turn (JSON-RPC error %d)", re.Code)
	}
	return m
}

// classify types an agent-declared failure: auth_required, a rate limit
// or quota, a context overflow, else ProviderError.
func classify(re *sdk.RequestError) wire.Class {
	m := strings.ToLower(message(re))
	switch {
	case re.Code == -32000 || strings.Contains(m, "authentication") || strings.Contains(m, "401"):
		return wire.ProviderAuthError
	case strings.Contains(m, "429") || strings.Contains(m, "rate limit") || strings.Contains(m, "quota"):
		return wire.ProviderQuotaError
	case strings.Contains(m, "context window") || strings.Contains(m, "context length") || strings.Contains(m, "too long"):
		return wire.ProviderContextError
	}
	return wire.ProviderError
}

// setSID sets the session id, which the connection's notification
// handler reads (SessionUpdate) while run sets it.
func (r *agentRun) setSID(id sdk.SessionId) {
	r.mu.Lock()
	r.sid = id
	r.mu.Unlock()
}

func (r *agentRun) setLoading(v bool) {
	r.mu.Lock()
	r.loading = v
	r.mu.Unlock()
}

// send hands chunks to the stream, in order; false when the stream is
// gone.
func (r *agentRun) send(chunks ...wire.Chunk) bool {
	if len(chunks) == 0 {
		return true
	}
	select {
	case r.items <- chunks:
		return true
	case <-r.ctx.Done():
		return false
	}
}

func usage(u *sdk.Usage) wire.Usage {
	if u == nil {
		return wire.Usage{}
	}
	out := wire.Usage{InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens)}
	if u.CachedReadTokens != nil {
		out.CacheReadTokens = int64(*u.CachedReadTokens)
	}
	if u.CachedWriteTokens != nil {
		out.CacheWriteTokens = int64(*u.CachedWriteTokens)
	}
	if u.ThoughtTokens != nil {
		out.ReasoningTokens = int64(*u.ThoughtTokens)
	}
	return out
}

func add(t *wire.Usage, u wire.Usage) {
	t.InputTokens += u.InputTokens
	t.OutputTokens += u.OutputTokens
	t.CacheReadTokens += u.CacheReadTokens
	t.CacheWriteTokens += u.CacheWriteTokens
	t.ReasoningTokens += u.ReasoningTokens
}
