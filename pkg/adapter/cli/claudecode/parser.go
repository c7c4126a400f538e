package claudecode

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Parser maps one attempt's stream-json events to chunks (docs/contract.md §1.3):
//
//	system/init                      → system {provider, model, session_id, capabilities}
//	assistant text / thinking block  → text / thinking, is_delta=false
//	assistant tool_use block         → tool_use {tool_id, tool_name, tool_input}
//	user tool_result block           → tool_result {tool_id, tool_name, tool_output, is_error}
//	stream_event text/thinking delta → text / thinking, is_delta=true (--include-partial-messages);
//	                                   the complete block that follows adds only what the deltas missed
//	result, is_error=false           → result {usage, total_cost_usd, num_turns, duration_ms,
//	                                   duration_api_ms, stop_reason}; content only if its text
//	                                   was not already emitted as text
//	result, is_error=true            → the one error chunk, classed by api_error_status and the
//	                                   synthetic assistant message's error kind
//
// The CLI reports an API failure with a synthetic assistant message
// (message.model "<synthetic>", a top-level "error" field) whose text is the
// error message, then a result with subtype "success" but is_error true.
// The synthetic text is never emitted as assistant text; if the stream ends
// after it without a result, End yields the error chunk.
//
// The session id, on every line, is published on a system chunk as soon as
// a valid event confirms it (normally system/init), and again if it
// changes. system/api_retry is the CLI's notice (cli.Notice) that it
// retries. Telemetry-only events are dropped: system/thinking_tokens,
// status, compact_boundary, hook_* and task_* (and the other
// subtypes in dropSystem), tool_progress, auth_status, rate_limit_event, and
// the stream_event envelopes that carry no text (message_start/delta/stop,
// content_block_start/stop, signature, tool-input and citation deltas,
// ping, error). Any other event type, system subtype or content block is a
// ProviderProtocolError.
//
// A Parser is used by one stream and is not safe for concurrent use.
type Parser struct {
	model     string
	session   string
	ended     bool     // a result or error chunk was produced
	synthetic *failure // the CLI's synthetic error message, if seen

	lastUnit string // the last complete text unit emitted
	msgID    string // the assistant message the text units in msgTexts belong to
	msgTexts []string
	tools    map[string]string // tool name by id, from its tool_use to its result
	lastTool doneTool          // the tool whose result came last

	line lineState // the fast path's reused buffers (line.go)

	stream partial // the message being streamed with --include-partial-messages
}

type failure struct{ kind, text string }

type doneTool struct{ id, name string }

// partial is the state of one streamed message: its text and thinking
// blocks, in order, with what their deltas have emitted.
type partial struct {
	msgID  string
	blocks map[int]*block
	order  []*block
}

type block struct {
	kind     string // "text" or "thinking"
	text     strings.Builder
	consumed bool // the complete assistant block has arrived
}

// NewParser returns a parser for one attempt.
func NewParser() *Parser {
	return &Parser{tools: map[string]string{}}
}

// dropSystem are the telemetry-only system subtypes.
var dropSystem = map[string]bool{
	"thinking_tokens": true, "status": true, "compact_boundary": true,
	"hook_started": true, "hook_progress": true, "hook_response": true,
	"task_started": true, "task_progress": true, "task_notification": true, "files_persisted": true,
}

// dropEvents are the telemetry-only top-level event types.
var dropEvents = map[string]bool{"tool_progress": true, "auth_status": true, "rate_limit_event": true}

// Event maps one event. See Parser for the mapping.
func (p *Parser) Event(ev map[string]any) ([]wire.Chunk, error) {
	typ, err := str(ev, "type")
	if err != nil {
		return nil, err
	}
	sid, err := str(ev, "session_id")
	if err != nil {
		return nil, err
	}
	if sid != "" && !reqfield.IsUUID(sid) {
		// Only an id the resume field accepts is a session: a cut or
		// malformed one is never published.
		return nil, protocolf("session_id %q is not a session id (a UUID)", sid)
	}
	var chunks []wire.Chunk
	switch typ {
	case "system":
		chunks, err = p.system(ev, sid)
	case "assistant":
		var a assistantEvent
		if a, err = assistantOf(ev); err == nil {
			chunks = p.assistant(nil, &a)
		}
	case "user":
		var u userEvent
		if u, err = userOf(ev); err == nil {
			chunks = p.user(&u)
		}
	case "result":
		chunks, err = p.result(ev, sid)
	case "stream_event":
		var e streamEvent
		if e, err = streamEventOf(ev); err == nil {
			chunks, err = p.streamEvent(&e)
		}
	case "":
		return nil, protocolf("event without a type")
	default:
		if !dropEvents[typ] {
			return nil, protocolf("unknown event type %q", typ)
		}
	}
	return p.finish(typ, sid, chunks, err)
}

// finish is the end of Event for every event: the session id a valid
// event confirms, and nothing after the result.
func (p *Parser) finish(typ, sid string, chunks []wire.Chunk, err error) ([]wire.Chunk, error) {
	if err != nil {
		return nil, err
	}
	if sid != "" && sid != p.session {
		// A valid event confirms an id the stream has not published yet.
		p.session = sid
		chunks = append([]wire.Chunk{{Type: wire.ChunkSystem,
			Metadata: wire.Metadata{Provider: Name, Model: p.model, SessionID: sid}}}, chunks...)
	}
	if p.ended && len(chunks) > 0 && typ != "result" {
		return nil, protocolf("%s event after the result", typ)
	}
	return chunks, nil
}

// End is called at a clean EOF. A synthetic error message not followed by a
// result still declares the failure.
func (p *Parser) End() ([]wire.Chunk, error) {
	if p.ended || p.synthetic == nil {
		return nil, nil
	}
	p.ended = true
	return []wire.Chunk{p.errorChunk(classify(0, p.synthetic.kind, p.synthetic.text), p.synthetic.text)}, nil
}

func (p *Parser) system(ev map[string]any, sid string) ([]wire.Chunk, error) {
	sub, err := str(ev, "subtype")
	if err != nil {
		return nil, err
	}
	switch {
	case sub == "init":
		model, err := str(ev, "model")
		if err != nil {
			return nil, err
		}
		return p.init(model, sid), nil
	case sub == "api_retry":
		return []wire.Chunk{retryNotice(ev)}, nil
	case dropSystem[sub]:
		return nil, nil
	}
	return nil, protocolf("unknown system event subtype %q", sub)
}

// retryNotice is the CLI's notice that it retries an API call
// (system/api_retry: attempt, max_retries, error_status, error), as a
// cli.Notice classified by the status it got: none is a connection that
// failed.
func retryNotice(ev map[string]any) wire.Chunk {
	attempt, _ := ev["attempt"].(float64)
	max, _ := ev["max_retries"].(float64)
	status, _ := ev["error_status"].(float64)
	msg, _ := ev["error"].(string)
	class := wire.ProviderTransportError
	switch s := int(status); {
	case s == 401 || s == 403:
		class = wire.ProviderAuthError
	case s == 429 || s == 529:
		class = wire.ProviderQuotaError
	case s >= 400:
		class = wire.ProviderError
	}
	text := fmt.Sprintf("retrying (attempt %d of %d)", int(attempt), int(max))
	if status != 0 {
		text += fmt.Sprintf(": status %d", int(status))
	}
	if msg != "" {
		text += " " + msg
	}
	return cli.Notice(Name, text, class)
}

// init takes a system/init event's model and session id.
func (p *Parser) init(model, sid string) []wire.Chunk {
	p.model = model
	if sid != "" {
		p.session = sid
	}
	caps := Capabilities
	return []wire.Chunk{{Type: wire.ChunkSystem,
		Metadata: wire.Metadata{Provider: Name, Model: model, SessionID: sid, Capabilities: &caps}}}
}

// syntheticModel is the model of the CLI's own messages.
const syntheticModel = "<synthetic>"

// assistantEvent is an assistant event's message as the parser reads it.
type assistantEvent struct {
	id, model string
	kind      string // the event's "error": set on the CLI's synthetic message
	blocks    []contentBlock
}

// synthetic reports whether the message is the CLI's own, not the model's.
func (a *assistantEvent) synthetic() bool { return a.kind != "" || a.model == syntheticModel }

// contentBlock is one block of a message's content. For a synthetic
// message only text blocks are kept.
type contentBlock struct {
	typ  string
	text string // a text block's text, a thinking block's thinking
	// tool_use
	id, name string
	input    map[string]any
	raw      []byte // the fast path's input, not yet decoded
	// tool_result
	isError bool
	output  any
}

// assistantOf reads an assistant event, with Event's errors.
func assistantOf(ev map[string]any) (assistantEvent, error) {
	var a assistantEvent
	msg, content, err := message(ev)
	if err != nil {
		return a, err
	}
	if a.model, err = str(msg, "model"); err != nil {
		return a, err
	}
	if a.id, err = str(msg, "id"); err != nil {
		return a, err
	}
	if a.kind, err = str(ev, "error"); err != nil {
		return a, err
	}
	synthetic := a.synthetic()
	for i, b := range content {
		bm, ok := b.(map[string]any)
		if !ok {
			return a, protocolf("assistant content[%d] is not an object", i)
		}
		if synthetic {
			if t, _ := bm["type"].(string); t == "text" {
				s, err := str(bm, "text")
				if err != nil {
					return a, err
				}
				a.blocks = append(a.blocks, contentBlock{typ: "text", text: s})
			}
			continue
		}
		bt, err := str(bm, "type")
		if err != nil {
			return a, err
		}
		switch bt {
		case "text", "thinking":
			s, err := str(bm, bt)
			if err != nil {
				return a, err
			}
			a.blocks = append(a.blocks, contentBlock{typ: bt, text: s})
		case "redacted_thinking":
			a.blocks = append(a.blocks, contentBlock{typ: bt})
		case "tool_use":
			c, err := toolUse(bm)
			if err != nil {
				return a, err
			}
			a.blocks = append(a.blocks, contentBlock{typ: bt, id: c.ToolID, name: c.ToolName, input: c.ToolInput})
		default:
			return a, protocolf("unknown assistant content block %q", bt)
		}
	}
	return a, nil
}

// assistant appends an assistant message's chunks to chunks.
func (p *Parser) assistant(chunks []wire.Chunk, a *assistantEvent) []wire.Chunk {
	if a.synthetic() {
		// The CLI's own message, not the model's: never assistant text.
		if a.kind != "" {
			texts := make([]string, len(a.blocks))
			for i, b := range a.blocks {
				texts[i] = b.text
			}
			p.synthetic = &failure{kind: a.kind, text: strings.Join(texts, "\n")}
		}
		return nil
	}
	if a.id != p.msgID || a.id == "" {
		p.msgID, p.msgTexts = a.id, p.msgTexts[:0]
	}
	for _, b := range a.blocks {
		switch b.typ {
		case "text", "thinking":
			if b.text == "" {
				continue
			}
			chunks = p.complete(chunks, a.id, b.typ, b.text)
			if b.typ == "text" {
				p.lastUnit = b.text
				p.msgTexts = append(p.msgTexts, b.text)
			}
		case "redacted_thinking":
			// Encrypted reasoning: no text to show, so no chunk.
		case "tool_use":
			p.tools[b.id] = b.name
			chunks = append(chunks, wire.Chunk{Type: wire.ChunkToolUse, ToolID: b.id, ToolName: b.name, ToolInput: b.input})
		}
	}
	return chunks
}

// complete appends to dst the chunks for a complete text or thinking
// block: the block itself, or, when its deltas were streamed, only what
// they missed.
func (p *Parser) complete(dst []wire.Chunk, msgID, kind, s string) []wire.Chunk {
	typ := wire.ChunkText
	if kind == "thinking" {
		typ = wire.ChunkThinking
	}
	if msgID != "" && msgID == p.stream.msgID {
		for _, b := range p.stream.order {
			if b.consumed || b.kind != kind {
				continue
			}
			b.consumed = true
			streamed := b.text.String()
			if rest, ok := strings.CutPrefix(s, streamed); ok && rest != "" {
				return append(dst, wire.Chunk{Type: typ, Content: rest, IsDelta: true})
			}
			// Already emitted in full (or the deltas disagree with the
			// block, and what they emitted stands).
			return dst
		}
	}
	return append(dst, wire.Chunk{Type: typ, Content: s})
}

func toolUse(bm map[string]any) (wire.Chunk, error) {
	id, err := str(bm, "id")
	if err != nil {
		return wire.Chunk{}, err
	}
	name, err := str(bm, "name")
	if err != nil {
		return wire.Chunk{}, err
	}
	if id == "" || name == "" {
		return wire.Chunk{}, protocolf("tool_use block without an id or a name")
	}
	var input map[string]any
	switch v := bm["input"].(type) {
	case nil:
	case map[string]any:
		input = v
	default:
		return wire.Chunk{}, protocolf("tool_use %s: input is not an object", id)
	}
	return wire.Chunk{Type: wire.ChunkToolUse, ToolID: id, ToolName: name, ToolInput: input}, nil
}

// userEvent is a user event's tool results; echoed user input is dropped.
type userEvent struct{ results []contentBlock }

// userOf reads a user event, with Event's errors.
func userOf(ev map[string]any) (userEvent, error) {
	var u userEvent
	msg, ok := ev["message"].(map[string]any)
	if !ok {
		return u, protocolf("user event without a message object")
	}
	var content []any
	switch v := msg["content"].(type) {
	case string:
		return u, nil // the user's own text echoed back
	case []any:
		content = v
	default:
		return u, protocolf("user message content is neither a string nor an array")
	}
	for i, b := range content {
		bm, ok := b.(map[string]any)
		if !ok {
			return u, protocolf("user content[%d] is not an object", i)
		}
		bt, err := str(bm, "type")
		if err != nil {
			return u, err
		}
		switch bt {
		case "tool_result":
			id, err := str(bm, "tool_use_id")
			if err != nil {
				return u, err
			}
			if id == "" {
				return u, protocolf("tool_result block without a tool_use_id")
			}
			isErr, err := boolean(bm, "is_error")
			if err != nil {
				return u, err
			}
			u.results = append(u.results, contentBlock{typ: bt, id: id, isError: isErr, output: toolOutput(bm["content"])})
		case "text", "image", "document":
			// User input echoed back, not assistant output.
		default:
			return u, protocolf("unknown user content block %q", bt)
		}
	}
	return u, nil
}

// user maps tool results. A tool's name is kept from its tool_use until
// its result, so what the parser keeps is bounded by the tools in flight.
func (p *Parser) user(u *userEvent) []wire.Chunk {
	var chunks []wire.Chunk
	for _, r := range u.results {
		name, ok := p.tools[r.id]
		if ok {
			delete(p.tools, r.id)
			p.lastTool = doneTool{id: r.id, name: name}
		} else if r.id == p.lastTool.id {
			name = p.lastTool.name // the same result again
		}
		chunks = append(chunks, wire.Chunk{Type: wire.ChunkToolResult, ToolID: r.id, ToolName: name,
			ToolOutput: r.output, IsError: r.isError})
	}
	return chunks
}

// toolOutput is a tool result's payload: its text, or the content blocks
// as given when they are not all text.
func toolOutput(v any) any {
	blocks, ok := v.([]any)
	if !ok {
		return v
	}
	texts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		bm, ok := b.(map[string]any)
		if !ok || bm["type"] != "text" {
			return v
		}
		s, ok := bm["text"].(string)
		if !ok {
			return v
		}
		texts = append(texts, s)
	}
	return strings.Join(texts, "\n")
}

func (p *Parser) result(ev map[string]any, sid string) ([]wire.Chunk, error) {
	if p.ended {
		return nil, protocolf("a second result event")
	}
	isErr, err := boolean(ev, "is_error")
	if err != nil {
		return nil, err
	}
	sub, err := str(ev, "subtype")
	if err != nil {
		return nil, err
	}
	text, err := str(ev, "result")
	if err != nil {
		return nil, err
	}
	if sid == "" {
		sid = p.session
	}
	if isErr || strings.HasPrefix(sub, "error") {
		status, _, err := number(ev, "api_error_status")
		if err != nil {
			return nil, err
		}
		kind := ""
		if text == "" && p.synthetic != nil {
			text = p.synthetic.text
		}
		if p.synthetic != nil {
			kind = p.synthetic.kind
		}
		if text == "" {
			if errs, ok := ev["errors"].([]any); ok {
				var parts []string
				for _, e := range errs {
					if s, ok := e.(string); ok && s != "" {
						parts = append(parts, s)
					}
				}
				text = strings.Join(parts, "; ")
			}
		}
		if text == "" {
			text = Name + " reported " + sub
		}
		p.ended = true
		return []wire.Chunk{p.errorChunk(classify(int(status), kind, text), text)}, nil
	}
	var md wire.Metadata
	if md.Usage, err = usage(ev); err != nil {
		return nil, err
	}
	if v, ok, err := number(ev, "total_cost_usd"); err != nil {
		return nil, err
	} else if ok {
		md.TotalCostUSD = &v
	}
	if v, ok, err := number(ev, "num_turns"); err != nil {
		return nil, err
	} else if ok {
		n := int(v)
		md.NumTurns = &n
	}
	for _, f := range []struct {
		key string
		dst **int64
	}{{"duration_ms", &md.DurationMS}, {"duration_api_ms", &md.DurationAPIMS}} {
		v, ok, err := number(ev, f.key)
		if err != nil {
			return nil, err
		}
		if ok {
			n := int64(v)
			*f.dst = &n
		}
	}
	if md.StopReason, err = str(ev, "stop_reason"); err != nil {
		return nil, err
	}
	return p.succeeded(sid, text, md), nil
}

// succeeded is the result chunk of a successful result event whose
// session id is sid (the stream's if empty), text its result and md its
// usage, cost, turns, durations and stop reason.
func (p *Parser) succeeded(sid, text string, md wire.Metadata) []wire.Chunk {
	if sid == "" {
		sid = p.session
	}
	md.Provider, md.Model, md.SessionID = Name, p.model, sid
	c := wire.Chunk{Type: wire.ChunkResult, Metadata: md}
	if !p.emitted(text) {
		c.Content = text
	}
	p.ended = true
	return []wire.Chunk{c}
}

// emitted reports whether the result text was already emitted as text: as
// the last complete unit, or as the text blocks of the last message
// (alone or joined). Only those are kept, so what the parser keeps does not
// grow with the transcript: the CLI's result is its last message's text.
func (p *Parser) emitted(text string) bool {
	if text == "" || text == p.lastUnit || slices.Contains(p.msgTexts, text) {
		return true
	}
	if len(p.msgTexts) > 1 {
		for _, sep := range []string{"", "\n", "\n\n"} {
			if strings.Join(p.msgTexts, sep) == text {
				return true
			}
		}
	}
	return false
}

func usage(ev map[string]any) (*wire.Usage, error) {
	raw, present := ev["usage"]
	if !present || raw == nil {
		return nil, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, protocolf("result usage is not an object")
	}
	var u wire.Usage
	for _, f := range []struct {
		key string
		dst *int64
	}{
		{"input_tokens", &u.InputTokens},
		{"output_tokens", &u.OutputTokens},
		{"cache_read_input_tokens", &u.CacheReadTokens},
		{"cache_creation_input_tokens", &u.CacheWriteTokens},
	} {
		v, _, err := number(m, f.key)
		if err != nil {
			return nil, err
		}
		*f.dst = int64(v)
	}
	return &u, nil
}

// streamEvent is a stream_event's inner event as the parser reads it.
type streamEvent struct {
	typ   string // message_start, content_block_start, content_block_delta, ...
	msgID string // message_start
	index int    // content_block_start and _delta
	kind  string // "text" or "thinking"; "" for a block or delta with no text
	text  string
}

// streamEventOf reads a stream_event, with Event's errors.
func streamEventOf(ev map[string]any) (streamEvent, error) {
	var se streamEvent
	e, ok := ev["event"].(map[string]any)
	if !ok {
		return se, protocolf("stream_event without an event object")
	}
	var err error
	if se.typ, err = str(e, "type"); err != nil {
		return se, err
	}
	switch se.typ {
	case "message_start":
		m, _ := e["message"].(map[string]any)
		se.msgID, err = str(m, "id")
		return se, err
	case "content_block_start":
		if se.index, err = index(e); err != nil {
			return se, err
		}
		cb, ok := e["content_block"].(map[string]any)
		if !ok {
			return se, protocolf("content_block_start without a content_block object")
		}
		kind, err := str(cb, "type")
		if err != nil {
			return se, err
		}
		if kind != "text" && kind != "thinking" {
			return se, nil // tool_use and the rest arrive complete in the assistant event
		}
		se.kind = kind
		se.text, err = str(cb, kind)
		return se, err
	case "content_block_delta":
		if se.index, err = index(e); err != nil {
			return se, err
		}
		d, ok := e["delta"].(map[string]any)
		if !ok {
			return se, protocolf("content_block_delta without a delta object")
		}
		dt, err := str(d, "type")
		if err != nil {
			return se, err
		}
		kind, known := deltaKind(dt)
		switch {
		case !known:
			return se, protocolf("unknown stream_event delta %q", dt)
		case kind == "":
			return se, nil
		}
		se.kind = kind
		se.text, err = str(d, kind)
		return se, err
	case "content_block_stop", "message_delta", "message_stop", "ping", "error":
		// No text; the CLI reports a failed request through its result.
		return se, nil
	}
	return se, protocolf("unknown stream_event %q", se.typ)
}

func (p *Parser) streamEvent(e *streamEvent) ([]wire.Chunk, error) {
	switch e.typ {
	case "message_start":
		p.stream = partial{msgID: e.msgID, blocks: map[int]*block{}}
	case "content_block_start", "content_block_delta":
		if e.kind == "" {
			return nil, nil
		}
		b, err := p.block(e.index, e.kind)
		if err != nil {
			return nil, err
		}
		return b.add(e.text), nil
	}
	return nil, nil
}

// block returns the streamed block at idx, starting it if needed.
func (p *Parser) block(idx int, kind string) (*block, error) {
	if p.stream.blocks == nil {
		p.stream.blocks = map[int]*block{}
	}
	b, ok := p.stream.blocks[idx]
	if !ok {
		b = &block{kind: kind}
		p.stream.blocks[idx] = b
		p.stream.order = append(p.stream.order, b)
	}
	if b.kind != kind {
		return nil, protocolf("stream_event %s delta for %s block %d", kind, b.kind, idx)
	}
	return b, nil
}

// add records a delta and returns its chunk.
func (b *block) add(s string) []wire.Chunk {
	if s == "" {
		return nil
	}
	b.text.WriteString(s)
	typ := wire.ChunkText
	if b.kind == "thinking" {
		typ = wire.ChunkThinking
	}
	return []wire.Chunk{{Type: typ, Content: s, IsDelta: true}}
}

func index(e map[string]any) (int, error) {
	v, ok, err := number(e, "index")
	if err != nil {
		return 0, err
	}
	if !ok || v < 0 || v != float64(int(v)) {
		return 0, protocolf("stream_event without a valid block index")
	}
	return int(v), nil
}

func (p *Parser) errorChunk(class wire.Class, msg string) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkError, Content: safe(msg), IsError: true,
		Metadata: wire.Metadata{Provider: Name, Model: p.model, SessionID: p.session, ErrorClass: class}}
}

// classify maps a declared failure to its class: by HTTP status, by the
// synthetic message's error kind, then by the text. A 5xx other than 529
// is the model API's server failure, ProviderError, whatever its text or
// kind says (docs/contract.md §1.5 and docs/contract-notes.md).
func classify(status int, kind, text string) wire.Class {
	lower := strings.ToLower(text)
	switch {
	case status == 401 || status == 403 || kind == "authentication_failed":
		return wire.ProviderAuthError
	case status == 429 || status == 529:
		// 529 is Anthropic's "overloaded": back off, like a rate limit.
		return wire.ProviderQuotaError
	case status >= 500:
		return wire.ProviderError
	case kind == "rate_limit" || kind == "billing_error":
		return wire.ProviderQuotaError
	case status == 413 || strings.Contains(lower, "prompt is too long") ||
		strings.Contains(lower, "context window") || strings.Contains(lower, "context length"):
		return wire.ProviderContextError
	}
	return wire.ProviderError
}

// safe redacts a provider message and bounds it to wire.MaxErrorText bytes
// on a UTF-8 boundary.
func safe(s string) string {
	s = wire.Redact(s)
	if len(s) <= wire.MaxErrorText {
		return s
	}
	i := wire.MaxErrorText
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

func protocolf(format string, args ...any) error {
	return wire.Errorf(wire.ProviderProtocolError, Name+": "+format, args...)
}

// str returns m[k] as a string; absent or null is "", anything else is a
// protocol error.
func str(m map[string]any, k string) (string, error) {
	switch v := m[k].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	return "", protocolf("field %q is not a string", k)
}

func boolean(m map[string]any, k string) (bool, error) {
	switch v := m[k].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	}
	return false, protocolf("field %q is not a boolean", k)
}

// number returns m[k] as a number and whether it was present.
func number(m map[string]any, k string) (float64, bool, error) {
	switch v := m[k].(type) {
	case nil:
		return 0, false, nil
	case float64:
		return v, true, nil
	}
	return 0, false, protocolf("field %q is not a number", k)
}

// message returns an event's message object and its content blocks.
func message(ev map[string]any) (map[string]any, []any, error) {
	msg, ok := ev["message"].(map[string]any)
	if !ok {
		return nil, nil, protocolf("%v event without a message object", ev["type"])
	}
	content, ok := msg["content"].([]any)
	if !ok {
		return nil, nil, protocolf("%v message content is not an array", ev["type"])
	}
	return msg, content, nil
}

// deltaKind is the kind of text ("text" or "thinking", which is also the
// delta's field holding it) a stream_event delta of type t carries, "" for
// a delta the parser passes over (a signature, tool input, a citation);
// known is false for a type the grammar does not know. The event parser
// and the line fast path both read deltas through it.
func deltaKind(t string) (kind string, known bool) {
	switch t {
	case "text_delta":
		return "text", true
	case "thinking_delta":
		return "thinking", true
	case "signature_delta", "input_json_delta", "citations_delta":
		return "", true
	}
	return "", false
}
