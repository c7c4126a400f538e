package ollama

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Parser maps the objects of one /api/chat NDJSON body, in order, to
// chunks (the system chunk is the adapter's, not the parser's), and
// assembles the assistant message the conversation's checkpoint keeps.
// It is not safe for concurrent use.
//
// Each object is one of:
//
//	{"error": "..."}                         a provider-declared failure: one
//	                                         error chunk, and nothing after it
//	{"message": {...}, "done": false, ...}   a delta: thinking, content and
//	                                         complete tool calls
//	{"message": {...}, "done": true,         the end: done_reason and the
//	 "done_reason", "prompt_eval_count",     counters; the result chunk
//	 "eval_count", "total_duration", ...}    follows at End
//
// Top-level fields other than these (model, created_at, the durations,
// remote_model, remote_host, logprobs, ...) are telemetry and dropped. An
// object with neither error, message nor done, a message field outside
// role, content, thinking, tool_calls, images (empty), tool_name and
// tool_call_id (both empty), a role other than assistant, or anything
// after the done object is a ProviderProtocolError: it could carry content
// this parser would otherwise drop.
type Parser struct {
	text, thinking strings.Builder
	calls          []toolCall
	done, failed   bool
	final          map[string]any
}

// NewParser returns a parser for one response body.
func NewParser() *Parser { return &Parser{} }

var messageKeys = []string{"role", "content", "thinking", "tool_calls", "images", "tool_name", "tool_call_id"}

// Line maps one NDJSON object. A non-nil error is a ProviderProtocolError
// and ends the stream; after an error chunk the parser takes nothing more.
func (p *Parser) Line(m map[string]any) ([]wire.Chunk, error) {
	switch {
	case p.failed:
		return nil, protocolErr("an object after the error object")
	case p.done:
		return nil, protocolErr("an object after the final done object")
	}
	if e, ok := m["error"]; ok {
		msg, ok := errorMessage(e)
		if !ok {
			return nil, protocolErr("error field is %s, not a message", ndjson.TypeName(e))
		}
		p.failed = true
		return []wire.Chunk{ErrorChunk(msg)}, nil
	}
	msg, hasMsg := m["message"]
	done, hasDone := m["done"]
	if !hasMsg && !hasDone {
		return nil, protocolErr("an object with neither message, done nor error (keys %s)", keys(m))
	}
	isDone := false
	if hasDone {
		b, ok := done.(bool)
		if !ok {
			return nil, protocolErr("done is %s, not a boolean", ndjson.TypeName(done))
		}
		isDone = b
	}
	var out []wire.Chunk
	if hasMsg && msg != nil {
		mm, ok := msg.(map[string]any)
		if !ok {
			return nil, protocolErr("message is %s, not an object", ndjson.TypeName(msg))
		}
		cs, err := p.message(mm)
		if err != nil {
			return nil, err
		}
		out = cs
	}
	if isDone {
		if err := checkFinal(m); err != nil {
			return nil, err
		}
		p.done, p.final = true, m
	}
	return out, nil
}

func (p *Parser) message(m map[string]any) ([]wire.Chunk, error) {
	for k, v := range m {
		if !slices.Contains(messageKeys, k) {
			return nil, protocolErr("message field %.64q is unknown", k)
		}
		if (k == "tool_name" || k == "tool_call_id") && v != nil && v != "" {
			return nil, protocolErr("message field %s is set in a response", k)
		}
		if k == "images" && v != nil {
			if l, ok := v.([]any); !ok || len(l) > 0 {
				return nil, protocolErr("the response message carries images")
			}
		}
	}
	if r, ok := m["role"]; ok && r != "assistant" {
		return nil, protocolErr("message role is %v, not assistant", r)
	}
	thinking, err := optString(m, "thinking")
	if err != nil {
		return nil, err
	}
	content, err := optString(m, "content")
	if err != nil {
		return nil, err
	}
	var out []wire.Chunk
	if thinking != "" {
		p.thinking.WriteString(thinking)
		out = append(out, wire.Chunk{Type: wire.ChunkThinking, Content: thinking, IsDelta: true})
	}
	if content != "" {
		p.text.WriteString(content)
		out = append(out, wire.Chunk{Type: wire.ChunkText, Content: content, IsDelta: true})
	}
	if tc, ok := m["tool_calls"]; ok && tc != nil {
		list, ok := tc.([]any)
		if !ok {
			return nil, protocolErr("tool_calls is %s, not an array", ndjson.TypeName(tc))
		}
		for i, item := range list {
			call, err := parseToolCall(item)
			if err != nil {
				return nil, protocolErr("tool_calls[%d]: %v", i, err)
			}
			if call.ID != "" && slices.ContainsFunc(p.calls, func(c toolCall) bool { return c.ID == call.ID }) {
				return nil, protocolErr("tool_calls[%d]: id %q repeats an earlier call", i, call.ID)
			}
			p.calls = append(p.calls, call)
			out = append(out, wire.Chunk{Type: wire.ChunkToolUse, ToolID: call.ID, ToolName: call.Function.Name,
				ToolInput: cloneMap(call.Function.Arguments)})
		}
	}
	return out, nil
}

var toolCallKeys = []string{"id", "type", "function"}
var functionKeys = []string{"index", "name", "arguments"}

// parseToolCall reads one complete tool call: Ollama sends each call whole,
// its arguments an object, so there are no argument deltas to assemble.
// Since Ollama 0.12.10 a call carries the server's id ("call_…"); an
// older server sends none, and then the id stays empty (never invented).
func parseToolCall(v any) (toolCall, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return toolCall{}, fmt.Errorf("%s, not an object", ndjson.TypeName(v))
	}
	if k := unknownKey(m, toolCallKeys); k != "" {
		return toolCall{}, fmt.Errorf("field %.64q is unknown", k)
	}
	id, err := optString(m, "id")
	if err != nil {
		return toolCall{}, err
	}
	if t, ok := m["type"]; ok && t != nil && t != "function" {
		return toolCall{}, fmt.Errorf("type %v is not function", t)
	}
	f, ok := m["function"].(map[string]any)
	if !ok {
		return toolCall{}, fmt.Errorf("function is %s, not an object", ndjson.TypeName(m["function"]))
	}
	if k := unknownKey(f, functionKeys); k != "" {
		return toolCall{}, fmt.Errorf("function field %.64q is unknown", k)
	}
	name, _ := f["name"].(string)
	if name == "" {
		return toolCall{}, fmt.Errorf("function name is missing")
	}
	args := map[string]any{}
	switch a := f["arguments"].(type) {
	case nil:
	case map[string]any:
		args = a
	default:
		return toolCall{}, fmt.Errorf("arguments are %s, not an object", ndjson.TypeName(a))
	}
	return toolCall{ID: id, Function: toolFunction{Name: name, Arguments: args}}, nil
}

// checkFinal checks the counters of the done object.
func checkFinal(m map[string]any) error {
	for _, k := range []string{"prompt_eval_count", "eval_count", "total_duration"} {
		if v, ok := m[k]; ok && v != nil {
			if _, ok := count(v); !ok {
				return protocolErr("%s is %v, not a count", k, v)
			}
		}
	}
	if v, ok := m["done_reason"]; ok && v != nil {
		if _, ok := v.(string); !ok {
			return protocolErr("done_reason is %s, not a string", ndjson.TypeName(v))
		}
	}
	return nil
}

// End is called at the clean end of the body. Without a done object the
// stream was cut short: a ProviderProtocolError. Otherwise it returns the
// result chunk: metadata.usage (see doc.go for the mapping),
// metadata.stop_reason and metadata.duration_ms. After an error chunk it
// returns nothing.
func (p *Parser) End() ([]wire.Chunk, error) {
	if p.failed {
		return nil, nil
	}
	if !p.done {
		return nil, protocolErr("the stream ended before the final done object")
	}
	md := wire.Metadata{StopReason: p.StopReason()}
	in, hasIn := count(p.final["prompt_eval_count"])
	out, hasOut := count(p.final["eval_count"])
	if hasIn || hasOut {
		md.Usage = &wire.Usage{InputTokens: in, OutputTokens: out}
	}
	if ns, ok := count(p.final["total_duration"]); ok {
		ms := ns / 1e6
		md.DurationMS = &ms
	}
	return []wire.Chunk{{Type: wire.ChunkResult, Metadata: md}}, nil
}

// StopReason is the run's stop_reason: "tool_use" when the model called
// tools, else done_reason in the vocabulary the other adapters use ("stop"
// is "end_turn", "length" is "max_tokens"), any other value verbatim.
func (p *Parser) StopReason() string {
	if len(p.calls) > 0 {
		return "tool_use"
	}
	r, _ := p.final["done_reason"].(string)
	switch r {
	case "stop":
		return "end_turn"
	case "length":
		return "max_tokens"
	}
	return r
}

// Failed reports whether the stream ended in a provider-declared error.
func (p *Parser) Failed() bool { return p.failed }

// assistant is the assistant turn as the checkpoint keeps it.
func (p *Parser) assistant() message {
	return message{Role: "assistant", Content: p.text.String(), Thinking: p.thinking.String(), ToolCalls: p.calls}
}

// ErrorChunk is the one error chunk of a provider-declared failure: the
// provider's message and its class (ClassifyMessage).
func ErrorChunk(msg string) wire.Chunk {
	e := wire.Errorf(ClassifyMessage(msg), "ollama: %s", msg) // redacted and bounded
	return wire.Chunk{Type: wire.ChunkError, Content: e.Message, IsError: true,
		Metadata: wire.Metadata{ErrorClass: e.Class}}
}

// ClassifyMessage types a provider error message: rate limits and
// overload are ProviderQuotaError, authorization ProviderAuthError, an
// over-long prompt ProviderContextError, anything else ProviderError.
func ClassifyMessage(msg string) wire.Class {
	low := strings.ToLower(msg)
	has := func(subs ...string) bool {
		return slices.ContainsFunc(subs, func(s string) bool { return strings.Contains(low, s) })
	}
	switch {
	case has("unauthorized", "forbidden", "invalid api key", "authentication"):
		return wire.ProviderAuthError
	case has("rate limit", "too many requests", "overloaded", "quota", "server busy", "try again later"):
		return wire.ProviderQuotaError
	case has("context length", "context window", "context size", "exceeds the context", "prompt is too long"):
		return wire.ProviderContextError
	}
	return wire.ProviderError
}

func errorMessage(v any) (string, bool) {
	switch e := v.(type) {
	case string:
		if e == "" {
			return "", false
		}
		return e, true
	case map[string]any:
		if s, ok := e["message"].(string); ok && s != "" {
			return s, true
		}
	}
	return "", false
}

func optString(m map[string]any, k string) (string, error) {
	v, ok := m[k]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", protocolErr("%s is %s, not a string", k, ndjson.TypeName(v))
	}
	return s, nil
}

// count reads a JSON number that must be a non-negative integer.
func count(v any) (int64, bool) {
	f, ok := v.(float64)
	if !ok || f < 0 || f != math.Trunc(f) || f > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

func protocolErr(format string, args ...any) *wire.Error {
	return wire.Errorf(wire.ProviderProtocolError, "ollama: "+format, args...)
}

func keys(m map[string]any) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, fmt.Sprintf("%.32q", k))
	}
	sort.Strings(ks)
	if len(ks) > 8 {
		ks = append(ks[:8], "…")
	}
	return "[" + strings.Join(ks, " ") + "]"
}

// cloneMap deep-copies a tool call's arguments, so a consumer editing a
// chunk cannot change the checkpoint.
func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return cloneMap(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneValue(e)
		}
		return out
	}
	return v
}
