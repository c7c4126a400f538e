package openai_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestDecode(t *testing.T) {
	obj := map[string]any{"type": "object"}
	tool := func(name string) map[string]any { return map[string]any{"name": name, "input_schema": obj} }
	long := strings.Repeat("n", openai.MaxToolName+1)
	tests := []struct {
		name    string
		in      map[string]any
		want    *openai.Request // checked when set
		wantErr []string        // substrings of the one validation error
	}{
		{name: "minimal", in: map[string]any{"prompt": "hi"}, want: &openai.Request{Prompt: "hi"}},
		{name: "full", in: map[string]any{"prompt": "hi", "system": "s", "model": "gpt-5.5", "max_tokens": 100,
			"temperature": 1, "reasoning_effort": "low", "tools": []any{tool("fs.read")}},
			want: &openai.Request{Prompt: "hi", System: "s", Model: "gpt-5.5", MaxTokens: 100, Temperature: ptr(1.0),
				ReasoningEffort: "low", Tools: []toolschema.Tool{{Name: "fs.read", Schema: obj}}}},
		{name: "tool_results_alone", in: map[string]any{"tool_results": []any{map[string]any{"tool_id": "call_1", "output": map[string]any{"n": 1}, "is_error": true}}},
			want: &openai.Request{ToolResults: []openai.ToolResult{{ToolID: "call_1", Output: map[string]any{"n": int8(1)}, IsError: true}}}},
		{name: "prompt_missing", in: map[string]any{}, wantErr: []string{`field "prompt": required`}},
		{name: "prompt_empty", in: map[string]any{"prompt": ""}, wantErr: []string{`field "prompt": required`}},
		{name: "prompt_not_string", in: map[string]any{"prompt": 3}, wantErr: []string{`field "prompt": want a string, got an integer`}},
		{name: "unknown_field", in: map[string]any{"prompt": "hi", "resume": "x", "stream": true}, wantErr: []string{`unknown field "resume"`, `unknown field "stream"`}},
		{name: "max_tokens_low", in: map[string]any{"prompt": "hi", "max_tokens": 8}, wantErr: []string{`field "max_tokens": 8 is out of range [16, 1000000]`}},
		{name: "max_tokens_float", in: map[string]any{"prompt": "hi", "max_tokens": 100.0}, wantErr: []string{`field "max_tokens": want an integer, got a float`}},
		{name: "temperature_high", in: map[string]any{"prompt": "hi", "temperature": 2.5}, wantErr: []string{`field "temperature": 2.5 is out of range [0, 2]`}},
		{name: "temperature_string", in: map[string]any{"prompt": "hi", "temperature": "hot"}, wantErr: []string{`field "temperature": want a number, got a string`}},
		{name: "effort_unknown", in: map[string]any{"prompt": "hi", "reasoning_effort": "extreme"}, wantErr: []string{`field "reasoning_effort": "extreme" is not one of none, minimal`}},
		{name: "tools_not_list", in: map[string]any{"prompt": "hi", "tools": "fs.read"}, wantErr: []string{`field "tools": want an array of maps, got a string`}},
		{name: "tool_not_map", in: map[string]any{"prompt": "hi", "tools": []any{"fs.read"}}, wantErr: []string{`field "tools"[0]: want a map`}},
		{name: "tool_fields", in: map[string]any{"prompt": "hi", "tools": []any{map[string]any{"strict": true, "description": 1}}},
			wantErr: []string{`field "tools"[0]: unknown field "strict"`, `name: required`, `description: want a string, got an integer`, `input_schema: required`}},
		{name: "tool_name_space", in: map[string]any{"prompt": "hi", "tools": []any{tool("fs read")}}, wantErr: []string{`has no spaces`}},
		{name: "tool_name_long", in: map[string]any{"prompt": "hi", "tools": []any{tool(long)}}, wantErr: []string{`longer than 256 bytes`}},
		{name: "tool_schema_not_object", in: map[string]any{"prompt": "hi", "tools": []any{map[string]any{"name": "a", "input_schema": map[string]any{"type": "string"}}}},
			wantErr: []string{`the root must be an object schema`}},
		{name: "tool_schema_bad_type", in: map[string]any{"prompt": "hi", "tools": []any{map[string]any{"name": "a", "input_schema": map[string]any{"type": "object",
			"properties": map[string]any{"x": map[string]any{"type": "str"}}}}}}, wantErr: []string{`input_schema: not a usable JSON Schema (draft 2020-12): #/properties/x/type: `}},
		{name: "tool_duplicate", in: map[string]any{"prompt": "hi", "tools": []any{tool("fs.read"), tool("fs.read")}}, wantErr: []string{`field "tools"[1]: name "fs.read": declared twice`}},
		{name: "tool_alias_collision", in: map[string]any{"prompt": "hi", "tools": []any{tool("fs.read"), tool("fs_read")}},
			wantErr: []string{`field "tools"[1]: name "fs_read": collides with tool "fs.read", both would reach the provider as "fs_read"`}},
		{name: "results_not_list", in: map[string]any{"tool_results": map[string]any{}}, wantErr: []string{`field "tool_results": want an array`}},
		{name: "results_empty", in: map[string]any{"tool_results": []any{}}, wantErr: []string{`field "tool_results": empty`}},
		{name: "result_fields", in: map[string]any{"tool_results": []any{map[string]any{"id": "x", "is_error": "yes", "output": []byte{1}}}},
			wantErr: []string{`unknown field "id"`, `tool_id: required`, `is_error: want a boolean, got a string`, `output: want a string or a JSON value, got binary`}},
		{name: "result_twice", in: map[string]any{"tool_results": []any{map[string]any{"tool_id": "c"}, map[string]any{"tool_id": "c"}}},
			wantErr: []string{`field "tool_results"[1]: tool_id "c": answered twice`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := openai.Decode(conformance.Encode(t, tt.in))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if tt.want != nil && !reflect.DeepEqual(got, *tt.want) {
					t.Errorf("got %+v, want %+v", got, *tt.want)
				}
				return
			}
			if !errors.Is(err, wire.AgenticRequestValidationError) {
				t.Fatalf("err = %v, want AgenticRequestValidationError", err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v\nwant it to contain %q", err, w)
				}
			}
		})
	}
	t.Run("not_a_map", func(t *testing.T) {
		b, _ := wire.Marshal([]any{"prompt"})
		if _, err := openai.Decode(b); !errors.Is(err, wire.AgenticRequestValidationError) {
			t.Errorf("err = %v", err)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func TestAlias(t *testing.T) {
	long := strings.Repeat("pkg.", 20) + "read" // 84 bytes
	tests := []struct{ in, want string }{
		{"fs.read", "fs_read"},
		{"fs_read", "fs_read"},
		{"web-search", "web-search"},
		{"mcp.github.create_issue", "mcp_github_create_issue"},
		{"räksmörgås.ät", "r_ksm_rg_s__t"},
		{long, strings.Repeat("pkg_", 13) + "pkg" + "_" + openai.Alias(long)[56:]},
	}
	for _, tt := range tests {
		got := openai.Alias(tt.in)
		if got != tt.want {
			t.Errorf("Alias(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if len(got) > openai.MaxFunctionName || strings.Trim(got, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
			t.Errorf("Alias(%q) = %q is not a valid OpenAI function name", tt.in, got)
		}
		if again := openai.Alias(tt.in); again != got {
			t.Errorf("Alias(%q) is not deterministic: %q, then %q", tt.in, got, again)
		}
	}
	// Two long names with the same 55-byte prefix stay apart.
	other := strings.Repeat("pkg.", 20) + "list"
	if openai.Alias(long) == openai.Alias(other) {
		t.Errorf("Alias(%q) == Alias(%q)", long, other)
	}
	if n := len(openai.Alias(long)); n != openai.MaxFunctionName {
		t.Errorf("len(Alias(long)) = %d", n)
	}
}
