package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
)

// Bounds of the request's numeric fields.
const (
	// MinMaxTokens is the smallest max_output_tokens the Responses API accepts.
	MinMaxTokens = 16
	// MaxMaxTokens bounds max_tokens well above any model's output limit.
	MaxMaxTokens = 1_000_000
	// MaxToolName bounds a canonical (platform) tool name, in bytes.
	MaxToolName = 256
)

// ReasoningEfforts are the values reasoning_effort accepts (the Responses
// API's reasoning.effort; which of them a model supports is the model's
// business, and a value it refuses comes back as an HTTP 400).
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// Request is the typed request of the openai adapter, decoded strictly from
// msgpack (snake_case keys):
//
//	prompt            the user turn's text; required unless tool_results is given
//	system            the instructions (the Responses API's "instructions"); on a
//	                  continuation, empty keeps the conversation's instructions
//	tools             function tools: {name, description, input_schema}; names are
//	                  the platform's canonical names (dots allowed); on a
//	                  continuation, empty keeps the conversation's tools
//	tool_results      the results of the conversation's pending tool calls:
//	                  {tool_id, output (a string or any JSON value), is_error}
//	model             must equal the pinned model when set
//	max_tokens        max_output_tokens, in [MinMaxTokens, MaxMaxTokens]
//	temperature       a number in [0, 2]; omitted on the wire for a model listed in
//	                  Options.NoTemperatureModels
//	reasoning_effort  reasoning.effort, one of ReasoningEfforts
//
// Any other field is an AgenticRequestValidationError.
type Request struct {
	Prompt          string            `msgpack:"prompt,omitempty"`
	System          string            `msgpack:"system,omitempty"`
	Tools           []toolschema.Tool `msgpack:"tools,omitempty"`
	ToolResults     []ToolResult      `msgpack:"tool_results,omitempty"`
	Model           string            `msgpack:"model,omitempty"`
	MaxTokens       int               `msgpack:"max_tokens,omitempty"`
	Temperature     *float64          `msgpack:"temperature,omitempty"`
	ReasoningEffort string            `msgpack:"reasoning_effort,omitempty"`
}

// ToolResult answers one pending tool call of the conversation. A string
// Output is sent as is, any other value as its JSON text; with IsError the
// output is sent as the JSON text {"error": <output>}, since
// function_call_output has no error flag.
type ToolResult = toolschema.Result

// Decode validates a msgpack request strictly. Every problem (an unknown
// field, a wrong type, a missing prompt, a bad tool definition, two tool
// names that would reach OpenAI as the same function name) is named in one
// AgenticRequestValidationError. The checks that need the conversation (the
// pinned model, pending tool calls, tool arguments) happen when the run
// starts. Decode does no I/O and is safe for concurrent use.
func Decode(b []byte) (Request, error) { return reqfield.Read(Name, b, read) }

// read takes the request's fields from d and checks them (reqfield.Read).
func read(d *reqfield.Decoder) Request {
	// tool_results given, even a bad one, stands in for the prompt.
	d.RequireUnless("prompt", "tool_results")
	req := Request{
		Prompt:          d.String("prompt"),
		System:          d.String("system"),
		Model:           d.String("model"),
		MaxTokens:       d.Int("max_tokens", MinMaxTokens, MaxMaxTokens),
		ReasoningEffort: d.String("reasoning_effort"),
		Tools:           toolschema.Tools(d, "tools", toolRules),
		ToolResults:     toolschema.Results(d, "tool_results", resultRules),
	}
	if t := d.Float("temperature", 0, 2); d.Has("temperature") {
		req.Temperature = &t
	}
	if len(req.Tools) == 0 {
		req.Tools = nil // an empty list, like none, keeps the conversation's tools
	}
	if req.ReasoningEffort != "" && !slices.Contains(ReasoningEfforts, req.ReasoningEffort) {
		d.Bad("reasoning_effort", "%q is not one of %s", req.ReasoningEffort, strings.Join(ReasoningEfforts, ", "))
	}
	return req
}

// toolRules are OpenAI's rules for a tool beyond the shared ones: a
// canonical name, and an object schema (function parameters are one).
// Names are unique as OpenAI function names too.
var toolRules = toolschema.Rules{
	Name: checkToolName,
	Schema: func(schema map[string]any) error {
		if t, _ := schema["type"].(string); t != "object" {
			return errors.New(`the root must be an object schema ("type": "object"), as OpenAI function parameters are`)
		}
		return nil
	},
	Alias: alias,
}

// resultRules: every result names its call, and its output must be
// sendable as function_call_output.output.
var resultRules = toolschema.ResultRules{
	Output: func(v any) error {
		_, err := outputText(v, false)
		return err
	},
}

// checkToolName accepts a canonical tool name: printable UTF-8 without
// spaces, at most MaxToolName bytes.
func checkToolName(name string) error {
	if len(name) > MaxToolName {
		return fmt.Errorf("longer than %d bytes", MaxToolName)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("not valid UTF-8")
	}
	for _, r := range name {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("contains %q; a tool name is printable and has no spaces", r)
		}
	}
	return nil
}

// outputText is what a tool result sends as function_call_output.output.
func outputText(v any, isError bool) (string, error) {
	if isError {
		b, err := json.Marshal(map[string]any{"error": v})
		return string(b), err
	}
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case []byte, time.Time:
		return "", fmt.Errorf("want a string or a JSON value, got %s", reqfield.TypeName(v))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("not expressible as JSON: %v", err)
	}
	return string(b), nil
}
