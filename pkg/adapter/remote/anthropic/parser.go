package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// parser maps one Messages stream, event by event, onto chunks and
// assembles the assistant turn for the checkpoint. It does no I/O. It is
// not safe for concurrent use.
type parser struct {
	tools     toolSet // the client tools of the turn, by provider name
	webSearch bool    // the web search server tool was enabled
	model     string  // the pinned model, until message_start names one

	started, stopped, failed bool

	open    *block            // the block being streamed, nil between blocks
	blocks  []json.RawMessage // the finished blocks, provider format
	callIDs map[string]bool   // tool_use and server_tool_use ids so far
	server  map[string]bool   // server_tool_use ids awaiting their result

	usage      usage
	sawUsage   bool
	stopReason string
	messageID  string
}

// block is a content block between its start and stop events.
type block struct {
	index int
	typ   string
	raw   map[string]json.RawMessage // the start block, field by field, verbatim
	text  strings.Builder            // text, thinking, or the tool input's JSON
	sig   strings.Builder            // a thinking block's signature
	cites []json.RawMessage          // a text block's citations
}

// usage is the provider's usage object; message_delta's fields are
// cumulative and replace message_start's when present.
type usage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	OutputTokensDetails      *struct {
		ThinkingTokens *int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

func newParser(tools toolSet, webSearch bool, model string) *parser {
	return &parser{tools: tools, webSearch: webSearch, model: model, callIDs: map[string]bool{}, server: map[string]bool{}}
}

// done reports whether the stream has ended: message_stop or an error event.
func (p *parser) done() bool { return p.stopped || p.failed }

func protocolf(format string, args ...any) *wire.Error {
	return wire.Errorf(wire.ProviderProtocolError, "%s: %s", Name, fmt.Sprintf(format, args...))
}

// event is the JSON of one server-sent event.
type event struct {
	Type         string          `json:"type"`
	Index        *int            `json:"index"`
	Message      json.RawMessage `json:"message"`
	ContentBlock json.RawMessage `json:"content_block"`
	Delta        json.RawMessage `json:"delta"`
	Usage        json.RawMessage `json:"usage"`
	Error        json.RawMessage `json:"error"`
}

// event handles one server-sent event: name is its event field, data its
// data. It returns the chunks the event completes, or a
// ProviderProtocolError for an event that breaks the wire format (then
// nothing more may be fed).
func (p *parser) event(name string, data []byte) ([]wire.Chunk, error) {
	if p.done() {
		return nil, protocolf("event %q after the end of the message", name)
	}
	var ev event
	if err := strictObject(data, &ev); err != nil {
		return nil, protocolf("event %q: %v", name, err)
	}
	if ev.Type == "" {
		return nil, protocolf("event %q has no type", name)
	}
	if name != "message" && name != ev.Type {
		return nil, protocolf("event %q carries data of type %q", name, ev.Type)
	}
	switch ev.Type {
	case "ping":
		return nil, nil
	case "error":
		return p.errorEvent(ev)
	case "message_start":
		return p.messageStart(ev)
	}
	if !p.started {
		return nil, protocolf("%s before message_start", ev.Type)
	}
	switch ev.Type {
	case "content_block_start":
		return p.blockStart(ev)
	case "content_block_delta":
		return p.blockDelta(ev)
	case "content_block_stop":
		return p.blockStop(ev)
	case "message_delta":
		return nil, p.messageDelta(ev)
	case "message_stop":
		return p.messageStop()
	}
	// The provider may add event types; one this adapter does not know
	// could carry content, so it is refused, never dropped (docs/contract.md §1.3).
	return nil, protocolf("unknown event type %q", ev.Type)
}

// end is called at a clean end of the body: a stream must end with
// message_stop or an error event.
func (p *parser) end() error {
	switch {
	case p.done():
		return nil
	case !p.started:
		return protocolf("the stream ended before message_start")
	default:
		return protocolf("the stream ended before message_stop")
	}
}

func (p *parser) errorEvent(ev event) ([]wire.Chunk, error) {
	var e struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if err := strictObject(ev.Error, &e); err != nil {
		return nil, protocolf("error event: %v", err)
	}
	if e.Type == "" {
		e.Type = "error"
	}
	msg := e.Message
	if msg == "" {
		msg = "(no message)"
	}
	we := wire.Errorf(errorClass(e.Type, e.Message), "%s: %s: %s", Name, e.Type, msg)
	p.failed = true
	return []wire.Chunk{{Type: wire.ChunkError, Content: we.Message, IsError: true,
		Metadata: wire.Metadata{ErrorClass: we.Class}}}, nil
}

func (p *parser) messageStart(ev event) ([]wire.Chunk, error) {
	if p.started {
		return nil, protocolf("a second message_start")
	}
	var m struct {
		ID      string            `json:"id"`
		Type    string            `json:"type"`
		Role    string            `json:"role"`
		Model   string            `json:"model"`
		Content []json.RawMessage `json:"content"`
		Usage   json.RawMessage   `json:"usage"`
	}
	if err := strictObject(ev.Message, &m); err != nil {
		return nil, protocolf("message_start: message: %v", err)
	}
	if m.Role != "" && m.Role != "assistant" {
		return nil, protocolf("message_start: role %q, want assistant", m.Role)
	}
	if len(m.Content) > 0 {
		// Content arrives only as blocks; a pre-filled message is not the
		// streaming format.
		return nil, protocolf("message_start: the message already holds %d content blocks", len(m.Content))
	}
	if err := p.addUsage(m.Usage); err != nil {
		return nil, err
	}
	p.started = true
	p.messageID = m.ID
	if m.Model != "" {
		p.model = m.Model
	}
	caps := Capabilities
	return []wire.Chunk{{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: Name, Model: p.model, Capabilities: &caps}}}, nil
}

func (p *parser) addUsage(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var u usage
	if err := strictObject(raw, &u); err != nil {
		return protocolf("usage: %v", err)
	}
	for _, n := range []*int64{u.InputTokens, u.OutputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens} {
		if n != nil && *n < 0 {
			return protocolf("usage: a negative token count")
		}
	}
	if d := u.OutputTokensDetails; d != nil && d.ThinkingTokens != nil && *d.ThinkingTokens < 0 {
		return protocolf("usage: a negative token count")
	}
	set := func(dst **int64, src *int64) {
		if src != nil {
			*dst = src
		}
	}
	set(&p.usage.InputTokens, u.InputTokens)
	set(&p.usage.OutputTokens, u.OutputTokens)
	set(&p.usage.CacheCreationInputTokens, u.CacheCreationInputTokens)
	set(&p.usage.CacheReadInputTokens, u.CacheReadInputTokens)
	if u.OutputTokensDetails != nil {
		p.usage.OutputTokensDetails = u.OutputTokensDetails
	}
	p.sawUsage = true
	return nil
}

// wireUsage maps the provider's usage onto the disjoint token classes:
// input_tokens already excludes the cached parts, so it is the input
// class as is; cache_read_input_tokens and cache_creation_input_tokens are
// the cache read and cache write classes; output_tokens includes the
// thinking tokens, so when output_tokens_details.thinking_tokens is given
// they are moved out of output into the reasoning class (and without it
// thinking stays inside output, uncounted separately). Nothing is counted
// twice.
func (p *parser) wireUsage() *wire.Usage {
	if !p.sawUsage {
		return nil
	}
	val := func(n *int64) int64 {
		if n == nil {
			return 0
		}
		return *n
	}
	u := &wire.Usage{
		InputTokens:      val(p.usage.InputTokens),
		OutputTokens:     val(p.usage.OutputTokens),
		CacheReadTokens:  val(p.usage.CacheReadInputTokens),
		CacheWriteTokens: val(p.usage.CacheCreationInputTokens),
	}
	if d := p.usage.OutputTokensDetails; d != nil {
		thinking := min(val(d.ThinkingTokens), u.OutputTokens)
		u.OutputTokens -= thinking
		u.ReasoningTokens = thinking
	}
	return u
}

func (p *parser) blockStart(ev event) ([]wire.Chunk, error) {
	if p.open != nil {
		return nil, protocolf("content_block_start while block %d is open", p.open.index)
	}
	if ev.Index == nil || *ev.Index != len(p.blocks) {
		return nil, protocolf("content_block_start: index %s, want %d", showIndex(ev.Index), len(p.blocks))
	}
	var raw map[string]json.RawMessage
	if err := strictObject(ev.ContentBlock, &raw); err != nil {
		return nil, protocolf("content_block_start: content_block: %v", err)
	}
	b := &block{index: *ev.Index, raw: raw}
	if err := field(raw, "type", &b.typ, true); err != nil {
		return nil, err
	}
	var chunks []wire.Chunk
	switch b.typ {
	case "text":
		var text string
		if err := field(raw, "text", &text, false); err != nil {
			return nil, err
		}
		if !isNull(raw["citations"]) {
			if err := json.Unmarshal(raw["citations"], &b.cites); err != nil {
				return nil, protocolf("text block: citations: %v", err)
			}
		}
		b.text.WriteString(text)
		if text != "" {
			chunks = append(chunks, wire.Chunk{Type: wire.ChunkText, Content: text, IsDelta: true})
		}
	case "thinking":
		var thinking, sig string
		if err := field(raw, "thinking", &thinking, false); err != nil {
			return nil, err
		}
		if err := field(raw, "signature", &sig, false); err != nil {
			return nil, err
		}
		b.text.WriteString(thinking)
		b.sig.WriteString(sig)
		if thinking != "" {
			chunks = append(chunks, wire.Chunk{Type: wire.ChunkThinking, Content: thinking, IsDelta: true})
		}
	case "redacted_thinking":
		var data string
		if err := field(raw, "data", &data, true); err != nil {
			return nil, err
		}
	case "tool_use", "server_tool_use":
		var id, name string
		if err := field(raw, "id", &id, true); err != nil {
			return nil, err
		}
		if err := field(raw, "name", &name, true); err != nil {
			return nil, err
		}
		if p.callIDs[id] {
			return nil, protocolf("%s: id %q is used twice", b.typ, id)
		}
		p.callIDs[id] = true
		if b.typ == "tool_use" {
			if _, ok := p.tools[name]; !ok {
				return nil, protocolf("tool_use of %q, a tool the request did not declare", name)
			}
		} else {
			if !p.webSearch || name != webSearchName {
				return nil, protocolf("server_tool_use of %q, a server tool the request did not enable", name)
			}
			p.server[id] = true
		}
	case "web_search_tool_result":
		var id string
		if err := field(raw, "tool_use_id", &id, true); err != nil {
			return nil, err
		}
		if !p.server[id] {
			return nil, protocolf("web_search_tool_result for %q, which no server_tool_use of this message started", id)
		}
		delete(p.server, id)
		if isNull(raw["content"]) {
			return nil, protocolf("web_search_tool_result without content")
		}
	default:
		return nil, protocolf("unknown content block type %q", b.typ)
	}
	p.open = b
	return chunks, nil
}

func (p *parser) blockDelta(ev event) ([]wire.Chunk, error) {
	b := p.open
	if b == nil || ev.Index == nil || *ev.Index != b.index {
		return nil, protocolf("content_block_delta for index %s, which is not the open block", showIndex(ev.Index))
	}
	var d map[string]json.RawMessage
	if err := strictObject(ev.Delta, &d); err != nil {
		return nil, protocolf("content_block_delta: delta: %v", err)
	}
	var typ string
	if err := field(d, "type", &typ, true); err != nil {
		return nil, err
	}
	// A delta's string may be empty (the first input_json_delta of a
	// tool call usually is), but it must be there.
	str := func(key string) (string, error) {
		var s string
		raw, ok := d[key]
		if !ok || json.Unmarshal(raw, &s) != nil {
			return "", protocolf("%s: field %q is not a string", typ, key)
		}
		return s, nil
	}
	switch {
	case typ == "text_delta" && b.typ == "text":
		s, err := str("text")
		if err != nil || s == "" {
			return nil, err
		}
		b.text.WriteString(s)
		return []wire.Chunk{{Type: wire.ChunkText, Content: s, IsDelta: true}}, nil
	case typ == "citations_delta" && b.typ == "text":
		c, ok := d["citation"]
		if !ok || isNull(c) || !json.Valid(c) {
			return nil, protocolf("citations_delta without a citation")
		}
		b.cites = append(b.cites, c)
		return nil, nil
	case typ == "thinking_delta" && b.typ == "thinking":
		s, err := str("thinking")
		if err != nil || s == "" {
			return nil, err
		}
		b.text.WriteString(s)
		return []wire.Chunk{{Type: wire.ChunkThinking, Content: s, IsDelta: true}}, nil
	case typ == "signature_delta" && b.typ == "thinking":
		s, err := str("signature")
		if err != nil {
			return nil, err
		}
		b.sig.WriteString(s)
		return nil, nil
	case typ == "input_json_delta" && (b.typ == "tool_use" || b.typ == "server_tool_use"):
		s, err := str("partial_json")
		if err != nil {
			return nil, err
		}
		b.text.WriteString(s)
		return nil, nil
	}
	return nil, protocolf("delta %q in a %s block", typ, b.typ)
}

func (p *parser) blockStop(ev event) ([]wire.Chunk, error) {
	b := p.open
	if b == nil || ev.Index == nil || *ev.Index != b.index {
		return nil, protocolf("content_block_stop for index %s, which is not the open block", showIndex(ev.Index))
	}
	var chunks []wire.Chunk
	set := func(key string, v any) error {
		j, err := json.Marshal(v)
		if err != nil {
			return protocolf("%s block: %v", b.typ, err)
		}
		b.raw[key] = j
		return nil
	}
	switch b.typ {
	case "text":
		if err := set("text", b.text.String()); err != nil {
			return nil, err
		}
		if len(b.cites) > 0 {
			if err := set("citations", b.cites); err != nil {
				return nil, err
			}
		}
	case "thinking":
		if b.sig.Len() == 0 {
			// An unsigned thinking block cannot be sent back: the
			// conversation could not continue.
			return nil, protocolf("a thinking block without a signature")
		}
		if err := set("thinking", b.text.String()); err != nil {
			return nil, err
		}
		if err := set("signature", b.sig.String()); err != nil {
			return nil, err
		}
	case "tool_use", "server_tool_use":
		input := []byte(b.text.String())
		if len(bytes.TrimSpace(input)) == 0 {
			input = b.raw["input"]
		}
		if isNull(input) {
			input = []byte("{}")
		}
		var args map[string]any
		if err := strictObject(input, &args); err != nil {
			return nil, protocolf("%s %s: input: %v", b.typ, unquote(b.raw["id"]), err)
		}
		b.raw["input"] = json.RawMessage(input)
		name := unquote(b.raw["name"])
		if b.typ == "tool_use" {
			name = p.tools[name].Name // the canonical name, restored
		}
		chunks = append(chunks, wire.Chunk{Type: wire.ChunkToolUse, ToolID: unquote(b.raw["id"]), ToolName: name, ToolInput: args})
	case "web_search_tool_result":
		out, isErr, err := searchOutput(b.raw["content"])
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, wire.Chunk{Type: wire.ChunkToolResult, ToolID: unquote(b.raw["tool_use_id"]), ToolOutput: out, IsError: isErr})
	}
	j, err := json.Marshal(b.raw)
	if err != nil {
		return nil, protocolf("%s block: %v", b.typ, err)
	}
	p.blocks = append(p.blocks, j)
	p.open = nil
	return chunks, nil
}

// searchOutput is a web search result's content as a tool_result chunk
// carries it: the results without their encrypted_content (provider-only
// data that stays in the checkpoint), or the error object.
func searchOutput(raw json.RawMessage) (any, bool, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, false, protocolf("web_search_tool_result: content: %v", err)
	}
	switch c := v.(type) {
	case []any:
		out := make([]any, 0, len(c))
		for _, r := range c {
			m, ok := r.(map[string]any)
			if !ok {
				return nil, false, protocolf("web_search_tool_result: a result is not an object")
			}
			out = append(out, withoutEncrypted(m))
		}
		return out, false, nil
	case map[string]any:
		return withoutEncrypted(c), c["type"] == "web_search_tool_result_error", nil
	}
	return nil, false, protocolf("web_search_tool_result: content is neither a list nor an error object")
}

func withoutEncrypted(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if !strings.HasPrefix(k, "encrypted_") {
			out[k] = v
		}
	}
	return out
}

func (p *parser) messageDelta(ev event) error {
	if p.open != nil {
		return protocolf("message_delta while block %d is open", p.open.index)
	}
	var d struct {
		StopReason *string `json:"stop_reason"`
	}
	if !isNull(ev.Delta) {
		if err := strictObject(ev.Delta, &d); err != nil {
			return protocolf("message_delta: delta: %v", err)
		}
	}
	if d.StopReason != nil {
		p.stopReason = *d.StopReason
	}
	return p.addUsage(ev.Usage)
}

func (p *parser) messageStop() ([]wire.Chunk, error) {
	if p.open != nil {
		return nil, protocolf("message_stop while block %d is open", p.open.index)
	}
	if len(p.server) > 0 {
		return nil, protocolf("message_stop with a server tool call that has no result")
	}
	p.stopped = true
	return []wire.Chunk{{Type: wire.ChunkResult, Metadata: wire.Metadata{Usage: p.wireUsage(), StopReason: p.stopReason}}}, nil
}

// assistantTurn is the finished message's content blocks as one JSON
// array, for the checkpoint; nil when the message had none.
func (p *parser) assistantTurn() json.RawMessage {
	if len(p.blocks) == 0 {
		return nil
	}
	out := []byte{'['}
	for i, b := range p.blocks {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	return append(out, ']')
}

// errorClass types a provider error by its documented error type, and an
// invalid request by its message when it says the context is too long.
func errorClass(typ, msg string) wire.Class {
	switch typ {
	case "overloaded_error", "rate_limit_error", "billing_error":
		return wire.ProviderQuotaError
	case "authentication_error", "permission_error":
		return wire.ProviderAuthError
	case "request_too_large":
		return wire.ProviderContextError
	}
	if contextText(msg) {
		return wire.ProviderContextError
	}
	return wire.ProviderError
}

// contextText reports whether an error message says the prompt does not
// fit the context window, in the provider's wordings ("prompt is too long:
// 215000 tokens > 200000 maximum", "input length and `max_tokens` exceed
// context limit: …").
func contextText(msg string) bool {
	low := strings.ToLower(msg)
	for _, s := range []string{"prompt is too long", "context limit", "context window", "context length", "context_length"} {
		if strings.Contains(low, s) {
			return true
		}
	}
	return false
}

// strictObject decodes data, which must be one JSON object, into v.
func strictObject(data []byte, v any) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return fmt.Errorf("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		return fmt.Errorf("data after the JSON object")
	}
	return nil
}

// field decodes the string field key of an object; a required one must be
// present and non-empty.
func field(m map[string]json.RawMessage, key string, dst *string, required bool) error {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		if required {
			return protocolf("field %q is missing", key)
		}
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return protocolf("field %q is not a string", key)
	}
	if required && *dst == "" {
		return protocolf("field %q is empty", key)
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

func unquote(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func showIndex(i *int) string {
	if i == nil {
		return "(none)"
	}
	return fmt.Sprint(*i)
}
