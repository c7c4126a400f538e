package openai

import (
	"encoding/json"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/sse"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// The wire shapes of the streaming events this adapter reads (the Responses
// API's ResponseStreamEvent union, flattened: only the fields it uses).
type (
	apiEvent struct {
		Type      string       `json:"type"`
		ItemID    string       `json:"item_id"`
		Delta     *string      `json:"delta"`
		Arguments *string      `json:"arguments"`
		Item      *apiItem     `json:"item"`
		Response  *apiResponse `json:"response"`
		// The error event: {code, message, param} at the top level; an
		// error nested as {"error": {type, code, message}} is read too.
		Code    *string   `json:"code"`
		Message *string   `json:"message"`
		Error   *apiError `json:"error"`
	}
	apiItem struct {
		ID               string    `json:"id"`
		Type             string    `json:"type"`
		Status           string    `json:"status"`
		Role             string    `json:"role"`
		Content          []apiPart `json:"content"`
		Summary          []apiPart `json:"summary"`
		EncryptedContent *string   `json:"encrypted_content"`
		CallID           string    `json:"call_id"`
		Name             string    `json:"name"`
		Arguments        *string   `json:"arguments"`
	}
	apiPart struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	apiResponse struct {
		ID                string    `json:"id"`
		Model             string    `json:"model"`
		Status            string    `json:"status"`
		Error             *apiError `json:"error"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Usage *apiUsage `json:"usage"`
	}
	apiError struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	apiUsage struct {
		InputTokens        int64 `json:"input_tokens"`
		InputTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int64 `json:"output_tokens"`
		OutputTokensDetails *struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int64 `json:"total_tokens"`
	}
)

// telemetry are the events that carry nothing a chunk or the checkpoint
// needs: lifecycle, part boundaries, and "done" events whose content the
// deltas and response.output_item.done already carried. They are dropped.
var telemetry = map[string]bool{
	"response.queued":                       true,
	"response.in_progress":                  true,
	"response.content_part.added":           true,
	"response.content_part.done":            true,
	"response.output_text.done":             true,
	"response.output_text.annotation.added": true,
	"response.refusal.done":                 true,
	"response.reasoning_summary_part.added": true,
	"response.reasoning_summary_part.done":  true,
	"response.reasoning_summary_text.done":  true,
	"response.reasoning_text.done":          true,
	"keepalive":                             true,
}

// Output item types.
const (
	itemMessage   = "message"
	itemReasoning = "reasoning"
	itemCall      = "function_call"
)

// parser turns one response's events into chunks. It is not safe for
// concurrent use. After feed reports the end, or an error, it must not be
// fed again.
type parser struct {
	model string            // the pinned model, named when the response names none
	tools map[string]string // alias → canonical tool name
	caps  wire.Capabilities

	created  bool
	respID   string
	items    map[string]*track
	order    []*track
	callIDs  map[string]bool
	toolUses int

	// Set by response.completed or response.incomplete.
	completed bool
	history   []item // the response's output items, in order
}

// track is one output item as it streams.
type track struct {
	id, typ      string
	alias, name  string // function_call: the wire name and the canonical one
	callID       string
	args         strings.Builder
	argDeltas    bool
	argsDone     *string
	shown        strings.Builder // message: text and refusal deltas emitted
	shownDeltas  bool
	summary      strings.Builder // reasoning summary deltas emitted
	summaryDelta bool
	content      strings.Builder // raw reasoning deltas emitted
	contentDelta bool
	done         bool
	hist         *item
}

func newParser(model string, tools map[string]string) *parser {
	return &parser{model: model, tools: tools, caps: Capabilities,
		items: map[string]*track{}, callIDs: map[string]bool{}}
}

func protocolf(format string, args ...any) *wire.Error {
	return wire.Errorf(wire.ProviderProtocolError, Name+": "+format, args...)
}

// feed handles one server-sent event. It returns the chunks to yield in
// order; end is true when the response reached its terminal event (then
// the last chunk is the result or the one error chunk). An event this
// adapter does not know, or a malformed one, is a ProviderProtocolError.
func (p *parser) feed(ev sse.Event) (chunks []wire.Chunk, end bool, err error) {
	var e apiEvent
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return nil, false, protocolf("event %.64q: malformed data: %v", ev.Event, err)
	}
	if e.Type == "" {
		return nil, false, protocolf("event %.64q: data has no type", ev.Event)
	}
	if ev.Event != "message" && ev.Event != e.Type {
		return nil, false, protocolf("event %.64q carries data of type %.64q", ev.Event, e.Type)
	}
	if !p.created && e.Type != "response.created" && e.Type != "error" {
		return nil, false, protocolf("%.64q before response.created", e.Type)
	}
	if telemetry[e.Type] {
		return nil, false, nil
	}
	switch e.Type {
	case "response.created":
		if p.created {
			return nil, false, protocolf("a second response.created")
		}
		if e.Response == nil {
			return nil, false, protocolf("response.created without a response")
		}
		p.created, p.respID = true, e.Response.ID
		model := e.Response.Model
		if model == "" {
			model = p.model
		}
		caps := p.caps
		return []wire.Chunk{{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: Name, Model: model, Capabilities: &caps}}}, false, nil
	case "response.output_item.added":
		if e.Item == nil {
			return nil, false, protocolf("%s without an item", e.Type)
		}
		_, err := p.track(e.Item)
		return nil, false, err
	case "response.output_text.delta", "response.refusal.delta":
		t, d, err := p.delta(e, itemMessage)
		if err != nil || d == "" {
			return nil, false, err
		}
		t.shown.WriteString(d)
		t.shownDeltas = true
		return []wire.Chunk{{Type: wire.ChunkText, Content: d, IsDelta: true}}, false, nil
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		t, d, err := p.delta(e, itemReasoning)
		if err != nil || d == "" {
			return nil, false, err
		}
		if e.Type == "response.reasoning_text.delta" {
			t.content.WriteString(d)
			t.contentDelta = true
		} else {
			t.summary.WriteString(d)
			t.summaryDelta = true
		}
		return []wire.Chunk{{Type: wire.ChunkThinking, Content: d, IsDelta: true}}, false, nil
	case "response.function_call_arguments.delta":
		t, d, err := p.delta(e, itemCall)
		if err != nil {
			return nil, false, err
		}
		t.args.WriteString(d)
		t.argDeltas = true
		return nil, false, nil
	case "response.function_call_arguments.done":
		t, err := p.itemOf(e, itemCall)
		if err != nil {
			return nil, false, err
		}
		if e.Arguments == nil {
			return nil, false, protocolf("%s for item %.64q without arguments", e.Type, e.ItemID)
		}
		t.argsDone = e.Arguments
		return nil, false, nil
	case "response.output_item.done":
		if e.Item == nil {
			return nil, false, protocolf("%s without an item", e.Type)
		}
		c, err := p.finish(e.Item)
		return c, false, err
	case "response.completed", "response.incomplete":
		c, err := p.complete(e)
		return c, err == nil, err
	case "response.failed":
		var ae apiError
		if e.Response != nil && e.Response.Error != nil {
			ae = *e.Response.Error
		}
		return []wire.Chunk{errorChunk(ae, "the response failed")}, true, nil
	case "error":
		var ae apiError
		if e.Error != nil {
			ae = *e.Error
		}
		if e.Code != nil {
			ae.Code = *e.Code
		}
		if e.Message != nil {
			ae.Message = *e.Message
		}
		return []wire.Chunk{errorChunk(ae, "the stream reported an error")}, true, nil
	}
	return nil, false, protocolf("unknown event type %.64q", e.Type)
}

// track registers an output item when it is added.
func (p *parser) track(it *apiItem) (*track, error) {
	if it.ID == "" {
		return nil, protocolf("a %.64q output item without an id", it.Type)
	}
	if _, dup := p.items[it.ID]; dup {
		return nil, protocolf("output item %.64q added twice", it.ID)
	}
	t := &track{id: it.ID, typ: it.Type}
	switch it.Type {
	case itemMessage:
		if it.Role != "" && it.Role != "assistant" {
			return nil, protocolf("output message %.64q has role %.64q", it.ID, it.Role)
		}
	case itemReasoning:
	case itemCall:
		if it.CallID == "" {
			return nil, protocolf("function call %.64q without a call_id", it.ID)
		}
		if p.callIDs[it.CallID] {
			return nil, protocolf("call_id %.64q used twice", it.CallID)
		}
		name, ok := p.tools[it.Name]
		if !ok {
			return nil, protocolf("the model called function %.64q, which the request did not declare", it.Name)
		}
		p.callIDs[it.CallID] = true
		t.alias, t.name, t.callID = it.Name, name, it.CallID
	default:
		// Hosted tools, custom tools and the like are never requested.
		return nil, protocolf("output item %.64q of type %.64q, which this adapter does not request", it.ID, it.Type)
	}
	p.items[it.ID] = t
	p.order = append(p.order, t)
	return t, nil
}

// itemOf returns the open output item an event refers to.
func (p *parser) itemOf(e apiEvent, typ string) (*track, error) {
	t := p.items[e.ItemID]
	switch {
	case t == nil:
		return nil, protocolf("%s for unknown item %.64q", e.Type, e.ItemID)
	case t.typ != typ:
		return nil, protocolf("%s for item %.64q, a %s", e.Type, e.ItemID, t.typ)
	case t.done:
		return nil, protocolf("%s for item %.64q after it was done", e.Type, e.ItemID)
	}
	return t, nil
}

// delta returns a delta event's item and text.
func (p *parser) delta(e apiEvent, typ string) (*track, string, error) {
	t, err := p.itemOf(e, typ)
	if err != nil {
		return nil, "", err
	}
	if e.Delta == nil {
		return nil, "", protocolf("%s for item %.64q without a delta", e.Type, e.ItemID)
	}
	return t, *e.Delta, nil
}

// finish completes an output item: the complete function call becomes one
// tool_use chunk; content that arrived with no deltas becomes a complete
// (is_delta=false) chunk; content that did arrive as deltas must equal them.
func (p *parser) finish(it *apiItem) ([]wire.Chunk, error) {
	t := p.items[it.ID]
	if t == nil {
		var err error
		if t, err = p.track(it); err != nil {
			return nil, err
		}
	}
	if t.done {
		return nil, protocolf("output item %.64q done twice", it.ID)
	}
	if it.Type != t.typ {
		return nil, protocolf("output item %.64q was added as %.64q and is done as %.64q", it.ID, t.typ, it.Type)
	}
	t.done = true
	switch t.typ {
	case itemMessage:
		return p.finishMessage(t, it)
	case itemReasoning:
		return p.finishReasoning(t, it)
	}
	return p.finishCall(t, it)
}

func (p *parser) finishMessage(t *track, it *apiItem) ([]wire.Chunk, error) {
	var text, refusal, all strings.Builder
	for _, part := range it.Content {
		switch part.Type {
		case "output_text":
			text.WriteString(part.Text)
			all.WriteString(part.Text)
		case "refusal":
			refusal.WriteString(part.Refusal)
			all.WriteString(part.Refusal)
		default:
			return nil, protocolf("message %.64q has a content part of type %.64q", t.id, part.Type)
		}
	}
	if text.Len() > 0 || refusal.Len() > 0 {
		t.hist = &item{Kind: kindAssistant, Text: text.String(), Refusal: refusal.String()}
	}
	return settle(t.id, "text", wire.ChunkText, t.shownDeltas, t.shown.String(), []string{all.String()})
}

func (p *parser) finishReasoning(t *track, it *apiItem) ([]wire.Chunk, error) {
	var summary, content []string
	for _, part := range it.Summary {
		if part.Type != "summary_text" {
			return nil, protocolf("reasoning %.64q has a summary part of type %.64q", t.id, part.Type)
		}
		summary = append(summary, part.Text)
	}
	for _, part := range it.Content {
		if part.Type != "reasoning_text" {
			return nil, protocolf("reasoning %.64q has a content part of type %.64q", t.id, part.Type)
		}
		content = append(content, part.Text)
	}
	// Only an item with its encrypted content can be replayed statelessly.
	if it.EncryptedContent != nil && *it.EncryptedContent != "" {
		t.hist = &item{Kind: kindReasoning, Summary: summary, Encrypted: *it.EncryptedContent}
	}
	a, err := settle(t.id, "reasoning summary", wire.ChunkThinking, t.summaryDelta, t.summary.String(), summary)
	if err != nil {
		return nil, err
	}
	b, err := settle(t.id, "reasoning text", wire.ChunkThinking, t.contentDelta, t.content.String(), content)
	return append(a, b...), err
}

// settle checks content that streamed as deltas against the completed
// item's parts, or returns the parts as complete chunks when nothing
// streamed.
func settle(id, what string, typ wire.ChunkType, streamed bool, deltas string, parts []string) ([]wire.Chunk, error) {
	if streamed {
		if strings.Join(parts, "") != deltas {
			return nil, protocolf("item %.64q: the completed %s differs from its streamed deltas", id, what)
		}
		return nil, nil
	}
	var out []wire.Chunk
	for _, s := range parts {
		if s != "" {
			out = append(out, wire.Chunk{Type: typ, Content: s})
		}
	}
	return out, nil
}

func (p *parser) finishCall(t *track, it *apiItem) ([]wire.Chunk, error) {
	if it.Name != "" && it.Name != t.alias {
		return nil, protocolf("function call %.64q was added as %.64q and is done as %.64q", t.id, t.alias, it.Name)
	}
	if it.CallID != "" && it.CallID != t.callID {
		return nil, protocolf("function call %.64q changed its call_id", t.id)
	}
	if it.Status == "incomplete" {
		// Cut off (max_output_tokens): its arguments are partial. It is
		// neither a tool_use nor part of the history.
		return nil, nil
	}
	// The arguments as the deltas assembled them, as the done event and as
	// the completed item carry them: whichever are present must agree.
	var args *string
	for _, s := range []*string{ptrIf(t.argDeltas, t.args.String()), t.argsDone, it.Arguments} {
		switch {
		case s == nil:
		case args == nil:
			args = s
		case *args != *s:
			return nil, protocolf("function call %.64q: its arguments differ between the deltas, the done event and the item", t.id)
		}
	}
	final := ""
	if args != nil {
		final = *args
	}
	input, err := parseArguments(final)
	if err != nil {
		return nil, protocolf("function call %.64q (%s): %v", t.id, t.name, err)
	}
	p.toolUses++
	t.hist = &item{Kind: kindCall, CallID: t.callID, Name: t.name, Arguments: final}
	return []wire.Chunk{{Type: wire.ChunkToolUse, ToolID: t.callID, ToolName: t.name, ToolInput: input}}, nil
}

func ptrIf(ok bool, s string) *string {
	if !ok {
		return nil
	}
	return &s
}

// complete handles response.completed and response.incomplete: the
// history of the response and the one result chunk.
func (p *parser) complete(e apiEvent) ([]wire.Chunk, error) {
	r := e.Response
	if r == nil {
		return nil, protocolf("%s without a response", e.Type)
	}
	if p.respID != "" && r.ID != "" && r.ID != p.respID {
		return nil, protocolf("%s for another response than the one created", e.Type)
	}
	if r.ID != "" {
		p.respID = r.ID
	}
	md := wire.Metadata{}
	switch e.Type {
	case "response.completed":
		if r.Status != "" && r.Status != "completed" {
			return nil, protocolf("response.completed with status %.64q", r.Status)
		}
		for _, t := range p.order {
			if !t.done {
				return nil, protocolf("the response completed, but output item %.64q never did", t.id)
			}
		}
		md.StopReason = "end_turn"
	default:
		md.StopReason = "max_tokens"
		if d := r.IncompleteDetails; d != nil && d.Reason != "" && d.Reason != "max_output_tokens" {
			md.StopReason = d.Reason // "content_filter"
		}
	}
	if p.toolUses > 0 {
		md.StopReason = "tool_use" // the calls are pending whatever else stopped the turn
	}
	if r.Usage != nil {
		u, err := usageOf(r.Usage)
		if err != nil {
			return nil, err
		}
		md.Usage = u
	}
	for _, t := range p.order {
		if t.hist != nil {
			p.history = append(p.history, *t.hist)
		}
	}
	p.completed = true
	return []wire.Chunk{{Type: wire.ChunkResult, Metadata: md}}, nil
}

// usageOf splits the provider's usage into disjoint token classes, so no
// token is counted (or priced) twice: OpenAI's input_tokens include the
// cached ones and its output_tokens include the reasoning ones.
//
//	input_tokens                              → input_tokens - cached_tokens
//	input_tokens_details.cached_tokens        → cache_read_tokens
//	output_tokens                             → output_tokens - reasoning_tokens
//	output_tokens_details.reasoning_tokens    → reasoning_tokens
//	(no cache-write class: OpenAI does not bill cache writes)
func usageOf(u *apiUsage) (*wire.Usage, error) {
	var cached, reasoning int64
	if u.InputTokensDetails != nil {
		cached = u.InputTokensDetails.CachedTokens
	}
	if u.OutputTokensDetails != nil {
		reasoning = u.OutputTokensDetails.ReasoningTokens
	}
	switch {
	case u.InputTokens < 0 || u.OutputTokens < 0 || cached < 0 || reasoning < 0 || u.TotalTokens < 0:
		return nil, protocolf("usage has a negative token count")
	case cached > u.InputTokens:
		return nil, protocolf("usage: %d cached tokens of %d input tokens", cached, u.InputTokens)
	case reasoning > u.OutputTokens:
		return nil, protocolf("usage: %d reasoning tokens of %d output tokens", reasoning, u.OutputTokens)
	case u.TotalTokens != 0 && u.TotalTokens != u.InputTokens+u.OutputTokens:
		return nil, protocolf("usage: total_tokens %d is not input %d + output %d", u.TotalTokens, u.InputTokens, u.OutputTokens)
	}
	return &wire.Usage{
		InputTokens:     u.InputTokens - cached,
		CacheReadTokens: cached,
		OutputTokens:    u.OutputTokens - reasoning,
		ReasoningTokens: reasoning,
	}, nil
}

// errorChunk is the one error chunk of a provider-declared failure, with
// a safe (bounded, redacted) message and the typed class.
func errorChunk(e apiError, fallback string) wire.Chunk {
	class := errorClass(e)
	text := e.Message
	if text == "" {
		text = fallback
	}
	if e.Code != "" {
		// After the message, not before: "invalid_api_key: …" reads as a
		// key assignment to wire.Redact, which would swallow the message.
		text += " (" + e.Code + ")"
	}
	we := wire.Errorf(class, "%s: %s", Name, text)
	return wire.Chunk{Type: wire.ChunkError, Content: we.Message, IsError: true, Metadata: wire.Metadata{ErrorClass: class}}
}

// errorClass types a provider-declared failure by its code (and type):
// rate and quota limits, context length, authentication; anything else
// (server_error included) is a ProviderError.
func errorClass(e apiError) wire.Class {
	code, typ, msg := strings.ToLower(e.Code), strings.ToLower(e.Type), strings.ToLower(e.Message)
	switch {
	case code == "rate_limit_exceeded" || code == "insufficient_quota" || code == "slow_down" ||
		typ == "insufficient_quota" || typ == "rate_limit_error" || strings.Contains(msg, "overloaded"):
		return wire.ProviderQuotaError
	case code == "context_length_exceeded" || strings.Contains(msg, "context window") || strings.Contains(msg, "maximum context length"):
		return wire.ProviderContextError
	case code == "invalid_api_key" || typ == "authentication_error":
		return wire.ProviderAuthError
	}
	return wire.ProviderError
}
