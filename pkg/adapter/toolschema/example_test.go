package toolschema_test

import (
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
)

func ExampleValidate() {
	schema := map[string]any{
		"type":       "object",
		"properties": map[string]any{"path": map[string]any{"type": "string"}},
		"required":   []any{"path"},
	}
	fmt.Println(toolschema.Validate(schema, map[string]any{"path": "README.md"}))
	fmt.Println(toolschema.Validate(schema, map[string]any{"path": 7.0}))
	// Output:
	// <nil>
	// tool arguments do not match the schema: #/path: got number, want string
}

func ExampleCompile() {
	s, err := toolschema.Compile(map[string]any{
		"type":       "object",
		"properties": map[string]any{"branch": map[string]any{"$ref": "#/$defs/branch"}},
		"$defs":      map[string]any{"branch": map[string]any{"type": "string", "pattern": "^[a-z][a-z0-9-]*$"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Validate(map[string]any{"branch": "main"}))
	fmt.Println(s.Validate(map[string]any{"branch": "../main"}))

	_, err = toolschema.Compile(map[string]any{"$ref": "https://example.com/tool.json"})
	fmt.Println(errors.Is(err, toolschema.ErrSchema))
	// Output:
	// <nil>
	// tool arguments do not match the schema: #/branch: '../main' does not match pattern '^[a-z][a-z0-9-]*$'
	// true
}
