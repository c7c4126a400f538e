package ollama_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/ollama"
	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
)

func TestDecode(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}
	yes := true
	half := 0.5
	tests := []conformance.DecodeCase[ollama.Request]{
		{Name: "minimal", In: map[string]any{"prompt": "hi"}, Want: ollama.Request{Prompt: "hi"}},
		{Name: "everything", In: map[string]any{"prompt": "hi", "system": "s", "model": "m", "max_tokens": 10,
			"temperature": 0.5, "think": true,
			"tools": []any{map[string]any{"name": "get_weather", "description": "d", "input_schema": schema}}},
			Want: ollama.Request{Prompt: "hi", System: "s", Model: "m", MaxTokens: 10, Temperature: &half, Think: &yes,
				Tools: []toolschema.Tool{{Name: "get_weather", Description: "d", Schema: schema}}}},
		{Name: "integer temperature", In: map[string]any{"prompt": "hi", "temperature": 1},
			Want: ollama.Request{Prompt: "hi", Temperature: ptr(1.0)}},
		{Name: "results without prompt", In: map[string]any{"tool_results": []any{
			map[string]any{"tool_id": "call_1", "output": map[string]any{"ok": true}, "is_error": false},
			map[string]any{"output": "x", "is_error": true}}},
			Want: ollama.Request{ToolResults: []ollama.ToolResult{{ToolID: "call_1", Output: map[string]any{"ok": true}},
				{Output: "x", IsError: true}}}},
		{Name: "effort", In: map[string]any{"prompt": "hi", "reasoning_effort": "high"},
			Want: ollama.Request{Prompt: "hi", ReasoningEffort: "high"}},

		{Name: "empty", In: map[string]any{}, WantErr: []string{`field "prompt": required`}},
		{Name: "unknown field", In: map[string]any{"prompt": "hi", "resume": "x"}, WantErr: []string{`unknown field "resume"`}},
		{Name: "all problems at once", In: map[string]any{"prompt": 3, "max_tokens": 0, "think": "yes", "temperature": 3.5,
			"reasoning_effort": "max", "stream": true},
			WantErr: []string{`field "prompt": want a string`, `field "max_tokens": 0 is out of range`, `field "think": want a boolean`,
				`field "temperature": 3.5 is out of range [0, 2]`, `field "reasoning_effort": "max" is not one of low, medium, high`,
				`unknown field "stream"`}},
		{Name: "think and effort", In: map[string]any{"prompt": "hi", "think": true, "reasoning_effort": "low"},
			WantErr: []string{"set think or reasoning_effort, not both"}},
		{Name: "tools not a list", In: map[string]any{"prompt": "hi", "tools": "x"}, WantErr: []string{`field "tools": want an array`}},
		{Name: "bad tools", In: map[string]any{"prompt": "hi", "tools": []any{
			map[string]any{"name": "", "input_schema": schema},
			map[string]any{"name": "a", "input_schema": map[string]any{"type": "objekt"}},
			map[string]any{"name": "b"},
			map[string]any{"name": "c", "input_schema": schema, "strict": true},
			map[string]any{"name": "d", "input_schema": schema}, map[string]any{"name": "d", "input_schema": schema},
			"e"}},
			WantErr: []string{`field "tools"[0]: name: required`, `field "tools"[1]: input_schema: `, `not a usable JSON Schema (draft 2020-12): #/type: `,
				`field "tools"[2]: input_schema: required`, `field "tools"[3]: unknown field "strict"`,
				`field "tools"[5]: name "d": declared twice`, `field "tools"[6]: want a map`}},
		{Name: "bad results", In: map[string]any{"tool_results": []any{
			map[string]any{"tool_id": 1, "output": "x"},
			map[string]any{"tool_id": "a"},
			map[string]any{"tool_id": "b", "output": []byte{1}},
			map[string]any{"tool_id": "c", "output": "x", "is_error": "no"},
			map[string]any{"tool_id": "d", "output": "x"}, map[string]any{"tool_id": "d", "output": "y"},
			map[string]any{"tool_id": "e", "output": "x", "extra": 1}}},
			WantErr: []string{`field "tool_results"[0]: tool_id: want a string`, `field "tool_results"[1]: output: required`,
				`field "tool_results"[2]: output: binary`, `field "tool_results"[3]: is_error: want a boolean`,
				`field "tool_results"[5]: tool_id "d": answered twice`, `field "tool_results"[6]: unknown field "extra"`}},
		{Name: "empty results", In: map[string]any{"tool_results": []any{}}, WantErr: []string{"empty"}},
	}
	conformance.Decoding(t, ollama.Decode, tests)
}

func TestDecodeMalformed(t *testing.T) {
	conformance.DecodeRefuses(t, ollama.Decode, [][]byte{nil, {0x91, 0x01}, {0xc1}, {0x81, 0xa1}})
}

func ptr[T any](v T) *T { return &v }
