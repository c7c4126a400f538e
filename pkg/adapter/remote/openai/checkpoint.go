package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// stateVersion is the version of the checkpoint encoding below.
const stateVersion = 1

// state is the adapter's checkpoint: the conversation in provider form and
// the provider-only continuation data. It is saved (msgpack, via
// wire.Marshal) at the end of every successful attempt and never enters a
// chunk. With store=false the provider keeps nothing, so every request
// replays Items whole.
type state struct {
	V int `msgpack:"v"`
	// Model is the pinned model the conversation runs on; encrypted
	// reasoning is only valid for it.
	Model string `msgpack:"model"`
	// Instructions is the conversation's system text.
	Instructions string `msgpack:"instructions,omitempty"`
	// Tools are the tools the last request declared, with canonical names:
	// a pending call's arguments are validated against them.
	Tools []toolDecl `msgpack:"tools,omitempty"`
	// Items is the history, in order.
	Items []item `msgpack:"items"`
	// ResponseID is the id of the last response: closed telemetry only.
	// It is never sent (no previous_response_id under store=false).
	ResponseID string `msgpack:"response_id,omitempty"`
}

// toolDecl is a declared tool; Schema is its input schema as JSON text.
type toolDecl struct {
	Name        string `msgpack:"name"`
	Description string `msgpack:"description,omitempty"`
	Schema      string `msgpack:"schema"`
}

// The kinds of history item.
const (
	kindUser       = "user"                 // a user message
	kindAssistant  = "assistant"            // an assistant message (text and/or refusal)
	kindReasoning  = "reasoning"            // a reasoning item: summary and encrypted content
	kindCall       = "function_call"        // a function call (canonical name, raw arguments)
	kindCallOutput = "function_call_output" // a tool result
)

// item is one history item.
type item struct {
	Kind      string   `msgpack:"kind"`
	Text      string   `msgpack:"text,omitempty"`
	Refusal   string   `msgpack:"refusal,omitempty"`
	Summary   []string `msgpack:"summary,omitempty"`
	Encrypted string   `msgpack:"encrypted_content,omitempty"`
	CallID    string   `msgpack:"call_id,omitempty"`
	Name      string   `msgpack:"name,omitempty"`
	Arguments string   `msgpack:"arguments,omitempty"`
	Output    string   `msgpack:"output,omitempty"`
}

// decodeState decodes a checkpoint this adapter saved.
func decodeState(b []byte) (state, error) {
	var st state
	if err := wire.DecodeStrict(b, &st); err != nil {
		return state{}, wire.Errorf(wire.ProviderProtocolError, "%s checkpoint: %v", Name, err)
	}
	if st.V != stateVersion {
		return state{}, wire.Errorf(wire.ProviderProtocolError, "%s checkpoint: version %d, want %d", Name, st.V, stateVersion)
	}
	for i, it := range st.Items {
		switch it.Kind {
		case kindUser, kindAssistant, kindReasoning, kindCall, kindCallOutput:
		default:
			return state{}, wire.Errorf(wire.ProviderProtocolError, "%s checkpoint: item %d has kind %q", Name, i, it.Kind)
		}
		if (it.Kind == kindCall || it.Kind == kindCallOutput) && it.CallID == "" {
			return state{}, wire.Errorf(wire.ProviderProtocolError, "%s checkpoint: item %d (%s) has no call id", Name, i, it.Kind)
		}
	}
	return st, nil
}

// pending returns the function calls of the history that no tool result
// answers yet, in order.
func (st *state) pending() []item {
	answered := map[string]bool{}
	for _, it := range st.Items {
		if it.Kind == kindCallOutput {
			answered[it.CallID] = true
		}
	}
	var out []item
	for _, it := range st.Items {
		if it.Kind == kindCall && !answered[it.CallID] {
			out = append(out, it)
		}
	}
	return out
}

func (st *state) tool(name string) (toolDecl, bool) {
	i := slices.IndexFunc(st.Tools, func(t toolDecl) bool { return t.Name == name })
	if i < 0 {
		return toolDecl{}, false
	}
	return st.Tools[i], true
}

func (st *state) toolNames() []string {
	out := make([]string, len(st.Tools))
	for i, t := range st.Tools {
		out[i] = t.Name
	}
	return out
}

// continueWith appends the request's turn to the conversation: the results
// of the pending calls (each pending call answered, no other id, and each
// call's arguments valid against its tool's schema — the central check that
// a non-strict provider tool mode relies on), then the prompt. The request's
// system text and tools, when given, replace the conversation's. Every
// problem is an AgenticRequestValidationError; st is unchanged on error.
func (st *state) continueWith(req Request) error {
	pend := st.pending()
	var problems []string
	results := map[string]ToolResult{}
	for _, r := range req.ToolResults {
		results[r.ToolID] = r
		if !slices.ContainsFunc(pend, func(c item) bool { return c.CallID == r.ToolID }) {
			problems = append(problems, fmt.Sprintf("tool_id %.64q answers no pending tool call of the conversation", r.ToolID))
		}
	}
	var outputs []item
	for _, c := range pend {
		r, ok := results[c.CallID]
		if !ok {
			problems = append(problems, fmt.Sprintf("pending tool call %.64q (%s) has no result", c.CallID, c.Name))
			continue
		}
		if err := st.checkArguments(c); err != nil {
			problems = append(problems, fmt.Sprintf("tool_id %.64q: %v", c.CallID, err))
			continue
		}
		out, err := outputText(r.Output, r.IsError)
		if err != nil {
			problems = append(problems, fmt.Sprintf("tool_id %.64q: output: %v", c.CallID, err))
			continue
		}
		outputs = append(outputs, item{Kind: kindCallOutput, CallID: c.CallID, Output: out})
	}
	if len(problems) > 0 {
		return wire.Errorf(wire.AgenticRequestValidationError, "%s request: tool_results: %s", Name, strings.Join(problems, "; "))
	}
	st.Items = append(st.Items, outputs...)
	if req.Prompt != "" {
		st.Items = append(st.Items, item{Kind: kindUser, Text: req.Prompt})
	}
	if req.System != "" {
		st.Instructions = req.System
	}
	if len(req.Tools) > 0 {
		st.Tools = st.Tools[:0:0]
		for _, t := range req.Tools {
			schema, err := json.Marshal(t.Schema)
			if err != nil { // Decode checked it
				return wire.Errorf(wire.AgenticRequestValidationError, "%s request: tools: %s: %v", Name, t.Name, err)
			}
			st.Tools = append(st.Tools, toolDecl{Name: t.Name, Description: t.Description, Schema: string(schema)})
		}
	}
	return nil
}

// MaxCheckpoint bounds the encoded checkpoint, leaving room within
// wire.MaxMessageSize for the runner's envelope (wire.Checkpoint) around it.
const MaxCheckpoint = wire.MaxMessageSize - 64<<10

// save encodes the conversation after a successful response. A
// conversation too large to store fails the run (ProviderContextError)
// rather than leave the stored conversation a turn behind.
func (p *parser) save(st state) ([]byte, error) {
	st.Items = append(st.Items, p.history...)
	st.ResponseID = p.respID
	b, err := wire.Marshal(&st)
	if err == nil && len(b) > MaxCheckpoint {
		err = fmt.Errorf("%d bytes, over the %d a checkpoint may hold", len(b), MaxCheckpoint)
	}
	if err != nil {
		return nil, wire.Errorf(wire.ProviderContextError, "%s: the conversation is too large to continue: checkpoint: %v", Name, err)
	}
	return b, nil
}

// errInvalidArguments is matched by a pending call whose arguments do not
// satisfy its tool's schema.
var errInvalidArguments = errors.New("invalid tool arguments")

// checkArguments validates a pending call's arguments against the schema of
// the tool it named, as the conversation declared it.
func (st *state) checkArguments(c item) error {
	t, ok := st.tool(c.Name)
	if !ok {
		return fmt.Errorf("%w: the call names tool %.64q, which the conversation does not declare", errInvalidArguments, c.Name)
	}
	var schema map[string]any
	if err := json.Unmarshal([]byte(t.Schema), &schema); err != nil {
		return fmt.Errorf("%w: tool %.64q: schema: %v", errInvalidArguments, c.Name, err)
	}
	args, err := parseArguments(c.Arguments)
	if err != nil {
		return fmt.Errorf("%w: tool %.64q: %v", errInvalidArguments, c.Name, err)
	}
	if err := toolschema.Validate(schema, args); err != nil {
		return fmt.Errorf("%w: tool %.64q: %v", errInvalidArguments, c.Name, err)
	}
	return nil
}

// parseArguments parses a function call's arguments, a JSON object (an
// empty string is the empty object).
func parseArguments(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return map[string]any{}, nil
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(s), &args); err != nil {
		return nil, fmt.Errorf("arguments are not a JSON object: %v", err)
	}
	if args == nil {
		return nil, fmt.Errorf("arguments are null, not a JSON object")
	}
	return args, nil
}
