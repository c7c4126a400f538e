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

// Map maps one session/update to chunks: message and thought chunks to
// text and thinking deltas, a tool call to tool_use, its completed or
// failed update to one tool_result (seen records the calls mapped: false
// once its tool_use was, true once its result was; Unresolved fails the
// others at the turn's end), a plan to plan (sessions only: v3). Commands, modes,
// configuration, session info, usage updates and the user's own message
// (replayed history) are telemetry and map to nothing. An update of no
// known kind is a ProviderProtocolError.
func Map(u sdk.SessionUpdate, seen map[sdk.ToolCallId]bool, session bool) ([]wire.Chunk, error) {
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
		if _, ok := seen[tc.ToolCallId]; !ok {
			seen[tc.ToolCallId] = false
		}
		out := []wire.Chunk{{Type: wire.ChunkToolUse, ToolID: string(tc.ToolCallId), ToolName: toolName(tc.Title, string(tc.Kind)), ToolInput: input(tc.RawInput, tc.Kind)}}
		if res, ok := result(tc.ToolCallId, string(tc.Status), tc.Content, tc.RawOutput, seen); ok {
			out = append(out, res)
		}
		return out, nil
	case u.ToolCallUpdate != nil:
		tu := u.ToolCallUpdate
		status := ""
		if tu.Status != nil {
			status = string(*tu.Status)
		}
		if res, ok := result(tu.ToolCallId, status, tu.Content, tu.RawOutput, seen); ok {
			return []wire.Chunk{res}, nil
		}
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
// object, else under "input"; the kind rides along.
func input(raw any, kind sdk.ToolKind) map[string]any {
	m, ok := raw.(map[string]any)
	if !ok {
		m = map[string]any{}
		if raw != nil {
			m["input"] = raw
		}
	}
	if kind != "" {
		if _, taken := m["kind"]; !taken {
			m["kind"] = string(kind)
		}
	}
	return m
}

// result is the tool_result of a call whose status is completed or
// failed, once per call.
func result(id sdk.ToolCallId, status string, content []sdk.ToolCallContent, raw any, seen map[sdk.ToolCallId]bool) (wire.Chunk, bool) {
	if (status != "completed" && status != "failed") || seen[id] {
		return wire.Chunk{}, false
	}
	seen[id] = true
	var out any = contentText(content)
	if out == "" && raw != nil {
		out = raw
	}
	return wire.Chunk{Type: wire.ChunkToolResult, ToolID: string(id), ToolOutput: out, IsError: status == "failed"}, true
}

// Unresolved is a failed tool_result for each tool call in seen (Map)
// whose result was never mapped, in the order of their ids, and marks
// them resolved: at the end of a turn, a call the agent started but never
// reported completed or failed did not run to an outcome the model got
// (an agent that could not start its shell, a turn cancelled during the
// call), and the stream says so rather than leaving it silent.
func Unresolved(seen map[sdk.ToolCallId]bool, why string) []wire.Chunk {
	var out []wire.Chunk
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		if seen[id] {
			continue
		}
		seen[id] = true
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
