package ollama_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/ollama"
	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestDecode(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}
	yes := true
	half := 0.5
	tests := []struct {
		name    string
		in      map[string]any
		want    ollama.Request
		wantErr []string // every fragment must be in the one error
	}{
		{name: "minimal", in: map[string]any{"prompt": "hi"}, want: ollama.Request{Prompt: "hi"}},
		{name: "everything", in: map[string]any{"prompt": "hi", "system": "s", "model": "m", "max_tokens": 10,
			"temperature": 0.5, "think": true,
			"tools": []any{map[string]any{"name": "get_weather", "description": "d", "input_schema": schema}}},
			want: ollama.Request{Prompt: "hi", System: "s", Model: "m", MaxTokens: 10, Temperature: &half, Think: &yes,
				Tools: []toolschema.Tool{{Name: "get_weather", Description: "d", Schema: schema}}}},
		{name: "integer temperature", in: map[string]any{"prompt": "hi", "temperature": 1},
			want: ollama.Request{Prompt: "hi", Temperature: ptr(1.0)}},
		{name: "results without prompt", in: map[string]any{"tool_results": []any{
			map[string]any{"tool_id": "call_1", "output": map[string]any{"ok": true}, "is_error": false},
			map[string]any{"output": "x", "is_error": true}}},
			want: ollama.Request{ToolResults: []ollama.ToolResult{{ToolID: "call_1", Output: map[string]any{"ok": true}},
				{Output: "x", IsError: true}}}},
		{name: "effort", in: map[string]any{"prompt": "hi", "reasoning_effort": "high"},
			want: ollama.Request{Prompt: "hi", ReasoningEffort: "high"}},

		{name: "empty", in: map[string]any{}, wantErr: []string{`field "prompt": required`}},
		{name: "unknown field", in: map[string]any{"prompt": "hi", "resume": "x"}, wantErr: []string{`unknown field "resume"`}},
		{name: "all problems at once", in: map[string]any{"prompt": 3, "max_tokens": 0, "think": "yes", "temperature": 3.5,
			"reasoning_effort": "max", "stream": true},
			wantErr: []string{`field "prompt": want a string`, `field "max_tokens": 0 is out of range`, `field "think": want a boolean`,
				`field "temperature": 3.5 is out of range [0, 2]`, `field "reasoning_effort": "max" is not one of low, medium, high`,
				`unknown field "stream"`}},
		{name: "think and effort", in: map[string]any{"prompt": "hi", "think": true, "reasoning_effort": "low"},
			wantErr: []string{"set think or reasoning_effort, not both"}},
		{name: "tools not a list", in: map[string]any{"prompt": "hi", "tools": "x"}, wantErr: []string{`field "tools": want an array`}},
		{name: "bad tools", in: map[string]any{"prompt": "hi", "tools": []any{
			map[string]any{"name": "", "input_schema": schema},
			map[string]any{"name": "a", "input_schema": map[string]any{"type": "objekt"}},
			map[string]any{"name": "b"},
			map[string]any{"name": "c", "input_schema": schema, "strict": true},
			map[string]any{"name": "d", "input_schema": schema}, map[string]any{"name": "d", "input_schema": schema},
			"e"}},
			wantErr: []string{`field "tools"[0]: name: required`, `field "tools"[1]: input_schema: `, `not a usable JSON Schema (draft 2020-12): #/type: `,
				`field "tools"[2]: input_schema: required`, `field "tools"[3]: unknown field "strict"`,
				`field "tools"[5]: name "d": declared twice`, `field "tools"[6]: want a map`}},
		{name: "bad results", in: map[string]any{"tool_results": []any{
			map[string]any{"tool_id": 1, "output": "x"},
			map[string]any{"tool_id": "a"},
			map[string]any{"tool_id": "b", "output": []byte{1}},
			map[string]any{"tool_id": "c", "output": "x", "is_error": "no"},
			map[string]any{"tool_id": "d", "output": "x"}, map[string]any{"tool_id": "d", "output": "y"},
			map[string]any{"tool_id": "e", "output": "x", "extra": 1}}},
			wantErr: []string{`field "tool_results"[0]: tool_id: want a string`, `field "tool_results"[1]: output: required`,
				`field "tool_results"[2]: output: binary`, `field "tool_results"[3]: is_error: want a boolean`,
				`field "tool_results"[5]: tool_id "d": answered twice`, `field "tool_results"[6]: unknown field "extra"`}},
		{name: "empty results", in: map[string]any{"tool_results": []any{}}, wantErr: []string{"empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := wire.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ollama.Decode(b)
			if len(tt.wantErr) > 0 {
				if !errors.Is(err, wire.AgenticRequestValidationError) {
					t.Fatalf("err = %v, want AgenticRequestValidationError", err)
				}
				for _, f := range tt.wantErr {
					if !strings.Contains(err.Error(), f) {
						t.Errorf("err = %v\nwant it to contain %q", err, f)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeMalformed(t *testing.T) {
	for _, b := range [][]byte{nil, {0x91, 0x01}, {0xc1}, {0x81, 0xa1}} {
		if _, err := ollama.Decode(b); !errors.Is(err, wire.AgenticRequestValidationError) {
			t.Errorf("Decode(% x) = %v, want AgenticRequestValidationError", b, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
