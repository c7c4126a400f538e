package ollama

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
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
//	                  pkg/adapter/toolschema can enforce
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
// Output is the tool's output: a string, sent verbatim, or any JSON value,
// sent as its JSON text.
type ToolResult = toolschema.Result

// Decode validates a msgpack request strictly. Every problem (an unknown
// field, a wrong type, a missing prompt, a bad schema or tool result) is
// named in one AgenticRequestValidationError. It starts nothing and is safe
// for concurrent use.
func Decode(b []byte) (Request, error) { return reqfield.Read(Name, b, read) }

// read takes the request's fields from d and checks them (reqfield.Read).
func read(d *reqfield.Decoder) Request {
	// tool_results given, even a bad one, stands in for the prompt.
	d.RequireUnless("prompt", "tool_results")
	req := Request{
		Prompt:          d.String("prompt"),
		System:          d.String("system"),
		Model:           d.String("model"),
		MaxTokens:       d.Int("max_tokens", 1, MaxTokensLimit),
		ReasoningEffort: d.String("reasoning_effort"),
		Tools:           toolschema.Tools(d, "tools", toolRules),
		ToolResults:     toolschema.Results(d, "tool_results", resultRules),
	}
	if think := d.Bool("think"); d.Has("think") {
		req.Think = &think
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
	if req.ReasoningEffort != "" && req.Think != nil {
		d.Bad("think", "set think or reasoning_effort, not both")
	}
	return req
}

// toolRules: a tool name is valid UTF-8 without control characters.
var toolRules = toolschema.Rules{
	Name: func(name string) error {
		if !utf8.ValidString(name) || strings.ContainsFunc(name, isControl) {
			return errors.New("holds control characters or invalid UTF-8")
		}
		return nil
	},
}

// resultRules: a result may lack a tool_id (see ToolResult), but not an
// output, which must have a JSON text.
var resultRules = toolschema.ResultRules{
	OptionalID: true,
	Output: func(v any) error {
		if v == nil {
			return errors.New("required (a string or any JSON value)")
		}
		_, err := outputText(v)
		return err
	},
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
