package anthropic_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/anthropic"
	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestDecode(t *testing.T) {
	half := 0.5
	schema := func(typ string) map[string]any {
		return map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": typ}}}
	}
	tool := func(name string) map[string]any {
		return map[string]any{"name": name, "input_schema": schema("string")}
	}
	tests := []struct {
		name    string
		in      map[string]any
		want    *anthropic.Request // checked when set
		wantErr []string           // substrings of the one validation error
	}{
		{name: "minimal", in: map[string]any{"prompt": "hi"}, want: &anthropic.Request{Prompt: "hi"}},
		{
			name: "every field",
			in: map[string]any{"prompt": "hi", "system": "be brief", "model": "claude-sonnet-4-5", "max_tokens": 4096,
				"temperature": 0.5, "web_search_max_uses": 2,
				"tools": []any{map[string]any{"name": "fs.read", "description": "Read.", "input_schema": schema("string")}}},
			want: &anthropic.Request{Prompt: "hi", System: "be brief", Model: "claude-sonnet-4-5", MaxTokens: 4096,
				Temperature: &half, WebSearchMaxUses: 2,
				Tools: []toolschema.Tool{{Name: "fs.read", Description: "Read.", Schema: schema("string")}}},
		},
		{name: "thinking", in: map[string]any{"prompt": "hi", "thinking_budget": 1024, "max_tokens": 2048},
			want: &anthropic.Request{Prompt: "hi", ThinkingBudget: 1024, MaxTokens: 2048}},
		{name: "integer temperature", in: map[string]any{"prompt": "hi", "temperature": 1}, want: &anthropic.Request{Prompt: "hi", Temperature: ptr(1.0)}},
		{
			name: "tool results alone",
			in: map[string]any{"tool_results": []any{
				map[string]any{"tool_id": "toolu_1", "output": "ok"},
				map[string]any{"tool_id": "toolu_2", "output": map[string]any{"n": 1}, "is_error": true},
			}},
			want: &anthropic.Request{ToolResults: []anthropic.ToolResult{
				{ToolID: "toolu_1", Output: "ok"}, {ToolID: "toolu_2", Output: map[string]any{"n": int8(1)}, IsError: true}}},
		},
		{name: "unknown field", in: map[string]any{"prompt": "hi", "resume": "x"}, wantErr: []string{`unknown field "resume"`}},
		{name: "no prompt", in: map[string]any{"system": "s"}, wantErr: []string{`field "prompt": required`}},
		{name: "empty prompt", in: map[string]any{"prompt": ""}, wantErr: []string{`field "prompt": required`}},
		{name: "prompt not a string", in: map[string]any{"prompt": 3}, wantErr: []string{`field "prompt": want a string, got an integer`}},
		{name: "NUL in the prompt", in: map[string]any{"prompt": "a\x00b"}, wantErr: []string{"NUL"}},
		{name: "tools not a list", in: map[string]any{"prompt": "hi", "tools": "fs"}, wantErr: []string{`field "tools": want an array`}},
		{name: "tool not a map", in: map[string]any{"prompt": "hi", "tools": []any{"fs"}}, wantErr: []string{`field "tools"[0]: want a map`}},
		{name: "tool without name", in: map[string]any{"prompt": "hi", "tools": []any{map[string]any{"input_schema": schema("string")}}},
			wantErr: []string{`field "tools"[0]: name: required`}},
		{name: "tool without schema", in: map[string]any{"prompt": "hi", "tools": []any{map[string]any{"name": "x"}}},
			wantErr: []string{`field "tools"[0]: input_schema: required`}},
		{name: "tool field unknown", in: map[string]any{"prompt": "hi", "tools": []any{map[string]any{"name": "x", "input_schema": schema("string"), "strict": true}}},
			wantErr: []string{`field "tools"[0]: unknown field "strict"`}},
		{name: "schema not an object schema", in: map[string]any{"prompt": "hi", "tools": []any{map[string]any{"name": "x", "input_schema": map[string]any{"type": "string"}}}},
			wantErr: []string{"only schemas of type object"}},
		{name: "schema unenforceable", in: map[string]any{"prompt": "hi", "tools": []any{map[string]any{"name": "x", "input_schema": schema("strin")}}},
			wantErr: []string{`input_schema: not a usable JSON Schema (draft 2020-12): #/properties/q/type: `}},
		{name: "duplicate tool", in: map[string]any{"prompt": "hi", "tools": []any{tool("x"), tool("x")}},
			wantErr: []string{`field "tools"[1]: name "x": declared twice`}},
		{name: "alias collision", in: map[string]any{"prompt": "hi", "tools": []any{tool("fs.read_file"), tool("fs_read_file_2055dfb0")}},
			wantErr: []string{`name "fs_read_file_2055dfb0": collides with tool "fs.read_file", both would reach the provider as "fs_read_file_2055dfb0"`}},
		{name: "web search name taken", in: map[string]any{"prompt": "hi", "web_search_max_uses": 1, "tools": []any{tool("web_search")}},
			wantErr: []string{"web search server tool"}},
		{name: "tool results empty", in: map[string]any{"tool_results": []any{}}, wantErr: []string{`field "tool_results": empty`}},
		{name: "tool result without id", in: map[string]any{"tool_results": []any{map[string]any{"output": "x"}}},
			wantErr: []string{`field "tool_results"[0]: tool_id: required`}},
		{name: "tool result twice", in: map[string]any{"tool_results": []any{map[string]any{"tool_id": "a"}, map[string]any{"tool_id": "a"}}},
			wantErr: []string{`tool_id "a": answered twice`}},
		{name: "tool result field unknown", in: map[string]any{"tool_results": []any{map[string]any{"tool_id": "a", "content": "x"}}},
			wantErr: []string{`unknown field "content"`}},
		{name: "tool result is_error not a bool", in: map[string]any{"tool_results": []any{map[string]any{"tool_id": "a", "is_error": "yes"}}},
			wantErr: []string{"is_error: want a boolean"}},
		{name: "temperature out of range", in: map[string]any{"prompt": "hi", "temperature": 1.5}, wantErr: []string{`field "temperature": 1.5 is out of range [0, 1]`}},
		{name: "temperature not a number", in: map[string]any{"prompt": "hi", "temperature": "hot"}, wantErr: []string{`field "temperature": want a number`}},
		{name: "temperature with thinking", in: map[string]any{"prompt": "hi", "temperature": 0.2, "thinking_budget": 2048},
			wantErr: []string{"cannot be set together with thinking_budget"}},
		{name: "thinking budget too small", in: map[string]any{"prompt": "hi", "thinking_budget": 512}, wantErr: []string{`field "thinking_budget": 512 is out of range`}},
		{name: "thinking budget not below max_tokens", in: map[string]any{"prompt": "hi", "thinking_budget": 4096, "max_tokens": 4096},
			wantErr: []string{"4096 must be below max_tokens 4096"}},
		{name: "max_tokens zero", in: map[string]any{"prompt": "hi", "max_tokens": 0}, wantErr: []string{`field "max_tokens": 0 is out of range`}},
		{name: "max_tokens float", in: map[string]any{"prompt": "hi", "max_tokens": 10.0}, wantErr: []string{`field "max_tokens": want an integer`}},
		{name: "web search uses zero", in: map[string]any{"prompt": "hi", "web_search_max_uses": 0}, wantErr: []string{`field "web_search_max_uses": 0 is out of range`}},
		{name: "model not a string", in: map[string]any{"prompt": "hi", "model": 4}, wantErr: []string{`field "model": want a string`}},
		{name: "every problem at once", in: map[string]any{"prompt": 1, "max_tokens": -1, "bogus": true},
			wantErr: []string{`field "bogus"`, `field "max_tokens"`, `field "prompt"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := wire.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := anthropic.Decode(b)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if tt.want != nil && !reflect.DeepEqual(got, *tt.want) {
					t.Errorf("Decode = %#v\nwant %#v", got, *tt.want)
				}
				return
			}
			if !errors.Is(err, wire.AgenticRequestValidationError) {
				t.Fatalf("err = %v, want AgenticRequestValidationError", err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to contain %q", err, w)
				}
			}
			if _, again := anthropic.Decode(b); again.Error() != err.Error() {
				t.Errorf("the message changed between calls: %q, then %q", err, again)
			}
		})
	}
}

func TestDecodeRefusesWhatIsNotAMap(t *testing.T) {
	for _, b := range [][]byte{nil, {0x91, 0x01}, {0xa2, 'h', 'i'}} {
		if _, err := anthropic.Decode(b); !errors.Is(err, wire.AgenticRequestValidationError) {
			t.Errorf("Decode(% x) = %v", b, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
