package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// This file reads the two OpenAI shapes of a conversation (chat messages,
// Responses input items) into atoms, and their tool declarations into the
// mesh's {name, description, input_schema}.

// chatMessage is one element of a chat request's messages. An assistant
// message the gateway answered comes back as the caller got it, so the
// fields of a reply (refusal, tool_calls) are accepted.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	Refusal    *string         `json:"refusal,omitempty"`
	ToolCalls  []chatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatAtoms reads a chat request's messages.
func chatAtoms(msgs []chatMessage) ([]atom, *APIError) {
	var out []atom
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		if m.Refusal != nil && *m.Refusal != "" {
			return nil, invalid(param+".refusal", "%s: a refusal is not supported in the history", param)
		}
		if m.Role != "assistant" && len(m.ToolCalls) > 0 {
			return nil, invalid(param+".tool_calls", "%s: only an assistant message has tool_calls", param)
		}
		if m.Role != "tool" && m.ToolCallID != "" {
			return nil, invalid(param+".tool_call_id", "%s: only a tool message has a tool_call_id", param)
		}
		switch m.Role {
		case "system", "developer", "user":
			text, e := textOf(m.Content, param+".content", "text")
			if e != nil {
				return nil, e
			}
			k := m.Role
			if k == "developer" {
				k = "system"
			}
			out = append(out, atom{K: k, T: text, param: param})
		case "assistant":
			text, e := optionalText(m.Content, param+".content", "text")
			if e != nil {
				return nil, e
			}
			if text == "" && len(m.ToolCalls) == 0 {
				return nil, invalid(param+".content", "%s: an assistant message needs content or tool_calls", param)
			}
			out = append(out, atom{K: "assistant", T: text, param: param})
			for j, c := range m.ToolCalls {
				cp := fmt.Sprintf("%s.tool_calls[%d]", param, j)
				if c.Type != "function" {
					return nil, invalid(cp+".type", "%s.type %q is not supported (want function)", cp, c.Type)
				}
				if c.ID == "" || c.Function.Name == "" {
					return nil, invalid(cp, "%s needs an id and a function name", cp)
				}
				out = append(out, atom{K: "call", I: c.ID, N: c.Function.Name, A: canonicalArgs(c.Function.Arguments), param: cp})
			}
		case "tool":
			if m.ToolCallID == "" {
				return nil, invalid(param+".tool_call_id", "%s: a tool message needs the tool_call_id it answers", param)
			}
			text, e := optionalText(m.Content, param+".content", "text")
			if e != nil {
				return nil, e
			}
			out = append(out, atom{K: "result", I: m.ToolCallID, T: text, param: param})
		case "function":
			return nil, invalid(param+".role", "%s: the deprecated function role is not supported: use tool messages", param)
		default:
			return nil, invalid(param+".role", "%s: role %q is not system, developer, user, assistant or tool", param, m.Role)
		}
	}
	return out, nil
}

// inputItem is one item of a Responses input list: a message, a function
// call (as the gateway answered it) or a function call's output. The id
// and status of an output item sent back are accepted.
type inputItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Status    string          `json:"status"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// responsesAtoms reads a Responses input: a string (one user message) or
// a list of items. instructions, when set, is the system text before them.
func responsesAtoms(input json.RawMessage, instructions string) ([]atom, *APIError) {
	var out []atom
	if instructions != "" {
		out = append(out, atom{K: "system", T: instructions, param: "instructions"})
	}
	raw := bytes.TrimSpace(input)
	if len(raw) > 0 && raw[0] == '"' {
		text, e := textOf(raw, "input")
		if e != nil {
			return nil, e
		}
		return append(out, atom{K: "user", T: text, param: "input"}), nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
		return nil, invalid("input", "input must be a string or a non-empty list of items")
	}
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		var kind struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(it, &kind); err != nil {
			return nil, invalid(param, "%s: want an item object: %v", param, err)
		}
		switch kind.Type {
		case "", "message", "function_call", "function_call_output":
		default:
			return nil, invalid(param+".type", "%s.type %q is not supported (want message, function_call or function_call_output)", param, kind.Type)
		}
		var item inputItem
		if err := decodeStrict(it, &item); err != nil {
			return nil, invalid(param, "%s: want a message, function_call or function_call_output item: %v", param, err)
		}
		present := func(field string, set bool) *APIError {
			if set {
				return invalid(param+"."+field, "%s: a %s item has no %s", param, item.Type, field)
			}
			return nil
		}
		switch item.Type {
		case "", "message":
			for _, e := range []*APIError{present("call_id", item.CallID != ""), present("name", item.Name != ""),
				present("arguments", item.Arguments != ""), present("output", item.Output != nil)} {
				if e != nil {
					return nil, e
				}
			}
			var a atom
			var e *APIError
			switch item.Role {
			case "system", "developer", "user":
				a.K = item.Role
				if a.K == "developer" {
					a.K = "system"
				}
				a.T, e = textOf(item.Content, param+".content", "input_text", "output_text", "text")
			case "assistant":
				a.K = "assistant"
				a.T, e = optionalText(item.Content, param+".content", "output_text", "input_text", "text")
			default:
				return nil, invalid(param+".role", "%s: role %q is not system, developer, user or assistant", param, item.Role)
			}
			if e != nil {
				return nil, e
			}
			a.param = param
			out = append(out, a)
		case "function_call":
			for _, e := range []*APIError{present("role", item.Role != ""), present("content", item.Content != nil), present("output", item.Output != nil)} {
				if e != nil {
					return nil, e
				}
			}
			if item.CallID == "" || item.Name == "" {
				return nil, invalid(param, "%s: a function_call item needs a call_id and a name", param)
			}
			out = append(out, atom{K: "call", I: item.CallID, N: item.Name, A: canonicalArgs(item.Arguments), param: param})
		case "function_call_output":
			for _, e := range []*APIError{present("role", item.Role != ""), present("content", item.Content != nil),
				present("name", item.Name != ""), present("arguments", item.Arguments != "")} {
				if e != nil {
					return nil, e
				}
			}
			if item.CallID == "" {
				return nil, invalid(param+".call_id", "%s: a function_call_output item needs the call_id it answers", param)
			}
			text, e := optionalText(item.Output, param+".output", "input_text", "output_text", "text")
			if e != nil {
				return nil, e
			}
			out = append(out, atom{K: "result", I: item.CallID, T: text, param: param})
		}
	}
	return out, nil
}

// optionalText is textOf where absent or null content is empty text.
func optionalText(raw json.RawMessage, param string, types ...string) (string, *APIError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	return textOf(raw, param, types...)
}

// tail is what one request adds to its conversation: tool results, then
// an optional user message.
type tail struct {
	results []toolResult
	prompt  string
	atoms   []atom
}

// toolResult is an element of the mesh's tool_results field.
type toolResult struct {
	ToolID string `msgpack:"tool_id"`
	Output string `msgpack:"output"`
}

// split cuts a request's atoms into the history the mesh already holds
// (system atoms first, ending with an assistant turn; only system atoms
// for a new conversation, or one continued by previous_response_id) and
// the tail this request adds. It returns the system text of a new
// conversation.
func split(as []atom, param string) (history []atom, t tail, system string, e *APIError) {
	n := len(as)
	if n > 0 && as[n-1].K == "user" {
		t.prompt = as[n-1].T
		n--
	}
	start := n
	for start > 0 && as[start-1].K == "result" {
		start--
	}
	for _, a := range as[start:n] {
		t.results = append(t.results, toolResult{ToolID: a.I, Output: a.T})
	}
	t.atoms = as[start:]
	if len(t.atoms) == 0 {
		return nil, t, "", invalid(param, "%s must end with a user message or tool results", param)
	}
	if t.prompt == "" && len(t.results) == 0 {
		return nil, t, "", invalid(t.atoms[0].param, "%s: the user message is empty", t.atoms[0].param)
	}
	history = as[:start]
	var texts []string
	began := false
	for _, a := range as {
		switch {
		case a.K != "system":
			began = true
		case began:
			return nil, t, "", invalid(a.param, "%s: a system message after the conversation began is not supported: send the system messages first", a.param)
		default:
			texts = append(texts, a.T)
		}
	}
	if onlySystem(history) {
		system = strings.Join(texts, "\n\n")
	} else if k := history[len(history)-1].K; k != "assistant" && k != "call" {
		return nil, t, "", invalid(history[len(history)-1].param, "%s: two user turns in a row: the turn before the last must be the assistant's", history[len(history)-1].param)
	}
	return history, t, system, nil
}

// onlySystem reports whether as holds nothing but system atoms.
func onlySystem(as []atom) bool {
	for _, a := range as {
		if a.K != "system" {
			return false
		}
	}
	return true
}

// functionTool is a tool declaration: a chat tool's function, or a
// Responses function tool (whose fields sit beside its type).
type functionTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// Strict is accepted either way: the mesh checks every call's
	// arguments against the schema whatever the model was asked.
	Strict *bool `json:"strict"`
}

// mesh is the tool as the mesh's remote adapters declare one. A tool
// without parameters takes an empty object.
func (f functionTool) mesh(param string) (map[string]any, *APIError) {
	if f.Name == "" {
		return nil, invalid(param+".name", "%s.name is required", param)
	}
	schema := map[string]any{"type": "object", "properties": map[string]any{}}
	if p := bytes.TrimSpace(f.Parameters); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		v, e := jsonValue(p, param+".parameters")
		if e != nil {
			return nil, e
		}
		schema = v
	}
	t := map[string]any{"name": f.Name, "input_schema": schema}
	if f.Description != "" {
		t["description"] = f.Description
	}
	return t, nil
}

// chatTool is an element of a chat request's tools.
type chatTool struct {
	Type     string       `json:"type"`
	Function functionTool `json:"function"`
}

// responsesTool is an element of a Responses request's tools.
type responsesTool struct {
	Type string `json:"type"`
	functionTool
}

func chatTools(ts []chatTool) ([]any, *APIError) {
	var out []any
	for i, t := range ts {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return nil, invalid(param+".type", "%s.type %q is not supported (want function)", param, t.Type)
		}
		m, e := t.Function.mesh(param + ".function")
		if e != nil {
			return nil, e
		}
		out = append(out, m)
	}
	return out, nil
}

func responsesTools(ts []responsesTool) ([]any, *APIError) {
	var out []any
	for i, t := range ts {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return nil, invalid(param+".type", "%s.type %q is not supported (want function: hosted tools are not built)", param, t.Type)
		}
		m, e := t.mesh(param)
		if e != nil {
			return nil, e
		}
		out = append(out, m)
	}
	return out, nil
}

// toolChoice checks tool_choice: only "auto" (the default) is supported.
func toolChoice(raw json.RawMessage) *APIError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || bytes.Equal(raw, []byte(`"auto"`)) {
		return nil
	}
	return invalid("tool_choice", "tool_choice %s is not supported: only \"auto\" is", raw)
}

// parallelCalls checks parallel_tool_calls: the mesh passes every call
// the model makes, so false cannot be honoured.
func parallelCalls(v *bool) *APIError {
	if v != nil && !*v {
		return invalid("parallel_tool_calls", "parallel_tool_calls false is not supported: every call the model makes is returned")
	}
	return nil
}
