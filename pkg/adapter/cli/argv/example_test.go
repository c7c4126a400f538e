package argv_test

import (
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/argv"
)

func ExampleBuild() {
	type request struct {
		Model string   `cli:"--model"`
		Tools []string `cli:"--allowedTools"`
		Quiet bool     `cli:"--quiet"`
	}
	args := argv.Build(request{Model: "m; rm -rf /", Tools: []string{"Bash", "Read"}, Quiet: true})
	fmt.Printf("%q\n", args)
	// Output: ["--model" "m; rm -rf /" "--allowedTools" "Bash" "--allowedTools" "Read" "--quiet"]
}
