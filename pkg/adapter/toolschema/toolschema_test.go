package toolschema_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
)

var schema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"path":  map[string]any{"type": "string", "minLength": 1},
		"lines": map[string]any{"type": "integer", "minimum": 1, "maximum": 1000},
		"mode":  map[string]any{"type": "string", "enum": []any{"read", "write"}},
		"tags":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "maxItems": 2},
		"opt":   map[string]any{"type": []any{"string", "null"}},
		// The keywords the hand-written subset this package once was let
		// through unenforced.
		"branch": map[string]any{"type": "string", "pattern": "^[a-z][a-z0-9-]*$"},
		"email":  map[string]any{"type": "string", "format": "email"},
		"when":   map[string]any{"type": "string", "format": "date-time"},
		"range":  map[string]any{"$ref": "#/$defs/range"},
		"port":   map[string]any{"allOf": []any{map[string]any{"type": "integer"}, map[string]any{"minimum": 1}, map[string]any{"maximum": 65535}}},
		"target": map[string]any{"oneOf": []any{
			map[string]any{"type": "object", "properties": map[string]any{"file": map[string]any{"type": "string"}}, "required": []any{"file"}},
			map[string]any{"type": "object", "properties": map[string]any{"url": map[string]any{"type": "string", "format": "uri"}}, "required": []any{"url"}},
		}},
		"size": map[string]any{"anyOf": []any{map[string]any{"type": "integer"}, map[string]any{"const": "auto"}}},
	},
	"required":             []any{"path"},
	"additionalProperties": false,
	"$defs": map[string]any{"range": map[string]any{
		"type": "object", "properties": map[string]any{"from": map[string]any{"type": "integer"}, "to": map[string]any{"type": "integer"}},
		"required": []any{"from", "to"}, "additionalProperties": false,
	}},
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]any
		want []toolschema.Problem // every problem, in order; nil for none
	}{
		{name: "ok", in: map[string]any{"path": "a", "lines": int64(3), "mode": "read", "tags": []any{"x"}, "opt": nil,
			"branch": "h12-schema", "email": "dev@example.com", "when": "2025-01-02T03:04:05Z", "range": map[string]any{"from": 1, "to": 2},
			"port": int8(80), "target": map[string]any{"url": "https://example.com/x"}, "size": "auto"}},
		{name: "ok float integer", in: map[string]any{"path": "a", "lines": 3.0, "size": uint16(7)}},
		{name: "ok msgpack integers", in: map[string]any{"path": "a", "lines": uint8(3), "port": int16(443), "range": map[string]any{"from": int8(1), "to": int64(2)}}},
		{name: "missing required", in: map[string]any{}, want: []toolschema.Problem{{Location: "#", Reason: "missing property 'path'"}}},
		{name: "wrong type", in: map[string]any{"path": 3.0}, want: []toolschema.Problem{{Location: "#/path", Reason: "got number, want string"}}},
		{name: "not an integer", in: map[string]any{"path": "a", "lines": 1.5}, want: []toolschema.Problem{{Location: "#/lines", Reason: "got number, want integer"}}},
		{name: "range", in: map[string]any{"path": "a", "lines": int64(0)}, want: []toolschema.Problem{{Location: "#/lines", Reason: "minimum: got 0, want 1"}}},
		{name: "enum", in: map[string]any{"path": "a", "mode": "delete"}, want: []toolschema.Problem{{Location: "#/mode", Reason: "value must be one of 'read', 'write'"}}},
		{name: "items", in: map[string]any{"path": "a", "tags": []any{"x", 2.0}}, want: []toolschema.Problem{{Location: "#/tags/1", Reason: "got number, want string"}}},
		{name: "max items", in: map[string]any{"path": "a", "tags": []any{"x", "y", "z"}}, want: []toolschema.Problem{{Location: "#/tags", Reason: "maxItems: got 3, want 2"}}},
		{name: "unknown property", in: map[string]any{"path": "a", "evil": true}, want: []toolschema.Problem{{Location: "#", Reason: "additional properties 'evil' not allowed"}}},
		{name: "empty string", in: map[string]any{"path": ""}, want: []toolschema.Problem{{Location: "#/path", Reason: "minLength: got 0, want 1"}}},
		{name: "pattern", in: map[string]any{"path": "a", "branch": "../../etc"},
			want: []toolschema.Problem{{Location: "#/branch", Reason: "'../../etc' does not match pattern '^[a-z][a-z0-9-]*$'"}}},
		{name: "format email", in: map[string]any{"path": "a", "email": "nobody"},
			want: []toolschema.Problem{{Location: "#/email", Reason: "'nobody' is not valid email: missing @"}}},
		{name: "format date-time", in: map[string]any{"path": "a", "when": "yesterday"},
			want: []toolschema.Problem{{Location: "#/when", Reason: "'yesterday' is not valid date-time: less than 20 characters long"}}},
		{name: "ref", in: map[string]any{"path": "a", "range": map[string]any{"from": "1", "until": 2}},
			want: []toolschema.Problem{{Location: "#/range", Reason: "missing property 'to'"}, {Location: "#/range", Reason: "additional properties 'until' not allowed"},
				{Location: "#/range/from", Reason: "got string, want integer"}}},
		{name: "allOf", in: map[string]any{"path": "a", "port": 70000}, want: []toolschema.Problem{{Location: "#/port", Reason: "maximum: got 70000, want 65535"}}},
		{name: "oneOf none", in: map[string]any{"path": "a", "target": map[string]any{"url": "not a uri"}},
			want: []toolschema.Problem{{Location: "#/target", Reason: "'oneOf' failed, none matched [missing property 'file'; #/target/url: 'not a uri' is not valid uri: relative url]"}}},
		{name: "oneOf both", in: map[string]any{"path": "a", "target": map[string]any{"file": "a", "url": "https://example.com"}},
			want: []toolschema.Problem{{Location: "#/target", Reason: "'oneOf' failed, subschemas 0, 1 matched"}}},
		{name: "anyOf", in: map[string]any{"path": "a", "size": "big"},
			want: []toolschema.Problem{{Location: "#/size", Reason: "'anyOf' failed [got string, want integer; value must be 'auto']"}}},
		{name: "every problem, by location", in: map[string]any{"path": 1, "lines": 0, "branch": "X"},
			want: []toolschema.Problem{{Location: "#/branch", Reason: "'X' does not match pattern '^[a-z][a-z0-9-]*$'"},
				{Location: "#/lines", Reason: "minimum: got 0, want 1"}, {Location: "#/path", Reason: "got number, want string"}}},
		{name: "not a JSON value", in: map[string]any{"path": "a", "lines": math.NaN()},
			want: []toolschema.Problem{{Location: "#/lines", Reason: "invalid jsonType float64"}}},
	}
	compiled, err := toolschema.Compile(schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, validate := range []func() error{
				func() error { return compiled.Validate(tt.in) },
				func() error { return toolschema.Validate(schema, tt.in) },
			} {
				wantProblems(t, "Validate", validate(), tt.want, toolschema.ErrInvalid, toolschema.ErrSchema)
			}
		})
	}
}

func TestValidateMessage(t *testing.T) {
	many := map[string]any{"type": "array", "items": map[string]any{"type": "string", "pattern": "^a"}}
	s, err := toolschema.Compile(map[string]any{"type": "object", "properties": map[string]any{"xs": many}})
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]any, 20)
	for i := range xs {
		xs[i] = strings.Repeat("é", 300) // a reason quoting it is cut, on a rune boundary
	}
	err = s.Validate(map[string]any{"xs": xs})
	msg := err.Error()
	if !strings.HasPrefix(msg, "tool arguments do not match the schema: #/xs/0: '") || !strings.HasSuffix(msg, "; and 4 more") ||
		strings.Count(msg, "#/xs/") != 16 || strings.Count(msg, "…") != 16 || !strings.Contains(msg, "é…") {
		t.Errorf("message %q: want the first 16 of 20 problems, each cut short", msg)
	}
}

func TestCheckSchema(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "local.json")
	if err := os.WriteFile(local, []byte(`{"type": "string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	obj := func(props map[string]any) map[string]any {
		return map[string]any{"type": "object", "properties": props}
	}
	tests := []struct {
		name string
		in   map[string]any
		want []toolschema.Problem // nil: it compiles
	}{
		{name: "schema", in: schema},
		{name: "empty", in: map[string]any{}},
		{name: "draft 2020-12 named", in: map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}},
		{name: "ref to a meta-schema", in: obj(map[string]any{"s": map[string]any{"$ref": "https://json-schema.org/draft/2020-12/schema"}})},
		{name: "unknown type", in: obj(map[string]any{"x": map[string]any{"type": "strin"}}),
			want: []toolschema.Problem{{Location: "#/properties/x/type", Reason: "'anyOf' failed [value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'; got string, want array]"}}},
		{name: "every problem, by location", in: map[string]any{"type": "object", "required": "path", "properties": map[string]any{"x": map[string]any{"minLength": -1}}},
			want: []toolschema.Problem{{Location: "#/properties/x/minLength", Reason: "minimum: got -1, want 0"}, {Location: "#/required", Reason: "got string, want array"}}},
		{name: "properties not an object", in: map[string]any{"properties": []any{"x"}},
			want: []toolschema.Problem{{Location: "#/properties", Reason: "got array, want object"}}},
		{name: "pattern Go cannot compile", in: obj(map[string]any{"x": map[string]any{"pattern": "^(?!admin)"}}),
			want: []toolschema.Problem{{Location: "#/properties/x/pattern", Reason: "'^(?!admin)' is not valid regex: error parsing regexp: invalid or unsupported Perl syntax: `(?!`"}}},
		{name: "ref to nothing", in: obj(map[string]any{"x": map[string]any{"$ref": "#/$defs/missing"}}),
			want: []toolschema.Problem{{Location: "#", Reason: `json-pointer in "#/$defs/missing" not found`}}},
		{name: "ref over the network", in: obj(map[string]any{"x": map[string]any{"$ref": "https://example.com/schema.json"}}),
			want: []toolschema.Problem{{Location: "#", Reason: `"https://example.com/schema.json" is outside the schema: a $ref may point only within it (such as "#/$defs/name"), and nothing is loaded from a file or the network`}}},
		{name: "ref to a file", in: obj(map[string]any{"x": map[string]any{"$ref": "file://" + local}}),
			want: []toolschema.Problem{{Location: "#", Reason: `"file://` + local + `" is outside the schema: a $ref may point only within it (such as "#/$defs/name"), and nothing is loaded from a file or the network`}}},
		{name: "ref to a path", in: obj(map[string]any{"x": map[string]any{"$ref": local}}),
			want: []toolschema.Problem{{Location: "#", Reason: `"` + local + `" is outside the schema: a $ref may point only within it (such as "#/$defs/name"), and nothing is loaded from a file or the network`}}},
		{name: "ref relative to an $id", in: map[string]any{"$id": "https://example.com/tools/", "$ref": "other.json"},
			want: []toolschema.Problem{{Location: "#", Reason: `"https://example.com/tools/other.json" is outside the schema: a $ref may point only within it (such as "#/$defs/name"), and nothing is loaded from a file or the network`}}},
		{name: "meta-schema over the network", in: map[string]any{"$schema": "https://example.com/meta", "type": "object"},
			want: []toolschema.Problem{{Location: "#", Reason: `"https://example.com/meta" is outside the schema: a $ref may point only within it (such as "#/$defs/name"), and nothing is loaded from a file or the network`}}},
		{name: "draft-07 named", in: map[string]any{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "definitions": map[string]any{"n": map[string]any{"type": "integer"}}, "properties": map[string]any{"n": map[string]any{"$ref": "#/definitions/n"}}}},
		{name: "not JSON", in: map[string]any{"minimum": math.Inf(1)},
			want: []toolschema.Problem{{Location: "#", Reason: "not expressible as JSON: json: unsupported value: +Inf"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblems(t, "CheckSchema", toolschema.CheckSchema(tt.in), tt.want, toolschema.ErrSchema, toolschema.ErrInvalid)
			if tt.want == nil {
				return
			}
			// Validate refuses what CheckSchema refuses, before looking at the arguments.
			if verr := toolschema.Validate(tt.in, map[string]any{}); !errors.Is(verr, toolschema.ErrSchema) {
				t.Errorf("Validate = %v, want ErrSchema", verr)
			}
		})
	}
}

// wantProblems fails t unless err, what call returned, lists exactly the
// problems want, and matches sentinel but not other; a nil want asks for
// no error.
func wantProblems(t *testing.T, call string, err error, want []toolschema.Problem, sentinel, other error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("%s = %v", call, err)
		}
		return
	}
	var (
		got []toolschema.Problem
		ae  *toolschema.ArgumentsError
		se  *toolschema.SchemaError
	)
	switch {
	case errors.As(err, &ae):
		got = ae.Problems
	case errors.As(err, &se):
		got = se.Problems
	}
	if got == nil || !errors.Is(err, sentinel) || errors.Is(err, other) {
		t.Fatalf("%s = %v, want an error matching %q, not %q", call, err, sentinel, other)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s problems\n  %q\nwant\n  %q", call, got, want)
	}
}

func TestCompileCopies(t *testing.T) {
	s := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}
	c, err := toolschema.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	s["properties"].(map[string]any)["n"] = map[string]any{"type": "string"}
	if err := c.Validate(map[string]any{"n": "x"}); !errors.Is(err, toolschema.ErrInvalid) {
		t.Errorf("Validate = %v after the map changed, want the schema as compiled", err)
	}
}

func TestValidateConcurrent(t *testing.T) {
	c, err := toolschema.Compile(schema)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			args := map[string]any{"path": "a", "lines": i + 1}
			if i%2 == 1 {
				args["branch"] = "X"
			}
			if err := c.Validate(args); (err != nil) != (i%2 == 1) {
				t.Errorf("Validate(%v) = %v", args, err)
			}
		})
	}
	wg.Wait()
}

// The arguments of a pending call are validated once per call when a
// conversation continues, and every tool schema is compiled each time a
// request is read.
func BenchmarkCompile(b *testing.B) {
	for b.Loop() {
		if _, err := toolschema.Compile(schema); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	args := map[string]any{"path": "a", "lines": 3.0, "mode": "read", "tags": []any{"x"}, "branch": "main",
		"email": "dev@example.com", "range": map[string]any{"from": 1.0, "to": 2.0}, "target": map[string]any{"file": "f"}}
	c, err := toolschema.Compile(schema)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("compiled", func(b *testing.B) {
		for b.Loop() {
			if err := c.Validate(args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("with compile", func(b *testing.B) {
		for b.Loop() {
			if err := toolschema.Validate(schema, args); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDraft07 checks that a schema naming draft-07 is compiled as draft-07
// and enforced: its definitions are reached through $ref.
func TestDraft07(t *testing.T) {
	s := map[string]any{
		"$schema":     "http://json-schema.org/draft-07/schema#",
		"type":        "object",
		"definitions": map[string]any{"n": map[string]any{"type": "integer", "minimum": 1}},
		"properties":  map[string]any{"n": map[string]any{"$ref": "#/definitions/n"}},
	}
	if err := toolschema.Validate(s, map[string]any{"n": 2}); err != nil {
		t.Fatalf("valid arguments refused: %v", err)
	}
	for _, bad := range []any{0, "two"} {
		if err := toolschema.Validate(s, map[string]any{"n": bad}); !errors.Is(err, toolschema.ErrInvalid) {
			t.Errorf("n=%v: err = %v, want ErrInvalid", bad, err)
		}
	}
}
