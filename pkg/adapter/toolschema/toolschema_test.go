package toolschema_test

import (
	"errors"
	"strings"
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
	},
	"required":             []any{"path"},
	"additionalProperties": false,
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]any
		wantErr string
	}{
		{"ok", map[string]any{"path": "a", "lines": int64(3), "mode": "read", "tags": []any{"x"}, "opt": nil}, ""},
		{"ok float integer", map[string]any{"path": "a", "lines": 3.0}, ""},
		{"missing required", map[string]any{}, `missing required property "path"`},
		{"wrong type", map[string]any{"path": 3.0}, "$.path: want string"},
		{"not an integer", map[string]any{"path": "a", "lines": 1.5}, "$.lines: want integer"},
		{"range", map[string]any{"path": "a", "lines": int64(0)}, "below the minimum"},
		{"enum", map[string]any{"path": "a", "mode": "delete"}, "is not one of"},
		{"items", map[string]any{"path": "a", "tags": []any{"x", 2.0}}, "$.tags[1]: want string"},
		{"max items", map[string]any{"path": "a", "tags": []any{"x", "y", "z"}}, "more than 2 items"},
		{"unknown property", map[string]any{"path": "a", "evil": true}, `unknown property "evil"`},
		{"empty string", map[string]any{"path": ""}, "shorter than 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := toolschema.Validate(schema, tt.in)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if !errors.Is(err, toolschema.ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want ErrInvalid containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestCheckSchema(t *testing.T) {
	if err := toolschema.CheckSchema(schema); err != nil {
		t.Fatal(err)
	}
	bad := map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "strin"}}}
	if err := toolschema.CheckSchema(bad); err == nil || !strings.Contains(err.Error(), `$.x: unknown type "strin"`) {
		t.Fatalf("CheckSchema = %v", err)
	}
}
