package codex

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Parser maps one `codex exec --json` run's events to chunks
// (cli.Parser). It is used by one stream only and is not safe for
// concurrent use.
//
// The mapping:
//
//	thread.started                 system: provider, model, session_id (the thread id), capabilities
//	turn.started                   nothing (telemetry)
//	item.completed agent_message   text, is_delta false (Codex prints no deltas)
//	item.completed plan            text, is_delta false
//	item.completed reasoning       thinking
//	item.* command_execution,      tool_use at first sight, with the item id as tool id;
//	  file_change, mcp_tool_call,  tool_result with the same id on item.completed,
//	  web_search, collab_tool_call, is_error when the tool failed
//	  todo_list
//	item.completed error           nothing: a non-fatal warning (an unknown model's metadata)
//	item.updated, item.plan.delta  nothing: the completed item carries the final state
//	turn.completed                 result: usage (this run's, see the package doc), session_id
//	error "Reconnecting..."        a notice (cli.Notice): a retry in progress
//	error (other)                  held; the error chunk if the stream ends without a turn end
//	turn.failed                    the one error chunk, classified; nothing after it
//
// Any other event type, item type, or a malformed known event is a
// ProviderProtocolError; so is request_user_input, which a headless run
// cannot answer.
type Parser struct {
	model    string
	resumeID string
	// baseline is the resumed thread's cumulative usage before this run;
	// nil when unknown.
	baseline *counts

	threadID string
	tools    map[string]toolState // by item id; made at the first tool
	pending  string               // a non-retry error message awaiting the turn's end
	result   bool                 // the result chunk was emitted
	failed   bool                 // the error chunk was emitted
}

type toolState uint8

const (
	toolAnnounced toolState = iota + 1 // tool_use emitted
	toolDone                           // tool_result emitted
)

// NewParser returns a parser for one attempt. model is the model the run
// asked for (put on the system chunk; Codex prints none); resumeID is the
// thread the run resumes, or "". A parser made here has no baseline (the
// adapter's own parsers read it from the thread's rollout), so a resumed
// run's result carries no usage (see the package doc).
func NewParser(model, resumeID string) *Parser {
	return &Parser{model: model, resumeID: resumeID}
}

func protocolf(format string, args ...any) error {
	return wire.Errorf(wire.ProviderProtocolError, "%s: "+format, append([]any{Name}, args...)...)
}

// Event maps one event.
func (p *Parser) Event(ev map[string]any) ([]wire.Chunk, error) {
	if p.failed {
		return nil, nil // nothing after the error chunk
	}
	typ, ok := ev["type"].(string)
	if !ok {
		return nil, protocolf("event without a string type")
	}
	if p.result && typ != "error" {
		return nil, protocolf("%q event after turn.completed", typ)
	}
	switch typ {
	case "thread.started":
		return p.threadStarted(ev)
	case "turn.started", "item.plan.delta":
		return nil, nil
	case "item.started", "item.updated", "item.completed":
		return p.item(typ, ev)
	case "turn.completed":
		return p.turnCompleted(ev)
	case "turn.failed":
		msg := p.pending
		if e, ok := ev["error"].(map[string]any); ok {
			if m, ok := e["message"].(string); ok && m != "" {
				msg = m
			}
		} else if ev["error"] != nil {
			return nil, protocolf("turn.failed: error is not an object")
		}
		if msg == "" {
			msg = "turn failed"
		}
		return p.fail(msg), nil
	case "error":
		msg, ok := ev["message"].(string)
		if !ok {
			return nil, protocolf("error event without a string message")
		}
		return p.warn(msg), nil
	case "request_user_input":
		return nil, protocolf("request_user_input: the CLI asks a question a headless run cannot answer")
	}
	return nil, protocolf("unknown event type %q", typ)
}

// warn holds an error event's message until the turn ends, unless it
// is a retry or comes after the result. A retry ("Reconnecting... 2/5
// (...)", "Reconnecting... waiting for network (...)") is Codex's notice
// that it has not reached its model API: a cli.Notice, classified as its
// text says.
func (p *Parser) warn(msg string) []wire.Chunk {
	if isRetry(msg) {
		if p.result {
			return nil
		}
		return []wire.Chunk{cli.Notice(Name, safeText(msg), classify(msg))}
	}
	if !p.result {
		p.pending = msg
	}
	return nil
}

// End reports an error Codex announced but never closed with turn.failed.
func (p *Parser) End() ([]wire.Chunk, error) {
	if p.failed || p.result || p.pending == "" {
		return nil, nil
	}
	return p.fail(p.pending), nil
}

// isRetry reports a non-terminal "Reconnecting... 2/5 (...)" line.
func isRetry(msg string) bool {
	return strings.HasPrefix(msg, "Reconnecting...") || strings.HasPrefix(msg, "Reconnecting…")
}

func (p *Parser) fail(msg string) []wire.Chunk {
	p.failed = true
	return []wire.Chunk{{
		Type: wire.ChunkError, Content: safeText(msg), IsError: true,
		Metadata: wire.Metadata{Provider: Name, ErrorClass: classify(msg)},
	}}
}

// safeText redacts credentials and bounds the text like a wire error.
func safeText(s string) string {
	s = wire.Redact(strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= wire.MaxErrorText {
		return s
	}
	i := wire.MaxErrorText
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i]
}

func (p *Parser) threadStarted(ev map[string]any) ([]wire.Chunk, error) {
	id, _ := ev["thread_id"].(string)
	return p.thread(id)
}

// thread maps thread.started with thread_id id ("" when it is not a
// string).
func (p *Parser) thread(id string) ([]wire.Chunk, error) {
	if strings.TrimSpace(id) == "" || len(id) > 256 {
		return nil, protocolf("thread.started without a thread_id")
	}
	if !reqfield.IsUUID(id) {
		return nil, protocolf("thread.started with thread_id %q, which is not a thread id (a UUID)", id)
	}
	if p.threadID != "" {
		if id == p.threadID {
			return nil, nil
		}
		return nil, protocolf("a second thread.started with thread %q after %q", id, p.threadID)
	}
	p.threadID = id
	caps := Capabilities
	return []wire.Chunk{{Type: wire.ChunkSystem, Metadata: wire.Metadata{
		Provider: Name, Model: p.model, SessionID: id, Capabilities: &caps,
	}}}, nil
}

func (p *Parser) item(phase string, ev map[string]any) ([]wire.Chunk, error) {
	it, ok := ev["item"].(map[string]any)
	if !ok {
		return nil, protocolf("%s without an item object", phase)
	}
	id, _ := it["id"].(string)
	kind, _ := it["type"].(string)
	if id == "" || kind == "" {
		return nil, protocolf("%s: item without a string id and type", phase)
	}
	switch kind {
	case "agent_message", "plan", "reasoning":
		if phase != "item.completed" {
			return nil, nil // the completed item carries the whole text
		}
		text, ok := it["text"].(string)
		if !ok {
			return nil, protocolf("%s %s: text is not a string", phase, kind)
		}
		return textChunks(kind, text), nil
	case "error":
		return nil, nil
	}
	t, ok := toolKinds[kind]
	if !ok {
		return nil, protocolf("%s: unknown item type %q", phase, kind)
	}
	name, input, err := t.use(it)
	if err != nil {
		return nil, protocolf("%s %s: %v", phase, kind, err)
	}
	return p.tool(phase, id, name, input, func() (any, bool) { return t.result(it) }), nil
}

// textChunks maps a completed agent_message, plan or reasoning item's text.
func textChunks(kind, text string) []wire.Chunk {
	switch {
	case text == "":
		return nil
	case kind == "reasoning":
		return []wire.Chunk{{Type: wire.ChunkThinking, Content: text}}
	}
	return []wire.Chunk{{Type: wire.ChunkText, Content: text}}
}

// tool maps a tool-like item's phase: the tool_use at its first sight,
// the tool_result (result gives its output and whether the tool failed)
// at its completion, nothing after.
func (p *Parser) tool(phase, id, name string, input map[string]any, result func() (any, bool)) []wire.Chunk {
	var out []wire.Chunk
	switch p.tools[id] {
	case toolDone:
		return nil // a repeated completion
	case 0:
		p.setTool(id, toolAnnounced)
		out = append(out, wire.Chunk{Type: wire.ChunkToolUse, ToolName: name, ToolID: id, ToolInput: input})
	}
	if phase == "item.completed" {
		p.setTool(id, toolDone)
		output, failed := result()
		out = append(out, wire.Chunk{Type: wire.ChunkToolResult, ToolName: name, ToolID: id, ToolOutput: output, IsError: failed})
	}
	return out
}

func (p *Parser) setTool(id string, s toolState) {
	if p.tools == nil {
		p.tools = map[string]toolState{}
	}
	p.tools[id] = s
}

// toolKind maps one tool-like item type: its tool name and input, and
// its output and whether the tool failed.
type toolKind struct {
	use    func(it map[string]any) (string, map[string]any, error)
	result func(it map[string]any) (any, bool)
}

var errNoName = errors.New("no tool name")

var toolKinds = map[string]toolKind{
	"command_execution": {
		use: func(it map[string]any) (string, map[string]any, error) {
			cmd, ok := it["command"].(string)
			if !ok {
				return "", nil, errors.New("command is not a string")
			}
			return "command_execution", map[string]any{"command": cmd}, nil
		},
		result: func(it map[string]any) (any, bool) {
			out, _ := it["aggregated_output"].(string)
			code, hasCode := it["exit_code"].(float64)
			status, _ := it["status"].(string)
			return out, commandFailed(status, code, hasCode)
		},
	},
	"file_change": {
		use: func(it map[string]any) (string, map[string]any, error) {
			return "file_change", map[string]any{"changes": it["changes"]}, nil
		},
		result: func(it map[string]any) (any, bool) {
			return it["status"], failedStatus(it, "failed", "declined")
		},
	},
	"mcp_tool_call": {
		use: func(it map[string]any) (string, map[string]any, error) {
			name, _ := it["tool"].(string)
			if name == "" {
				return "", nil, errNoName
			}
			args, ok := it["arguments"].(map[string]any)
			if !ok && it["arguments"] != nil {
				args = map[string]any{"arguments": it["arguments"]}
			}
			return name, args, nil
		},
		result: func(it map[string]any) (any, bool) {
			if e, ok := it["error"].(map[string]any); ok {
				return e["message"], true
			}
			return it["result"], failedStatus(it, "failed")
		},
	},
	"web_search": {
		use: func(it map[string]any) (string, map[string]any, error) {
			return "web_search", map[string]any{"query": it["query"]}, nil
		},
		result: func(it map[string]any) (any, bool) { return it["action"], false },
	},
	"collab_tool_call": {
		use: func(it map[string]any) (string, map[string]any, error) {
			name, _ := it["tool"].(string)
			if name == "" {
				return "", nil, errNoName
			}
			return name, map[string]any{"prompt": it["prompt"], "receiver_thread_ids": it["receiver_thread_ids"]}, nil
		},
		result: func(it map[string]any) (any, bool) { return it["agents_states"], failedStatus(it, "failed") },
	},
	"todo_list": {
		use: func(it map[string]any) (string, map[string]any, error) {
			return "todo_list", map[string]any{"items": it["items"]}, nil
		},
		result: func(it map[string]any) (any, bool) { return it["items"], false },
	},
}

// commandFailed reports whether a command_execution item failed: by its
// status, or by its exit code when it has one.
func commandFailed(status string, code float64, hasCode bool) bool {
	return status == "failed" || status == "declined" || (hasCode && code != 0)
}

func failedStatus(it map[string]any, failed ...string) bool {
	s, _ := it["status"].(string)
	for _, f := range failed {
		if s == f {
			return true
		}
	}
	return false
}

func (p *Parser) turnCompleted(ev map[string]any) ([]wire.Chunk, error) {
	p.result, p.pending = true, ""
	var total *counts
	if raw, present := ev["usage"]; present && raw != nil {
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, protocolf("turn.completed: usage is not an object")
		}
		c, err := countsOf(m)
		if err != nil {
			return nil, protocolf("turn.completed: %v", err)
		}
		total = &c
	}
	return p.completed(total), nil
}

// completed is the result chunk of turn.completed, with its usage total
// when it has one. The caller has set p.result.
func (p *Parser) completed(total *counts) []wire.Chunk {
	md := wire.Metadata{Provider: Name, SessionID: p.threadID}
	if total != nil {
		md.Usage = p.runUsage(*total)
	}
	return []wire.Chunk{{Type: wire.ChunkResult, Metadata: md}}
}

// runUsage is this run's usage from the thread's cumulative total: all of
// it on a new thread; on a resumed one the total less the baseline, or nil
// when the baseline is unknown or does not fit.
func (p *Parser) runUsage(total counts) *wire.Usage {
	if p.resumeID == "" || p.threadID != p.resumeID {
		return total.usage()
	}
	if p.baseline == nil {
		return nil
	}
	d, ok := total.minus(*p.baseline)
	if !ok {
		return nil
	}
	return d.usage()
}

// counts is Codex's usage record (turn.completed.usage and a rollout's
// total_token_usage): input_tokens includes the cached and cache-write
// parts, output_tokens the reasoning part.
type counts struct {
	input, cached, cacheWrite, output, reasoning int64
}

func countsOf(m map[string]any) (counts, error) {
	var c counts
	for _, f := range []struct {
		key string
		dst *int64
	}{
		{"input_tokens", &c.input}, {"cached_input_tokens", &c.cached}, {"cache_write_input_tokens", &c.cacheWrite},
		{"output_tokens", &c.output}, {"reasoning_output_tokens", &c.reasoning},
	} {
		v, present := m[f.key]
		if !present || v == nil {
			continue
		}
		n, ok := v.(float64)
		if !ok || !isCount(n) {
			return counts{}, fmt.Errorf("usage %s is not a token count: %v", f.key, v)
		}
		*f.dst = int64(n)
	}
	return c, nil
}

// isCount reports whether n is a token count: integral, 0 to 1e15.
func isCount(n float64) bool { return n >= 0 && n <= 1e15 && n == math.Trunc(n) }

func (c counts) minus(b counts) (counts, bool) {
	d := counts{c.input - b.input, c.cached - b.cached, c.cacheWrite - b.cacheWrite, c.output - b.output, c.reasoning - b.reasoning}
	return d, d.input >= 0 && d.cached >= 0 && d.cacheWrite >= 0 && d.output >= 0 && d.reasoning >= 0
}

// usage splits the counts into disjoint token classes.
func (c counts) usage() *wire.Usage {
	return &wire.Usage{
		InputTokens:      max(0, c.input-c.cached-c.cacheWrite),
		CacheReadTokens:  c.cached,
		CacheWriteTokens: c.cacheWrite,
		OutputTokens:     max(0, c.output-c.reasoning),
		ReasoningTokens:  c.reasoning,
	}
}
