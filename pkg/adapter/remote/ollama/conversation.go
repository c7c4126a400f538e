package ollama

import (
	"fmt"
	"slices"

	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// checkpointVersion is the version of the state this adapter saves.
const checkpointVersion = 1

// checkpoint is the conversation's continuation state: the provider-format
// message history so far (system, user, assistant turns with their
// thinking and tool calls, tool results) and the tools of the request that
// produced the last assistant turn, whose schemas validate its pending
// tool calls. It is adapter-private, msgpack-encoded, and never enters an
// event. Ollama has no opaque continuation data (no signatures, no
// encrypted reasoning, no response ids): everything here was also seen in
// chunks or given in requests.
type checkpoint struct {
	V        int               `msgpack:"v"`
	Tools    []toolschema.Tool `msgpack:"tools,omitempty"`
	Messages []message         `msgpack:"messages"`
}

// message is one /api/chat message, as sent and as kept.
type message struct {
	Role       string     `msgpack:"role" json:"role"`
	Content    string     `msgpack:"content" json:"content"`
	Thinking   string     `msgpack:"thinking,omitempty" json:"thinking,omitempty"`
	ToolCalls  []toolCall `msgpack:"tool_calls,omitempty" json:"tool_calls,omitempty"`
	ToolName   string     `msgpack:"tool_name,omitempty" json:"tool_name,omitempty"`
	ToolCallID string     `msgpack:"tool_call_id,omitempty" json:"tool_call_id,omitempty"`
}

type toolCall struct {
	ID       string       `msgpack:"id,omitempty" json:"id,omitempty"`
	Function toolFunction `msgpack:"function" json:"function"`
}

type toolFunction struct {
	Name      string         `msgpack:"name" json:"name"`
	Arguments map[string]any `msgpack:"arguments" json:"arguments"`
}

func decodeCheckpoint(b []byte) (checkpoint, error) {
	var cp checkpoint
	if len(b) == 0 {
		return cp, nil
	}
	if err := wire.DecodeStrict(b, &cp); err != nil {
		return cp, wire.Errorf(wire.ProviderProtocolError, "ollama: checkpoint: %v", err)
	}
	if cp.V != checkpointVersion {
		return cp, wire.Errorf(wire.ProviderProtocolError, "ollama: checkpoint version %d, want %d", cp.V, checkpointVersion)
	}
	for i := range cp.Messages {
		for j := range cp.Messages[i].ToolCalls {
			if cp.Messages[i].ToolCalls[j].Function.Arguments == nil {
				cp.Messages[i].ToolCalls[j].Function.Arguments = map[string]any{}
			}
		}
	}
	return cp, nil
}

// pending returns the tool calls the conversation's last turn ended with,
// which the next run must answer.
func (cp checkpoint) pending() []toolCall {
	if n := len(cp.Messages); n > 0 && cp.Messages[n-1].Role == "assistant" {
		return cp.Messages[n-1].ToolCalls
	}
	return nil
}

// continueWith appends the request's turn to the conversation: the tool
// results (answering every pending call, in the order of the calls), then
// the prompt. It checks the request against the conversation: every
// pending call answered exactly once, no result for a call that is not
// pending, the pending calls' arguments valid against their tools'
// schemas, and a system message only at the start. Every problem is an
// AgenticRequestValidationError, found before anything is sent.
func (cp checkpoint) continueWith(req Request) ([]message, []toolschema.Tool, error) {
	msgs := slices.Clone(cp.Messages)
	fresh := len(msgs) == 0
	if req.System != "" {
		switch {
		case fresh:
			msgs = append(msgs, message{Role: "system", Content: req.System})
		case msgs[0].Role != "system" || msgs[0].Content != req.System:
			return nil, nil, invalid("system: the conversation has begun; its system message cannot change")
		}
	}
	pending := cp.pending()
	switch {
	case len(pending) > 0 && len(req.ToolResults) == 0:
		return nil, nil, invalid("tool_results: the conversation's last run ended with %d tool call(s) that must be answered first", len(pending))
	case len(pending) == 0 && len(req.ToolResults) > 0:
		return nil, nil, invalid("tool_results: the conversation has no pending tool call")
	}
	if len(pending) > 0 {
		answers, err := match(pending, req.ToolResults)
		if err != nil {
			return nil, nil, err
		}
		for i, call := range pending {
			if err := validateCall(cp.Tools, call); err != nil {
				return nil, nil, err
			}
			text, _ := outputText(answers[i].Output) // checked by Decode
			if answers[i].IsError {
				text = "Tool execution failed: " + text
			}
			msgs = append(msgs, message{Role: "tool", Content: text, ToolName: call.Function.Name, ToolCallID: call.ID})
		}
	}
	if req.Prompt != "" {
		msgs = append(msgs, message{Role: "user", Content: req.Prompt})
	}
	tools := cp.Tools
	if req.Tools != nil || fresh {
		tools = req.Tools
	}
	return msgs, tools, nil
}

// match pairs the results with the pending calls: a result with a tool_id
// answers the call with that id; the results without one answer the calls
// without one (a server older than 0.12.10), in order.
func match(pending []toolCall, results []ToolResult) ([]ToolResult, error) {
	answers := make([]ToolResult, len(pending))
	answered := make([]bool, len(pending))
	var idless []ToolResult
	for _, r := range results {
		if r.ToolID == "" {
			idless = append(idless, r)
			continue
		}
		i := slices.IndexFunc(pending, func(c toolCall) bool { return c.ID == r.ToolID })
		if i < 0 {
			return nil, invalid("tool_results: tool_id %q is not a pending tool call of the conversation", r.ToolID)
		}
		answers[i], answered[i] = r, true
	}
	for i, c := range pending {
		if answered[i] {
			continue
		}
		if c.ID != "" {
			return nil, invalid("tool_results: the pending tool call %q (%s) has no result", c.ID, c.Function.Name)
		}
		if len(idless) == 0 {
			return nil, invalid("tool_results: the pending tool call #%d (%s, no id) has no result", i+1, c.Function.Name)
		}
		answers[i], answered[i], idless = idless[0], true, idless[1:]
	}
	if len(idless) > 0 {
		return nil, invalid("tool_results: %d result(s) without a tool_id answer no pending call", len(idless))
	}
	return answers, nil
}

// validateCall checks a pending call's arguments against the schema of the
// tool it names, before its result is accepted.
func validateCall(tools []toolschema.Tool, c toolCall) error {
	label := c.Function.Name
	if c.ID != "" {
		label = fmt.Sprintf("%s (%s)", c.ID, c.Function.Name)
	}
	i := slices.IndexFunc(tools, func(t toolschema.Tool) bool { return t.Name == c.Function.Name })
	if i < 0 {
		return invalid("tool_results: the pending tool call %s names a tool the conversation did not declare", label)
	}
	if err := toolschema.Validate(tools[i].Schema, c.Function.Arguments); err != nil {
		return invalid("tool_results: the arguments of the pending tool call %s: %v", label, err)
	}
	return nil
}

func invalid(format string, args ...any) *wire.Error {
	return wire.Errorf(wire.AgenticRequestValidationError, "ollama request: "+format, args...)
}
