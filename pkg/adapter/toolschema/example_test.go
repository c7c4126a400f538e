package toolschema_test

import (
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
