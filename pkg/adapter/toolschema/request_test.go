package toolschema_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// read decodes in, reads it with read, and returns what read gave and the
// problems of the request without the "test request: " prefix.
func read(t *testing.T, in map[string]any, read func(d *reqfield.Decoder) any) (any, string) {
	t.Helper()
	b, err := wire.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	d, err := reqfield.Decode("test", b)
	if err != nil {
		t.Fatal(err)
	}
	got := read(d)
	err = d.Err()
	if err == nil {
		return got, ""
	}
	if !errors.Is(err, wire.AgenticRequestValidationError) {
		t.Fatalf("err = %v, want AgenticRequestValidationError", err)
	}
	return got, strings.TrimPrefix(err.Error(), "AgenticRequestValidationError: test request: ")
}

func TestTools(t *testing.T) {
	obj := map[string]any{"type": "object"}
	tool := func(name string) map[string]any { return map[string]any{"name": name, "input_schema": obj} }
	upper := toolschema.Rules{
		Name: func(name string) error {
			if strings.ContainsRune(name, ' ') {
				return errors.New("has a space")
			}
			return nil
		},
		Schema: func(s map[string]any) error {
			if s["type"] != "object" {
				return errors.New("not an object")
			}
			return nil
		},
		Alias: strings.ToUpper,
	}
	tests := []struct {
		name    string
		in      map[string]any
		rules   toolschema.Rules
		want    []toolschema.Tool
		wantErr string // every problem, in order; "" for none
	}{
		{name: "absent", in: map[string]any{}, want: nil},
		{name: "empty", in: map[string]any{"tools": []any{}}, want: []toolschema.Tool{}},
		{name: "tools", in: map[string]any{"tools": []any{map[string]any{"name": "a", "description": "d", "input_schema": obj}, tool("b")}},
			want: []toolschema.Tool{{Name: "a", Description: "d", Schema: obj}, {Name: "b", Schema: obj}}},
		{name: "not a list", in: map[string]any{"tools": "a"}, wantErr: `field "tools": want an array of maps, got a string`},
		{name: "every problem of an element", in: map[string]any{"tools": []any{"a", map[string]any{"name": 1, "description": 2, "strict": true}}},
			wantErr: `field "tools"[0]: want a map, got a string; field "tools"[1]: unknown field "strict"; ` +
				`field "tools"[1]: name: want a string, got an integer; field "tools"[1]: description: want a string, got an integer; ` +
				`field "tools"[1]: input_schema: required, a JSON schema map`},
		{name: "empty name, schema not a map", in: map[string]any{"tools": []any{map[string]any{"name": "", "input_schema": "x"}}},
			wantErr: `field "tools"[0]: name: required, a non-empty string; field "tools"[0]: input_schema: want a map (a JSON schema), got a string`},
		{name: "unenforceable schema", in: map[string]any{"tools": []any{map[string]any{"name": "a", "input_schema": map[string]any{"type": "objekt"}}}},
			wantErr: `field "tools"[0]: input_schema: not a usable JSON Schema (draft 2020-12): #/type: 'anyOf' failed ` +
				`[value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'; got string, want array]`},
		{name: "schema not JSON", in: map[string]any{"tools": []any{map[string]any{"name": "a", "input_schema": map[string]any{"maximum": math.NaN()}}}},
			wantErr: `field "tools"[0]: input_schema: not a usable JSON Schema (draft 2020-12): #: not expressible as JSON: json: unsupported value: NaN`},
		{name: "declared twice", in: map[string]any{"tools": []any{tool("a"), tool("b"), tool("a")}},
			wantErr: `field "tools"[2]: name "a": declared twice`},
		{name: "rules", rules: upper, in: map[string]any{"tools": []any{tool("a b"), tool("a"), tool("A"),
			map[string]any{"name": "c", "input_schema": map[string]any{"type": "string"}}}},
			wantErr: `field "tools"[0]: name "a b": has a space; field "tools"[2]: name "A": collides with tool "a", both would reach the provider as "A"; ` +
				`field "tools"[3]: input_schema: not an object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := read(t, tt.in, func(d *reqfield.Decoder) any { return toolschema.Tools(d, "tools", tt.rules) })
			if err != tt.wantErr {
				t.Errorf("err = %s\nwant  %s", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestResults(t *testing.T) {
	noBinary := toolschema.ResultRules{Output: func(v any) error {
		if _, ok := v.([]byte); ok {
			return errors.New("binary")
		}
		return nil
	}}
	tests := []struct {
		name    string
		in      map[string]any
		rules   toolschema.ResultRules
		want    []toolschema.Result
		wantErr string
	}{
		{name: "absent", in: map[string]any{}, want: nil},
		{name: "results", in: map[string]any{"tool_results": []any{map[string]any{"tool_id": "a", "output": "x"},
			map[string]any{"tool_id": "b", "output": map[string]any{"n": 1}, "is_error": true}}},
			want: []toolschema.Result{{ToolID: "a", Output: "x"}, {ToolID: "b", Output: map[string]any{"n": int8(1)}, IsError: true}}},
		{name: "empty", in: map[string]any{"tool_results": []any{}},
			wantErr: `field "tool_results": empty; omit the field, or answer every pending tool call`},
		{name: "not a list", in: map[string]any{"tool_results": map[string]any{}}, wantErr: `field "tool_results": want an array of maps, got a map`},
		{name: "every problem", rules: noBinary, in: map[string]any{"tool_results": []any{
			map[string]any{"output": "x"}, map[string]any{"tool_id": 1}, map[string]any{"tool_id": "a", "is_error": "no", "content": 1},
			map[string]any{"tool_id": "a", "output": []byte{1}}, 7}},
			// Maps names the elements that are not maps before Results reads the rest.
			wantErr: `field "tool_results"[4]: want a map, got an integer; field "tool_results"[0]: tool_id: required, a non-empty string; field "tool_results"[1]: tool_id: want a string, got an integer; ` +
				`field "tool_results"[2]: unknown field "content"; field "tool_results"[2]: is_error: want a boolean, got a string; ` +
				`field "tool_results"[3]: tool_id "a": answered twice; field "tool_results"[3]: output: binary`},
		{name: "optional id", rules: toolschema.ResultRules{OptionalID: true}, in: map[string]any{"tool_results": []any{
			map[string]any{"output": "x"}, map[string]any{"output": "y"}, map[string]any{"tool_id": "a"}}},
			want: []toolschema.Result{{Output: "x"}, {Output: "y"}, {ToolID: "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := read(t, tt.in, func(d *reqfield.Decoder) any { return toolschema.Results(d, "tool_results", tt.rules) })
			if err != tt.wantErr {
				t.Errorf("err = %s\nwant  %s", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}
