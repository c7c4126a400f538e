package openai

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/reqfield"
	"github.com/agentmesh/agentmesh/pkg/toolschema"
	"github.com/agentmesh/agentmesh/pkg/wire"
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

// ToolResult answers one pending tool call of the conversation.
type ToolResult struct {
	// ToolID is the call's id, as the tool_use chunk's tool_id carried it.
	ToolID string `msgpack:"tool_id"`
	// Output is the tool's output: a string is sent as is, any other value
	// as its JSON text.
	Output any `msgpack:"output,omitempty"`
	// IsError says the tool failed; the output is then sent as the JSON
	// text {"error": <output>}, since function_call_output has no error flag.
	IsError bool `msgpack:"is_error,omitempty"`
}

// listFields are the request fields whose values are lists of maps or
// numbers that reqfield has no getter for; Decode reads them itself.
var listFields = []string{"tools", "tool_results", "temperature"}

// Decode validates a msgpack request strictly. Every problem (an unknown
// field, a wrong type, a missing prompt, a bad tool definition, two tool
// names that would reach OpenAI as the same function name) is named in one
// AgenticRequestValidationError. The checks that need the conversation (the
// pinned model, pending tool calls, tool arguments) happen when the run
// starts. Decode does no I/O and is safe for concurrent use.
func Decode(b []byte) (Request, error) {
	if _, err := reqfield.Decode(Name, b); err != nil {
		return Request{}, err
	}
	// reqfield has getters for scalars and string lists only: the fields
	// it cannot read are taken out here and checked below, and the rest is
	// decoded by reqfield, so all problems still end up in one message.
	var m map[string]any
	if err := wire.DecodeStrict(b, &m); err != nil {
		return Request{}, wire.Errorf(wire.AgenticRequestValidationError, "%s request: %v", Name, err)
	}
	own := map[string]any{}
	for _, k := range listFields {
		if v, ok := m[k]; ok {
			own[k] = v
			delete(m, k)
		}
	}
	rest, err := wire.Marshal(m)
	if err != nil {
		return Request{}, wire.Errorf(wire.AgenticRequestValidationError, "%s request: %v", Name, err)
	}
	d, err := reqfield.Decode(Name, rest)
	if err != nil {
		return Request{}, err
	}
	req := Request{
		Prompt:          d.String("prompt"),
		System:          d.String("system"),
		Model:           d.String("model"),
		MaxTokens:       d.Int("max_tokens", MinMaxTokens, MaxMaxTokens),
		ReasoningEffort: d.String("reasoning_effort"),
		Tools:           decodeTools(d, own["tools"]),
		ToolResults:     decodeToolResults(d, own["tool_results"]),
		Temperature:     decodeTemperature(d, own["temperature"]),
	}
	if own["tool_results"] == nil {
		d.Require("prompt")
	}
	if req.ReasoningEffort != "" && !slices.Contains(ReasoningEfforts, req.ReasoningEffort) {
		d.Bad("reasoning_effort", "%q is not one of %s", req.ReasoningEffort, strings.Join(ReasoningEfforts, ", "))
	}
	if err := d.Err(); err != nil {
		return Request{}, err
	}
	return req, nil
}

var toolKeys = []string{"name", "description", "input_schema"}

// decodeTools reads the tools field: a list of {name, description,
// input_schema} maps with unique canonical names whose OpenAI aliases are
// unique too.
func decodeTools(d *reqfield.Decoder, v any) []toolschema.Tool {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		d.Bad("tools", "want an array of tool maps, got %s", kind(v))
		return nil
	}
	var out []toolschema.Tool
	byAlias := map[string]int{}
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			d.BadElem("tools", i, "want a map {name, description, input_schema}, got %s", kind(e))
			continue
		}
		bad := false
		problem := func(format string, args ...any) { d.BadElem("tools", i, format, args...); bad = true }
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(toolKeys, k) {
				problem("unknown field %.64q", k)
			}
		}
		name, ok := m["name"].(string)
		switch {
		case !ok || name == "":
			problem("name: required, a non-empty string")
		default:
			if err := checkToolName(name); err != nil {
				problem("name %.64q: %v", name, err)
			}
		}
		desc, ok := m["description"].(string)
		if !ok && m["description"] != nil {
			problem("description: want a string, got %s", kind(m["description"]))
		}
		schema, ok := m["input_schema"].(map[string]any)
		switch {
		case !ok && m["input_schema"] == nil:
			problem("input_schema: required, a JSON schema map")
		case !ok:
			problem("input_schema: want a map, got %s", kind(m["input_schema"]))
		default:
			if t, _ := schema["type"].(string); t != "object" {
				problem(`input_schema: the root must be an object schema ("type": "object"), as OpenAI function parameters are`)
			}
			if err := toolschema.CheckSchema(schema); err != nil {
				problem("input_schema: %v", err)
			}
			if _, err := json.Marshal(schema); err != nil {
				problem("input_schema: not expressible as JSON: %v", err)
			}
		}
		if bad {
			continue
		}
		a := alias(name)
		if j, dup := byAlias[a]; dup {
			if out[j].Name == name {
				problem("name %.64q: a second tool of the same name", name)
			} else {
				problem("name %.64q: collides with tool %.64q, both would reach OpenAI as the function %q", name, out[j].Name, a)
			}
			continue
		}
		byAlias[a] = len(out)
		out = append(out, toolschema.Tool{Name: name, Description: desc, Schema: schema})
	}
	return out
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

var resultKeys = []string{"tool_id", "output", "is_error"}

// decodeToolResults reads the tool_results field: a list of {tool_id,
// output, is_error} maps with unique ids. Whether they answer the pending
// calls is checked against the conversation when the run starts.
func decodeToolResults(d *reqfield.Decoder, v any) []ToolResult {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		d.Bad("tool_results", "want an array of result maps, got %s", kind(v))
		return nil
	}
	if len(list) == 0 {
		d.Bad("tool_results", "empty; omit the field, or answer every pending tool call")
		return nil
	}
	var out []ToolResult
	seen := map[string]bool{}
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			d.BadElem("tool_results", i, "want a map {tool_id, output, is_error}, got %s", kind(e))
			continue
		}
		bad := false
		problem := func(format string, args ...any) { d.BadElem("tool_results", i, format, args...); bad = true }
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(resultKeys, k) {
				problem("unknown field %.64q", k)
			}
		}
		id, ok := m["tool_id"].(string)
		switch {
		case !ok || id == "":
			problem("tool_id: required, a non-empty string")
		case seen[id]:
			problem("tool_id %.64q: answered twice", id)
		}
		isErr, ok := m["is_error"].(bool)
		if !ok && m["is_error"] != nil {
			problem("is_error: want a boolean, got %s", kind(m["is_error"]))
		}
		if _, err := outputText(m["output"], false); err != nil {
			problem("output: %v", err)
		}
		if bad {
			continue
		}
		seen[id] = true
		out = append(out, ToolResult{ToolID: id, Output: m["output"], IsError: isErr})
	}
	return out
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
		return "", fmt.Errorf("want a string or a JSON value, got %s", kind(v))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("not expressible as JSON: %v", err)
	}
	return string(b), nil
}

// decodeTemperature reads the temperature field: a number in [0, 2].
func decodeTemperature(d *reqfield.Decoder, v any) *float64 {
	if v == nil {
		return nil
	}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int8:
		f = float64(n)
	case int16:
		f = float64(n)
	case int32:
		f = float64(n)
	case int64:
		f = float64(n)
	case uint8:
		f = float64(n)
	case uint16:
		f = float64(n)
	case uint32:
		f = float64(n)
	case uint64:
		f = float64(n)
	default:
		d.Bad("temperature", "want a number, got %s", kind(v))
		return nil
	}
	if !(f >= 0 && f <= 2) { // also refuses NaN
		d.Bad("temperature", "%v is out of range [0, 2]", f)
		return nil
	}
	return &f
}

// kind names the msgpack type of a decoded value for messages.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case bool:
		return "a boolean"
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return "an integer"
	case float32, float64:
		return "a float"
	case string:
		return "a string"
	case []byte:
		return "binary"
	case []any:
		return "an array"
	case map[string]any:
		return "a map"
	case time.Time:
		return "a timestamp"
	}
	return fmt.Sprintf("%T", v)
}
