package gemini

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// parser maps one run's stream-json events to chunks. The grammar is the
// one Gemini CLI 0.61.0 printed in testdata/cli/gemini, plus the "error"
// event of the CLI's published stream-json schema (not seen there).
type parser struct {
	model   string            // from init
	session string            // the confirmed session id
	tools   map[string]string // tool id → tool name, from tool_use; made at the first
	done    bool              // the result (or an error) was seen
}

var _ cli.Parser = (*parser)(nil)

func newParser() *parser { return &parser{} }

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
		return nil, errNoType(slices.Collect(maps.Keys(ev)))
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

// errNoType is the error of an event without a string type, whose
// members are named keys.
func errNoType(keys []string) error {
	return protocolf("stdout value without a string \"type\" (keys %s): not a stream-json event", keyList(keys))
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
	return p.initEvent(sid, model)
}

// initEvent maps init with its session_id and model ("" when null).
func (p *parser) initEvent(sid, model string) ([]wire.Chunk, error) {
	if sid != "" && !reqfield.IsUUID(sid) {
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
	return messageChunks(role, content, delta)
}

// messageChunks maps a message event with a role.
func messageChunks(role, content string, delta bool) ([]wire.Chunk, error) {
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
		return nil, protocolf("tool_use: parameters is %s, not an object", ndjson.TypeName(v))
	}
	return p.toolUseChunks(name, id, input), nil
}

// toolUseChunks maps a tool_use event with a name and an id.
func (p *parser) toolUseChunks(name, id string, input map[string]any) []wire.Chunk {
	if p.tools == nil {
		p.tools = map[string]string{}
	}
	p.tools[id] = name
	return []wire.Chunk{{Type: wire.ChunkToolUse, ToolName: name, ToolID: id, ToolInput: input}}
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
	return p.toolResultChunks(id, status, out), nil
}

// toolResultChunks maps a tool_result event with an id, a known status and
// its output.
func (p *parser) toolResultChunks(id, status string, out any) []wire.Chunk {
	return []wire.Chunk{{Type: wire.ChunkToolResult, ToolID: id, ToolName: p.tools[id], ToolOutput: out, IsError: status == "error"}}
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
		return p.failed(msg), nil
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
			return nil, protocolf("result: error is %s, not an object", ndjson.TypeName(e))
		}
		return p.failed(msg), nil
	default:
		return nil, protocolf("result: unknown status %.64q", status)
	}
	var st *stats
	switch m := ev["stats"].(type) {
	case nil:
	case map[string]any:
		var c stats
		for i, k := range statKeys {
			v, ok, err := count(m, k)
			if err != nil {
				return nil, err
			}
			c.n[i], c.has[i] = v, ok
		}
		st = &c
	default:
		return nil, protocolf("result: stats is %s, not an object", ndjson.TypeName(m))
	}
	return p.succeeded(st), nil
}

// failed is the error chunk of a result with status error, or of an
// error event with severity error.
func (p *parser) failed(msg string) []wire.Chunk {
	p.done = true
	return []wire.Chunk{errorChunk(classifyAPIError(msg))}
}

// succeeded is the result chunk of a result with status success and its
// stats, if any.
func (p *parser) succeeded(st *stats) []wire.Chunk {
	md := wire.Metadata{SessionID: p.session, Model: p.model}
	if st != nil {
		md.Usage, md.DurationMS = st.usage()
	}
	p.done = true
	return []wire.Chunk{{Type: wire.ChunkResult, Metadata: md}}
}

// statKeys are the counts of result.stats that usage reads, in the order
// of stats.n.
var statKeys = [...]string{"total_tokens", "input_tokens", "output_tokens", "cached", "input", "duration_ms"}

const (
	statTotal = iota
	statInputTokens
	statOutputTokens
	statCached
	statInput
	statDuration
)

// stats are result.stats' counts (statKeys), each with whether it was
// there (and not null).
type stats struct {
	n   [len(statKeys)]int64
	has [len(statKeys)]bool
}

// usage maps result.stats to token classes. input_tokens is the whole
// prompt, cached the part of it read from cache and input the rest;
// output_tokens excludes thoughts, which only total_tokens counts.
func (s *stats) usage() (*wire.Usage, *int64) {
	n := s.n // an absent count is 0
	u := &wire.Usage{OutputTokens: n[statOutputTokens], CacheReadTokens: n[statCached]}
	if s.has[statInput] {
		u.InputTokens = n[statInput]
	} else {
		u.InputTokens = max(n[statInputTokens]-n[statCached], 0)
	}
	if s.has[statTotal] {
		u.ReasoningTokens = max(n[statTotal]-n[statInputTokens]-n[statOutputTokens], 0)
	}
	var dur *int64
	if s.has[statDuration] {
		d := n[statDuration]
		dur = &d
	}
	return u, dur
}

// count reads a non-negative integral JSON number.
func count(m map[string]any, k string) (int64, bool, error) {
	v, present := m[k]
	if !present || v == nil {
		return 0, false, nil
	}
	f, ok := v.(float64)
	if !ok || !isCount(f) {
		return 0, false, protocolf("result: stats.%s is not a token count", k)
	}
	return int64(f), true, nil
}

// isCount reports whether f is a count: integral, 0 to 2^53.
func isCount(f float64) bool { return f >= 0 && f == math.Trunc(f) && f <= 1<<53 }

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
// message says (docs/contract.md §1.5 and docs/contract-notes.md): Gemini's 503 UNAVAILABLE "The
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
		return "", protocolf("%s: %s is %s, not a string", event, k, ndjson.TypeName(v))
	}
}

func optBool(ev map[string]any, event, k string) (bool, error) {
	switch v := ev[k].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	default:
		return false, protocolf("%s: %s is %s, not a boolean", event, k, ndjson.TypeName(v))
	}
}

// keyList names at most eight of an object's keys (which may repeat),
// for a message. It sorts keys in place.
func keyList(keys []string) string {
	slices.Sort(keys)
	keys = slices.Compact(keys)
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
