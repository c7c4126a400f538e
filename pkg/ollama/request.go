package ollama

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/reqfield"
	"github.com/agentmesh/agentmesh/pkg/toolschema"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// ReasoningEfforts are the values of reasoning_effort: Ollama's think
// levels, which the models that take a level (gpt-oss) accept.
var ReasoningEfforts = []string{"low", "medium", "high"}

// MaxTokensLimit bounds max_tokens.
const MaxTokensLimit = 1 << 24

// Request is the typed request of the ollama adapter, decoded strictly from
// msgpack (snake_case keys):
//
//	prompt            the next user message; required unless tool_results is given
//	system            the system message; only when the conversation starts
//	                  (a continued conversation keeps its first one)
//	tools             [{name, description, input_schema}]: the tools the model may
//	                  call, sent as Ollama function tools; each schema must be one
//	                  pkg/toolschema can enforce
//	tool_results      [{tool_id, output, is_error}]: the answers to the tool calls
//	                  the conversation's last run ended with (see doc.go)
//	model             optional; when set it must equal the pinned model
//	max_tokens        options.num_predict
//	temperature       options.temperature, a number in [0, 2]
//	think             true or false: Ollama's think switch for thinking models
//	reasoning_effort  low, medium or high: Ollama's think level (gpt-oss);
//	                  exclusive with think
type Request struct {
	Prompt          string
	System          string
	Tools           []toolschema.Tool
	ToolResults     []ToolResult
	Model           string
	MaxTokens       int
	Temperature     *float64
	Think           *bool
	ReasoningEffort string
}

// ToolResult answers one tool call. ToolID is the tool_id of the tool_use
// chunk it answers; it is empty only when that chunk had none (a server
// older than Ollama 0.12.10 sends tool calls without ids), and then the
// id-less results answer the id-less calls in the order of the calls.
type ToolResult struct {
	ToolID string
	// Output is the tool's output: a string, sent verbatim, or any JSON
	// value, sent as its JSON text.
	Output  any
	IsError bool
}

// Decode validates a msgpack request strictly. Every problem (an unknown
// field, a wrong type, a missing prompt, a bad schema or tool result) is
// named in one AgenticRequestValidationError. It starts nothing and is safe
// for concurrent use.
func Decode(b []byte) (Request, error) {
	// reqfield has getters for strings, string lists, booleans and integers
	// only: tools, tool_results and temperature are taken out of the map
	// here, read by hand, and their problems recorded on the same Decoder,
	// so that one error still names every problem.
	var raw map[string]any
	if err := wire.DecodeStrict(b, &raw); err != nil {
		return Request{}, wire.Errorf(wire.AgenticRequestValidationError, "%s request: %v", Name, err)
	}
	tools, hasTools := raw["tools"]
	results, hasResults := raw["tool_results"]
	temp, hasTemp := raw["temperature"]
	delete(raw, "tools")
	delete(raw, "tool_results")
	delete(raw, "temperature")
	rest, err := wire.Marshal(raw)
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
		MaxTokens:       d.Int("max_tokens", 1, MaxTokensLimit),
		ReasoningEffort: d.String("reasoning_effort"),
	}
	if think := d.Bool("think"); d.Has("think") {
		req.Think = &think
	}
	if hasTools {
		req.Tools = decodeTools(d, tools)
	}
	if hasResults {
		req.ToolResults = decodeToolResults(d, results)
	}
	if hasTemp {
		req.Temperature = decodeTemperature(d, temp)
	}
	if req.Prompt == "" && !hasResults {
		d.Bad("prompt", "required, a non-empty string, unless tool_results is given")
	}
	if req.ReasoningEffort != "" && !slices.Contains(ReasoningEfforts, req.ReasoningEffort) {
		d.Bad("reasoning_effort", "%q is not one of %s", req.ReasoningEffort, strings.Join(ReasoningEfforts, ", "))
	}
	if req.ReasoningEffort != "" && req.Think != nil {
		d.Bad("think", "set think or reasoning_effort, not both")
	}
	if err := d.Err(); err != nil {
		return Request{}, err
	}
	return req, nil
}

var toolKeys = []string{"name", "description", "input_schema"}

func decodeTools(d *reqfield.Decoder, v any) []toolschema.Tool {
	items, ok := v.([]any)
	if !ok {
		d.Bad("tools", "want an array of tools, got %s", typeName(v))
		return nil
	}
	var out []toolschema.Tool
	seen := map[string]bool{}
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			d.BadElem("tools", i, "want a map {name, description, input_schema}, got %s", typeName(it))
			continue
		}
		if k := unknownKey(m, toolKeys); k != "" {
			d.BadElem("tools", i, "unknown field %.64q", k)
			continue
		}
		name, _ := m["name"].(string)
		desc, descOK := m["description"].(string)
		schema, schemaOK := m["input_schema"].(map[string]any)
		switch {
		case name == "":
			d.BadElem("tools", i, "name: required, a non-empty string")
		case !utf8.ValidString(name) || strings.ContainsFunc(name, isControl):
			d.BadElem("tools", i, "name %q: holds control characters or invalid UTF-8", name)
		case seen[name]:
			d.BadElem("tools", i, "name %q: declared twice", name)
		case m["description"] != nil && !descOK:
			d.BadElem("tools", i, "description: want a string, got %s", typeName(m["description"]))
		case !schemaOK:
			d.BadElem("tools", i, "input_schema: required, a map (a JSON schema), got %s", typeName(m["input_schema"]))
		default:
			if err := toolschema.CheckSchema(schema); err != nil {
				d.BadElem("tools", i, "input_schema: %v", err)
				continue
			}
			if _, err := json.Marshal(schema); err != nil {
				d.BadElem("tools", i, "input_schema: not JSON: %v", err)
				continue
			}
			seen[name] = true
			out = append(out, toolschema.Tool{Name: name, Description: desc, Schema: schema})
		}
	}
	if len(out) < len(items) {
		return nil
	}
	return out
}

var toolResultKeys = []string{"tool_id", "output", "is_error"}

func decodeToolResults(d *reqfield.Decoder, v any) []ToolResult {
	items, ok := v.([]any)
	if !ok {
		d.Bad("tool_results", "want an array of tool results, got %s", typeName(v))
		return nil
	}
	if len(items) == 0 {
		d.Bad("tool_results", "empty: give at least one result, or leave the field out")
		return nil
	}
	var out []ToolResult
	seen := map[string]bool{}
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			d.BadElem("tool_results", i, "want a map {tool_id, output, is_error}, got %s", typeName(it))
			continue
		}
		if k := unknownKey(m, toolResultKeys); k != "" {
			d.BadElem("tool_results", i, "unknown field %.64q", k)
			continue
		}
		id, idOK := m["tool_id"].(string)
		isErr, errOK := m["is_error"].(bool)
		output, hasOutput := m["output"]
		switch {
		case m["tool_id"] != nil && !idOK:
			d.BadElem("tool_results", i, "tool_id: want a string, got %s", typeName(m["tool_id"]))
		case id != "" && seen[id]:
			d.BadElem("tool_results", i, "tool_id %q: answered twice", id)
		case m["is_error"] != nil && !errOK:
			d.BadElem("tool_results", i, "is_error: want a boolean, got %s", typeName(m["is_error"]))
		case !hasOutput:
			d.BadElem("tool_results", i, "output: required (a string or any JSON value)")
		default:
			if _, err := outputText(output); err != nil {
				d.BadElem("tool_results", i, "output: %v", err)
				continue
			}
			if id != "" {
				seen[id] = true
			}
			out = append(out, ToolResult{ToolID: id, Output: output, IsError: isErr})
		}
	}
	if len(out) < len(items) {
		return nil
	}
	return out
}

func decodeTemperature(d *reqfield.Decoder, v any) *float64 {
	var f float64
	switch n := v.(type) {
	case nil:
		return nil
	case float32:
		f = float64(n)
	case float64:
		f = n
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		f, _ = toFloat(n)
	default:
		d.Bad("temperature", "want a number, got %s", typeName(v))
		return nil
	}
	if math.IsNaN(f) || f < 0 || f > 2 {
		d.Bad("temperature", "%v is out of range [0, 2]", f)
		return nil
	}
	return &f
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}

// outputText is the tool message content for a tool's output: a string
// verbatim, anything else as JSON.
func outputText(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	if _, ok := v.([]byte); ok {
		return "", fmt.Errorf("binary is not a JSON value")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("not a JSON value: %v", err)
	}
	return string(b), nil
}

func unknownKey(m map[string]any, known []string) string {
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	slices.Sort(unknown)
	return unknown[0]
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// typeName names a decoded msgpack value's type for messages.
func typeName(v any) string {
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
	}
	return fmt.Sprintf("%T", v)
}
