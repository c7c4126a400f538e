package anthropic

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// DefaultMaxTokens is the output cap of a turn whose request sets no
// max_tokens; with thinking_budget set the budget is added to it.
const DefaultMaxTokens = 8192

// checkpointVersion is the version of the checkpoint encoding.
const checkpointVersion = 1

// checkpoint is the adapter's continuation state of a conversation, as
// call.SaveCheckpoint receives it (msgpack, wire.Marshal): the history in
// the provider's own message format, including the signed thinking and
// redacted thinking blocks of the assistant turns, which are sent back
// verbatim and never enter a chunk, and the settings a continuation
// inherits. It is opaque to the mesh.
type checkpoint struct {
	V     int    `msgpack:"v"`
	Model string `msgpack:"model"`
	// The conversation's settings; a continuation inherits each one its
	// request does not set.
	System           string            `msgpack:"system,omitempty"`
	Tools            []toolschema.Tool `msgpack:"tools,omitempty"`
	WebSearchMaxUses int               `msgpack:"web_search_max_uses,omitempty"`
	ThinkingBudget   int               `msgpack:"thinking_budget,omitempty"`
	// Messages alternate user and assistant turns, oldest first.
	Messages []turn `msgpack:"messages"`
	// MessageID is the provider's id of the last response, kept for
	// telemetry only: it is never sent and never enters a chunk.
	MessageID  string `msgpack:"message_id,omitempty"`
	StopReason string `msgpack:"stop_reason,omitempty"`
}

// turn is one message of the history.
type turn struct {
	Role string `msgpack:"role"`
	// Content is the message's content blocks, a JSON array, byte for
	// byte as they were sent or assembled from the stream.
	Content []byte `msgpack:"content"`
}

// call is a client tool call of the last assistant turn that awaits its
// result.
type call struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"` // the provider name
	Input json.RawMessage `json:"input"`
}

// decodeCheckpoint reads the conversation's state; model is the pinned
// model, which must be the conversation's.
func decodeCheckpoint(b []byte, model string) (checkpoint, error) {
	var cp checkpoint
	if err := wire.DecodeStrict(b, &cp); err != nil {
		return cp, validationf("the conversation's checkpoint is not an %s checkpoint: %v", Name, err)
	}
	if cp.V != checkpointVersion {
		return cp, validationf("the conversation's checkpoint has version %d, want %d", cp.V, checkpointVersion)
	}
	if cp.Model != model {
		return cp, wire.Errorf(wire.PinMismatch, "%s: the conversation runs on model %q, the run is pinned to %q", Name, cp.Model, model)
	}
	for i, t := range cp.Messages {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		var blocks []json.RawMessage
		if t.Role != want || json.Unmarshal(t.Content, &blocks) != nil || len(blocks) == 0 {
			return cp, validationf("the conversation's checkpoint is damaged at message %d", i)
		}
	}
	return cp, nil
}

// pending returns the client tool calls of the history's last assistant
// turn, in order. Server tool calls are answered by the provider itself.
func (cp *checkpoint) pending() ([]call, error) {
	if len(cp.Messages) == 0 || cp.Messages[len(cp.Messages)-1].Role != "assistant" {
		return nil, nil
	}
	var blocks []struct {
		Type string `json:"type"`
		call
	}
	if err := json.Unmarshal(cp.Messages[len(cp.Messages)-1].Content, &blocks); err != nil {
		return nil, validationf("the conversation's checkpoint is damaged: %v", err)
	}
	var out []call
	for _, b := range blocks {
		if b.Type == "tool_use" {
			out = append(out, b.call)
		}
	}
	return out, nil
}

// plan is one turn ready to send.
type plan struct {
	body      []byte
	tools     toolSet
	webSearch bool
	// next is the conversation after this turn's user message; the
	// assistant turn is appended when the stream ends.
	next checkpoint
}

// wireRequest is the body of POST /v1/messages.
type wireRequest struct {
	Model       string        `json:"model"`
	MaxTokens   int           `json:"max_tokens"`
	System      string        `json:"system,omitempty"`
	Messages    []wireMessage `json:"messages"`
	Tools       []any         `json:"tools,omitempty"`
	Thinking    *wireThinking `json:"thinking,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
	Stream      bool          `json:"stream"`
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type wireThinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// newPlan joins the request to the conversation's checkpoint (nil for a
// new conversation): it checks that the tool results answer exactly the
// pending tool calls, validates each pending call's arguments against its
// tool's schema, and builds the request body. Every problem is an
// AgenticRequestValidationError (a model that differs from the
// conversation's is PinMismatch); nothing has been sent.
func newPlan(req Request, model string, state []byte) (*plan, error) {
	cp := checkpoint{V: checkpointVersion, Model: model}
	if len(state) > 0 {
		var err error
		if cp, err = decodeCheckpoint(state, model); err != nil {
			return nil, err
		}
	}
	calls, err := cp.pending()
	if err != nil {
		return nil, err
	}
	results, err := answer(req.ToolResults, calls, cp.Tools)
	if err != nil {
		return nil, err
	}
	if req.System != "" {
		cp.System = req.System
	}
	if req.Tools != nil {
		cp.Tools = req.Tools
	}
	if req.WebSearchMaxUses > 0 {
		cp.WebSearchMaxUses = req.WebSearchMaxUses
	}
	if req.ThinkingBudget > 0 {
		cp.ThinkingBudget = req.ThinkingBudget
	}
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = DefaultMaxTokens + cp.ThinkingBudget
	}
	if cp.ThinkingBudget > 0 && cp.ThinkingBudget >= maxTokens {
		return nil, validationf("max_tokens %d must be above the conversation's thinking_budget %d", maxTokens, cp.ThinkingBudget)
	}
	if cp.ThinkingBudget > 0 && req.Temperature != nil {
		return nil, validationf("temperature cannot be set in a conversation with thinking (the provider refuses it)")
	}

	// The user turn: the tool results first, as the provider requires,
	// then the prompt.
	content := results
	if req.Prompt != "" {
		content = append(content, map[string]any{"type": "text", "text": req.Prompt})
	}
	userTurn, err := marshalJSON(content)
	if err != nil {
		return nil, validationf("tool_results: %v", err)
	}
	cp.Messages = append(slices.Clip(cp.Messages), turn{Role: "user", Content: userTurn})
	cp.MessageID, cp.StopReason = "", ""

	body := wireRequest{Model: model, MaxTokens: maxTokens, System: cp.System, Stream: true,
		Tools: wireTools(cp.Tools, cp.WebSearchMaxUses), Temperature: req.Temperature}
	if cp.ThinkingBudget > 0 {
		body.Thinking = &wireThinking{Type: "enabled", BudgetTokens: cp.ThinkingBudget}
	}
	for _, t := range cp.Messages {
		body.Messages = append(body.Messages, wireMessage{Role: t.Role, Content: t.Content})
	}
	b, err := marshalJSON(body)
	if err != nil {
		return nil, validationf("%v", err)
	}
	return &plan{body: b, tools: newToolSet(cp.Tools),
		webSearch: cp.WebSearchMaxUses > 0, next: cp}, nil
}

// answer matches the tool results to the pending calls, validates each
// call's arguments against the schema of the tool it names (the tools of
// the turn that made the call), and returns the tool_result blocks in the
// calls' order.
func answer(results []ToolResult, calls []call, tools []toolschema.Tool) ([]any, error) {
	byID := make(map[string]ToolResult, len(results))
	for _, r := range results {
		byID[r.ToolID] = r
	}
	var missing []string
	for _, c := range calls {
		if _, ok := byID[c.ID]; !ok {
			missing = append(missing, c.ID)
		}
	}
	if len(missing) > 0 {
		return nil, validationf("tool_results: the conversation awaits the results of the tool calls %s", strings.Join(missing, ", "))
	}
	if len(results) > len(calls) {
		known := map[string]bool{}
		for _, c := range calls {
			known[c.ID] = true
		}
		var unknown []string
		for _, id := range toolIDs(results) {
			if !known[id] {
				unknown = append(unknown, id)
			}
		}
		return nil, validationf("tool_results: %s answer no pending tool call of the conversation", strings.Join(unknown, ", "))
	}
	set := newToolSet(tools)
	out := make([]any, 0, len(calls))
	for _, c := range calls {
		tool, ok := set[c.Name]
		if !ok {
			return nil, validationf("tool call %s names %q, a tool the conversation does not declare", c.ID, c.Name)
		}
		var args map[string]any
		if err := json.Unmarshal(c.Input, &args); err != nil || args == nil {
			return nil, validationf("tool call %s (%s): its arguments are not a JSON object", c.ID, tool.Name)
		}
		if err := toolschema.Validate(tool.Schema, args); err != nil {
			return nil, validationf("tool call %s (%s): %v; its result is not accepted", c.ID, tool.Name, err)
		}
		r := byID[c.ID]
		block := map[string]any{"type": "tool_result", "tool_use_id": c.ID}
		if r.Output != nil {
			text, err := toolResultContent(r.Output)
			if err != nil {
				return nil, validationf("tool_results: the output for %s cannot be sent as JSON: %v", c.ID, err)
			}
			block["content"] = text
		}
		if r.IsError {
			block["is_error"] = true
		}
		out = append(out, block)
	}
	return out, nil
}

// marshalJSON is json.Marshal without HTML escaping.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
