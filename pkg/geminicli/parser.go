package geminicli

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/cliadapter"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// parser maps one run's stream-json events to chunks. The grammar is the
// one Gemini CLI 0.61.0 printed in testdata/cli/gemini, plus the "error"
// event of the CLI's published stream-json schema (not seen there).
type parser struct {
	model   string            // from init
	session string            // the confirmed session id
	tools   map[string]string // tool id → tool name, from tool_use
	done    bool              // the result (or an error) was seen
}

var _ cliadapter.Parser = (*parser)(nil)

func newParser() *parser { return &parser{tools: map[string]string{}} }

// maxErrorContent bounds the message of an error chunk.
const maxErrorContent = 1 << 10

func protocolf(format string, args ...any) error {
	return wire.Errorf(wire.ProviderProtocolError, Name+": "+format, args...)
}

// Event maps one event. Unknown event types, and known ones with fields of
// the wrong type, are ProviderProtocolErrors.
func (p *parser) Event(ev map[string]any) ([]wire.Chunk, error) {
	typ, ok := ev["type"].(string)
	if !ok {
		return nil, protocolf("stdout value without a string \"type\" (keys %s): not a stream-json event", keyList(ev))
	}
	if p.done {
		return nil, protocolf("%q event after the result", typ)
	}
	switch typ {
	case "init":
		return p.init(ev)
	case "message":
		return p.message(ev)
	case "tool_use":
		return p.toolUse(ev)
	case "tool_result":
		return p.toolResult(ev)
	case "error":
		return p.errorEvent(ev)
	case "result":
		return p.result(ev)
	}
	return nil, protocolf("unknown event type %.64q", typ)
}

// End adds nothing: the result event is the CLI's terminal line, and a
// clean EOF without one is a normal (possibly empty) end.
func (p *parser) End() ([]wire.Chunk, error) { return nil, nil }

func (p *parser) init(ev map[string]any) ([]wire.Chunk, error) {
	sid, err := optString(ev, "init", "session_id")
	if err != nil {
		return nil, err
	}
	model, err := optString(ev, "init", "model")
	if err != nil {
		return nil, err
	}
	if sid != "" && !isUUID(sid) {
		// It could never be resumed (--resume takes a UUID here), so it is
		// not a confirmed id: the event is invalid.
		return nil, protocolf("init: session_id is not a UUID")
	}
	if sid != "" {
		p.session = sid
	}
	if model != "" {
		p.model = model
	}
	caps := capabilities
	return []wire.Chunk{{Type: wire.ChunkSystem, Metadata: wire.Metadata{
		Provider: Name, Model: model, SessionID: sid, Capabilities: &caps,
	}}}, nil
}

func (p *parser) message(ev map[string]any) ([]wire.Chunk, error) {
	role, err := reqString(ev, "message", "role")
	if err != nil {
		return nil, err
	}
	content, err := optString(ev, "message", "content")
	if err != nil {
		return nil, err
	}
	delta, err := optBool(ev, "message", "delta")
	if err != nil {
		return nil, err
	}
	switch role {
	case "user":
		return nil, nil // the prompt, echoed: not provider output
	case "assistant":
		if content == "" {
			return nil, nil
		}
		return []wire.Chunk{{Type: wire.ChunkText, Content: content, IsDelta: delta}}, nil
	}
	return nil, protocolf("message: unknown role %.64q", role)
}

func (p *parser) toolUse(ev map[string]any) ([]wire.Chunk, error) {
	name, err := reqString(ev, "tool_use", "tool_name")
	if err != nil {
		return nil, err
	}
	id, err := reqString(ev, "tool_use", "tool_id")
	if err != nil {
		return nil, err
	}
	var input map[string]any
	switch v := ev["parameters"].(type) {
	case nil:
	case map[string]any:
		input = v
	default:
		return nil, protocolf("tool_use: parameters is %s, not an object", jsonType(v))
	}
	p.tools[id] = name
	return []wire.Chunk{{Type: wire.ChunkToolUse, ToolName: name, ToolID: id, ToolInput: input}}, nil
}

func (p *parser) toolResult(ev map[string]any) ([]wire.Chunk, error) {
	id, err := reqString(ev, "tool_result", "tool_id")
	if err != nil {
		return nil, err
	}
	status, err := reqString(ev, "tool_result", "status")
	if err != nil {
		return nil, err
	}
	if status != "success" && status != "error" {
		return nil, protocolf("tool_result: unknown status %.64q", status)
	}
	out := ev["output"]
	if out == nil && status == "error" {
		// A failed tool may report only {type, message}.
		if e, ok := ev["error"].(map[string]any); ok {
			out = e["message"]
		}
	}
	return []wire.Chunk{{Type: wire.ChunkToolResult, ToolID: id, ToolName: p.tools[id], ToolOutput: out, IsError: status == "error"}}, nil
}

func (p *parser) errorEvent(ev map[string]any) ([]wire.Chunk, error) {
	severity, err := reqString(ev, "error", "severity")
	if err != nil {
		return nil, err
	}
	msg, err := optString(ev, "error", "message")
	if err != nil {
		return nil, err
	}
	switch severity {
	case "warning":
		return nil, nil // non-fatal notice (e.g. a detected loop): telemetry
	case "error":
		p.done = true
		return []wire.Chunk{errorChunk(classifyAPIError(msg))}, nil
	}
	return nil, protocolf("error: unknown severity %.64q", severity)
}

func (p *parser) result(ev map[string]any) ([]wire.Chunk, error) {
	status, err := reqString(ev, "result", "status")
	if err != nil {
		return nil, err
	}
	switch status {
	case "success":
	case "error":
		var msg string
		switch e := ev["error"].(type) {
		case nil:
		case map[string]any:
			if msg, err = optString(e, "result.error", "message"); err != nil {
				return nil, err
			}
		default:
			return nil, protocolf("result: error is %s, not an object", jsonType(e))
		}
		p.done = true
		return []wire.Chunk{errorChunk(classifyAPIError(msg))}, nil
	default:
		return nil, protocolf("result: unknown status %.64q", status)
	}
	md := wire.Metadata{SessionID: p.session, Model: p.model}
	switch stats := ev["stats"].(type) {
	case nil:
	case map[string]any:
		u, dur, err := usage(stats)
		if err != nil {
			return nil, err
		}
		md.Usage, md.DurationMS = u, dur
	default:
		return nil, protocolf("result: stats is %s, not an object", jsonType(stats))
	}
	p.done = true
	return []wire.Chunk{{Type: wire.ChunkResult, Metadata: md}}, nil
}

// usage maps result.stats to token classes. input_tokens is the whole
// prompt, cached the part of it read from cache and input the rest;
// output_tokens excludes thoughts, which only total_tokens counts.
func usage(stats map[string]any) (*wire.Usage, *int64, error) {
	n := map[string]int64{}
	for _, k := range []string{"total_tokens", "input_tokens", "output_tokens", "cached", "input", "duration_ms"} {
		v, ok, err := count(stats, k)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			n[k] = v
		}
	}
	u := &wire.Usage{OutputTokens: n["output_tokens"], CacheReadTokens: n["cached"]}
	if in, ok := n["input"]; ok {
		u.InputTokens = in
	} else {
		u.InputTokens = max(n["input_tokens"]-n["cached"], 0)
	}
	if total, ok := n["total_tokens"]; ok {
		u.ReasoningTokens = max(total-n["input_tokens"]-n["output_tokens"], 0)
	}
	var dur *int64
	if d, ok := n["duration_ms"]; ok {
		dur = &d
	}
	return u, dur, nil
}

// count reads a non-negative integral JSON number.
func count(m map[string]any, k string) (int64, bool, error) {
	v, present := m[k]
	if !present || v == nil {
		return 0, false, nil
	}
	f, ok := v.(float64)
	if !ok || f < 0 || f != math.Trunc(f) || f > 1<<53 {
		return 0, false, protocolf("result: stats.%s is not a token count", k)
	}
	return int64(f), true, nil
}

func errorChunk(msg string, class wire.Class) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkError, IsError: true, Content: msg, Metadata: wire.Metadata{ErrorClass: class}}
}

// classifyAPIError turns the CLI's error message into a safe message and an
// error class. The CLI wraps the API's error as "[API Error: <JSON body>]"
// or, for some statuses, as "[API Error: <text>]\n<advice>".
func classifyAPIError(raw string) (string, wire.Class) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "Gemini CLI reported an error without a message", wire.ProviderError
	}
	inner, wrapped := strings.CutPrefix(s, "[API Error: ")
	if wrapped && strings.HasPrefix(inner, "{") {
		var body struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		if json.NewDecoder(strings.NewReader(inner)).Decode(&body) == nil && (body.Error.Code != 0 || body.Error.Status != "") {
			e := body.Error
			msg := fmt.Sprintf("Gemini API error %d %s: %s", e.Code, e.Status, e.Message)
			return safe(msg), apiClass(e.Code, e.Status, e.Message)
		}
	}
	if wrapped {
		if head, tail, ok := strings.Cut(inner, "]"); ok {
			inner = strings.TrimSpace(head + " " + tail)
		}
		s = "Gemini API error: " + inner
	}
	return safe(s), textClass(s)
}

// apiClass classes an API error by its HTTP code and status. A 5xx other
// than 529 is the model API's server failure, ProviderError, whatever its
// message says (README "Error classes"): Gemini's 503 UNAVAILABLE "The
// model is overloaded" included.
func apiClass(code int, status, msg string) wire.Class {
	switch {
	case code == 401 || code == 403 || status == "UNAUTHENTICATED" || status == "PERMISSION_DENIED":
		return wire.ProviderAuthError
	case code == 429 || code == 529 || status == "RESOURCE_EXHAUSTED":
		return wire.ProviderQuotaError
	case code >= 500:
		return wire.ProviderError
	case isContextText(strings.ToLower(msg)):
		return wire.ProviderContextError
	}
	return wire.ProviderError
}

// textClass classes an error known only by its text.
func textClass(s string) wire.Class {
	l := strings.ToLower(s)
	switch {
	case containsAny(l, "api key not valid", "unauthenticated", "permission_denied", "status: 401", `"code":401`, "status: 403", `"code":403`):
		return wire.ProviderAuthError
	case containsAny(l, "resource has been exhausted", "resource_exhausted", "status: 429", `"code":429`, "rate limit", "quota"):
		return wire.ProviderQuotaError
	case isContextText(l):
		return wire.ProviderContextError
	}
	return wire.ProviderError
}

func isContextText(l string) bool {
	return containsAny(l, "exceeds the maximum number of tokens", "input token count", "context window", "context length", "too many tokens")
}

// Classify classes a non-zero exit that came without an in-band error. The
// CLI exits with the API's HTTP status modulo 256 (401 → 145, 403 → 147,
// 429 → 173) and with 41 for an authentication failure; otherwise the
// stderr text decides, and anything else is a ProviderProcessError.
func Classify(code int, stderr string) wire.Class {
	switch code {
	case 41, 401 % 256, 403 % 256:
		return wire.ProviderAuthError
	case 429 % 256:
		return wire.ProviderQuotaError
	}
	if c := textClass(stderr); c != wire.ProviderError {
		return c
	}
	return wire.ProviderProcessError
}

// safe redacts and bounds a message for an error chunk, on one line.
func safe(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = wire.Redact(s)
	if len(s) > maxErrorContent {
		i := maxErrorContent
		for i > 0 && s[i]&0xC0 == 0x80 {
			i--
		}
		s = s[:i]
	}
	return s
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func reqString(ev map[string]any, event, k string) (string, error) {
	s, ok := ev[k].(string)
	if !ok || s == "" {
		return "", protocolf("%s: %s is missing or not a non-empty string", event, k)
	}
	return s, nil
}

func optString(ev map[string]any, event, k string) (string, error) {
	switch v := ev[k].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	default:
		return "", protocolf("%s: %s is %s, not a string", event, k, jsonType(v))
	}
}

func optBool(ev map[string]any, event, k string) (bool, error) {
	switch v := ev[k].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	default:
		return false, protocolf("%s: %s is %s, not a boolean", event, k, jsonType(v))
	}
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// keyList names at most eight of an object's keys, for a message.
func keyList(m map[string]any) string {
	keys := slices.Sorted(maps.Keys(m))
	if len(keys) > 8 {
		keys = append(keys[:8], "…")
	}
	for i, k := range keys {
		if r := []rune(k); len(r) > 32 {
			keys[i] = string(r[:32]) + "…"
		}
	}
	return "[" + strings.Join(keys, " ") + "]"
}
