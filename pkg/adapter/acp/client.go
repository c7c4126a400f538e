package acp

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// client is the mesh's side of the connection: it maps the agent's
// session/update notifications to chunks and decides its permission
// requests. It offers the agent no file system and no terminal (the
// agent uses its own, inside the run's workspace and sandbox).
type client struct {
	NoTools
	r *agentRun
}

// SessionUpdate maps one notification to its chunks (Map) and hands them
// to the stream; during session/load the replayed history is not new
// content and is dropped.
func (c client) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	r := c.r
	r.mu.Lock()
	sid, loading := r.sid, r.loading
	r.mu.Unlock()
	if n.SessionId != sid && sid != "" {
		return nil // another session's (none is ever opened): not this run's
	}
	if loading {
		return nil
	}
	r.mu.Lock()
	chunks, err := Map(n.Update, r.tools, r.session != nil)
	r.mu.Unlock()
	if err != nil {
		r.cancel(err)
		return nil
	}
	r.send(chunks...)
	return nil
}

// Calls are the tool calls of a run's turns as Map has seen them.
type Calls map[sdk.ToolCallId]*Call

// Call is one tool call as its updates have described it so far.
type Call struct {
	// Used and Resolved: its tool_use, its tool_result was mapped.
	Used, Resolved bool
	Title          string
	Kind           sdk.ToolKind
	RawInput       any
	Locations      []sdk.ToolCallLocation
	Content        []sdk.ToolCallContent
}

// described reports whether the call says what it does: an input, a
// location or content of its own. An agent may announce a call empty and
// describe it by its next update (claude-agent-acp announces a shell call
// as "Terminal" with the input {}, then sends the command).
func (c *Call) described() bool {
	if m, ok := c.RawInput.(map[string]any); ok {
		return len(m) > 0 || len(c.Locations) > 0 || contentText(c.Content) != ""
	}
	return c.RawInput != nil || len(c.Locations) > 0 || contentText(c.Content) != ""
}

// use is the call's tool_use chunk, marking it used.
func (c *Call) use(id sdk.ToolCallId) wire.Chunk {
	c.Used = true
	return wire.Chunk{Type: wire.ChunkToolUse, ToolID: string(id), ToolName: toolName(c.Title, string(c.Kind)), ToolInput: input(c)}
}

// Map maps one session/update to chunks: message and thought chunks to
// text and thinking deltas; a tool call to one tool_use, once it says
// what it does (Call.described: its input, locations or content, from
// the call or an update of it) or its status moves, so that the tool_use
// names the command or the path; its completed or failed update to one
// tool_result, after its tool_use (calls records what was mapped;
// Unresolved fails the others at the turn's end); a plan to plan
// (sessions only: v3). Commands, modes, configuration, session info,
// usage updates and the user's own message (replayed history) are
// telemetry and map to nothing. An update of no known kind is a
// ProviderProtocolError.
func Map(u sdk.SessionUpdate, calls Calls, session bool) ([]wire.Chunk, error) {
	switch {
	case u.AgentMessageChunk != nil:
		if t := blockText(u.AgentMessageChunk.Content); t != "" {
			return []wire.Chunk{{Type: wire.ChunkText, Content: t, IsDelta: true}}, nil
		}
	case u.AgentThoughtChunk != nil:
		if t := blockText(u.AgentThoughtChunk.Content); t != "" {
			return []wire.Chunk{{Type: wire.ChunkThinking, Content: t, IsDelta: true}}, nil
		}
	case u.ToolCall != nil:
		tc := u.ToolCall
		c := calls.of(tc.ToolCallId)
		if tc.Title != "" {
			c.Title = tc.Title
		}
		if tc.Kind != "" {
			c.Kind = tc.Kind
		}
		c.merge(tc.RawInput, tc.Locations, tc.Content)
		return calls.progress(tc.ToolCallId, string(tc.Status), tc.Content, tc.RawOutput), nil
	case u.ToolCallUpdate != nil:
		tu := u.ToolCallUpdate
		c := calls.of(tu.ToolCallId)
		if tu.Title != nil && *tu.Title != "" {
			c.Title = *tu.Title
		}
		if tu.Kind != nil && *tu.Kind != "" {
			c.Kind = *tu.Kind
		}
		status := ""
		if tu.Status != nil {
			status = string(*tu.Status)
		}
		if status != "completed" && status != "failed" {
			// The content of a finished call is its output, not what
			// it does.
			c.merge(tu.RawInput, tu.Locations, tu.Content)
		} else {
			c.merge(tu.RawInput, tu.Locations, nil)
		}
		return calls.progress(tu.ToolCallId, status, tu.Content, tu.RawOutput), nil
	case u.Plan != nil:
		if !session {
			return nil, nil
		}
		entries := make([]any, 0, len(u.Plan.Entries))
		for _, e := range u.Plan.Entries {
			entries = append(entries, map[string]any{"content": e.Content, "priority": string(e.Priority), "status": string(e.Status)})
		}
		return []wire.Chunk{{Type: wire.ChunkPlan, ToolOutput: entries}}, nil
	case u.UserMessageChunk != nil, u.AvailableCommandsUpdate != nil, u.CurrentModeUpdate != nil,
		u.ConfigOptionUpdate != nil, u.SessionInfoUpdate != nil, u.UsageUpdate != nil:
	default:
		return nil, wire.Errorf(wire.ProviderProtocolError, "acp: a session/update of no known kind")
	}
	return nil, nil
}

// of is the call id, recorded if new.
func (cs Calls) of(id sdk.ToolCallId) *Call {
	c := cs[id]
	if c == nil {
		c = &Call{}
		cs[id] = c
	}
	return c
}

// merge takes what an update says of the call: a non-empty input, its
// locations, its content.
func (c *Call) merge(raw any, locs []sdk.ToolCallLocation, content []sdk.ToolCallContent) {
	if m, ok := raw.(map[string]any); raw != nil && (!ok || len(m) > 0) {
		c.RawInput = raw
	}
	if len(locs) > 0 {
		c.Locations = locs
	}
	if contentText(content) != "" {
		c.Content = content
	}
}

// progress is what call id's latest update maps to: its tool_use, once
// it is described or its status moved past pending, and then, when its
// status is completed or failed, its one tool_result.
func (cs Calls) progress(id sdk.ToolCallId, status string, content []sdk.ToolCallContent, rawOutput any) []wire.Chunk {
	c := cs[id]
	var out []wire.Chunk
	if !c.Used && (c.described() || (status != "" && status != "pending")) {
		out = append(out, c.use(id))
	}
	if (status != "completed" && status != "failed") || c.Resolved {
		return out
	}
	c.Resolved = true
	var res any = contentText(content)
	if res == "" && rawOutput != nil {
		res = rawOutput
	}
	return append(out, wire.Chunk{Type: wire.ChunkToolResult, ToolID: string(id), ToolOutput: res, IsError: status == "failed"})
}

func toolName(title, kind string) string {
	if title != "" {
		return title
	}
	if kind != "" {
		return kind
	}
	return "tool"
}

// input is a tool call's arguments as a map: the raw input when it is an
// object, else under "input"; its locations' paths under "paths" and,
// with no input, its content's text under "content", when the input has
// no such key; the kind rides along.
func input(c *Call) map[string]any {
	m, ok := c.RawInput.(map[string]any)
	if ok {
		m = maps.Clone(m)
	} else {
		m = map[string]any{}
		if c.RawInput != nil {
			m["input"] = c.RawInput
		}
	}
	set := func(k string, v any) {
		if _, taken := m[k]; !taken {
			m[k] = v
		}
	}
	if len(c.Locations) > 0 {
		paths := make([]any, 0, len(c.Locations))
		for _, l := range c.Locations {
			paths = append(paths, l.Path)
		}
		set("paths", paths)
	}
	if c.RawInput == nil {
		if t := contentText(c.Content); t != "" {
			set("content", t)
		}
	}
	if c.Kind != "" {
		set("kind", string(c.Kind))
	}
	return m
}

// Unresolved ends each tool call of calls (Map) whose result was never
// mapped, in the order of their ids: its tool_use, if it was held, and a
// failed tool_result; it marks them resolved. At the end of a turn, a
// call the agent started but never reported completed or failed did not
// run to an outcome the model got (an agent that could not start its
// shell, a turn cancelled during the call), and the stream says so
// rather than leaving it silent.
func Unresolved(calls Calls, why string) []wire.Chunk {
	var out []wire.Chunk
	for _, id := range slices.Sorted(maps.Keys(calls)) {
		c := calls[id]
		if c.Resolved {
			continue
		}
		if !c.Used {
			out = append(out, c.use(id))
		}
		c.Resolved = true
		out = append(out, wire.Chunk{Type: wire.ChunkToolResult, ToolID: string(id), ToolOutput: why, IsError: true})
	}
	return out
}

func blockText(b sdk.ContentBlock) string {
	switch {
	case b.Text != nil:
		return b.Text.Text
	case b.ResourceLink != nil:
		return b.ResourceLink.Uri
	}
	return ""
}

func contentText(cs []sdk.ToolCallContent) string {
	var parts []string
	for _, c := range cs {
		switch {
		case c.Content != nil:
			if t := blockText(c.Content.Content); t != "" {
				parts = append(parts, t)
			}
		case c.Diff != nil:
			parts = append(parts, "diff "+c.Diff.Path)
		case c.Terminal != nil:
			parts = append(parts, "terminal "+c.Terminal.TerminalId)
		}
	}
	return strings.Join(parts, "\n")
}

// RequestPermission decides one request by the profile's policy: deny,
// or allow_read_only for the tool kinds that only read, at once; ask
// publishes it (permission_requested) and waits for a client's answer up
// to the permission timeout, then denies. A run without a session cannot
// ask: ask denies there. Every decision is published
// (permission_resolved) in a session.
func (c client) RequestPermission(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	r := c.r
	options := make([]adapter.PermissionOption, 0, len(p.Options))
	wireOptions := make([]any, 0, len(p.Options))
	for _, o := range p.Options {
		options = append(options, adapter.PermissionOption{ID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
		wireOptions = append(wireOptions, map[string]any{"option_id": string(o.OptionId), "name": o.Name, "kind": string(o.Kind)})
	}
	kind := ""
	if p.ToolCall.Kind != nil {
		kind = string(*p.ToolCall.Kind)
	}
	r.mu.Lock()
	r.asked++
	id := "perm-" + strconv.Itoa(r.asked)
	interrupted := r.cancelAt
	r.mu.Unlock()
	title := kind
	if p.ToolCall.Title != nil && *p.ToolCall.Title != "" {
		title = *p.ToolCall.Title
	}
	resolved := func(option, outcome, by string, class wire.Class) (sdk.RequestPermissionResponse, error) {
		if r.session != nil {
			ch := wire.Chunk{Type: wire.ChunkPermissionResolved, ToolID: id, Content: option,
				ToolOutput: map[string]any{"outcome": outcome, "by": by}, Metadata: wire.Metadata{ErrorClass: class}}
			r.send(ch)
		}
		if option == "" {
			return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
		}
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(sdk.PermissionOptionId(option))}, nil
	}
	deny := func(by string, class wire.Class) (sdk.RequestPermissionResponse, error) {
		if o := adapter.Choose(options, false); o != "" {
			return resolved(o, "denied", by, class)
		}
		return resolved("", "cancelled", by, class) // no rejecting option: cancelled is the refusal left
	}
	policy := r.a.cfg.Policy
	switch {
	case policy == PolicyDeny:
		return deny("policy", "")
	case policy == PolicyAllowReadOnly && readOnlyKinds[sdk.ToolKind(kind)]:
		if o := adapter.Choose(options, true); o != "" {
			return resolved(o, "allowed", "policy", "")
		}
		return deny("policy", "")
	case policy == PolicyAllowReadOnly, r.session == nil:
		return deny("policy", "")
	}
	answer := r.session.Ask(id, options)
	if !r.send(wire.Chunk{Type: wire.ChunkPermissionRequested, ToolID: id, ToolName: title,
		ToolInput: map[string]any{"tool_call_id": string(p.ToolCall.ToolCallId), "kind": kind, "options": wireOptions}}) {
		r.session.Resolve(id, wire.Errorf(wire.SessionEnded, "permission: the session ended before request %s was answered", id))
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	timer := time.NewTimer(r.a.cfg.PermissionTimeout)
	defer timer.Stop()
	select {
	case o := <-answer:
		allowed := "denied"
		for _, opt := range options {
			if opt.ID == o && opt.Allows() {
				allowed = "allowed"
			}
		}
		return resolved(o, allowed, "client", "")
	case <-timer.C:
		r.session.Resolve(id, wire.Errorf(wire.PermissionTimeout, "permission: request %s was denied: nobody answered within %s", id, r.a.cfg.PermissionTimeout))
		return deny("timeout", wire.PermissionTimeout)
	case <-interrupted:
		r.session.Resolve(id, wire.Errorf(wire.SessionEnded, "permission: request %s was cancelled with its turn", id))
		return resolved("", "cancelled", "client", "")
	case <-ctx.Done():
	case <-r.ctx.Done():
	}
	r.session.Resolve(id, wire.Errorf(wire.SessionEnded, "permission: the session ended before request %s was answered", id))
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
}

// NoTools is the client side's file system and terminal methods for a
// client that offers neither (its initialize request declares neither
// capability): each is method-not-found. Embed it in an sdk.Client.
type NoTools struct{}

func (NoTools) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound("fs/read_text_file")
}

func (NoTools) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound("fs/write_text_file")
}

func (NoTools) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound("terminal/create")
}

func (NoTools) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound("terminal/kill")
}

func (NoTools) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound("terminal/output")
}

func (NoTools) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound("terminal/release")
}

func (NoTools) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound("terminal/wait_for_exit")
}
