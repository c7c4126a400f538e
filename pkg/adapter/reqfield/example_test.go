package reqfield_test

import (
	"fmt"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// An adapter reads each field once with a typed getter, adds its own rules
// with Bad, and gets every problem in one error, sorted by field.
func ExampleDecode() {
	body, _ := wire.Marshal(map[string]any{"prompt": "-h", "tools": []any{"read", 3}, "turns": 99, "colour": "red"})
	d, err := reqfield.Decode("demo", body)
	if err != nil {
		fmt.Println(err)
		return
	}
	d.Require("prompt")
	prompt := d.Arg("prompt")
	tools := d.Args("tools")
	turns := d.Int("turns", 1, 10)
	if strings.HasPrefix(prompt, "-") {
		d.Bad("prompt", "must not begin with %q", "-")
	}
	fmt.Printf("%q %q %d\n", prompt, tools, turns)
	fmt.Println(d.Err())
	// Output:
	// "-h" [] 0
	// AgenticRequestValidationError: demo request: unknown field "colour"; field "prompt": must not begin with "-"; field "tools"[1]: want a string, got an integer; field "turns": 99 is out of range [1, 10]
}

// Read is the frame of an adapter's Decode: read takes the fields, and
// the request comes back only when it has no problem.
func ExampleRead() {
	type request struct {
		Prompt string
		Turns  int
	}
	read := func(d *reqfield.Decoder) request {
		d.Require("prompt")
		return request{Prompt: d.String("prompt"), Turns: d.Int("turns", 1, 10)}
	}
	good, _ := wire.Marshal(map[string]any{"prompt": "hi", "turns": 3})
	fmt.Println(reqfield.Read("demo", good, read))
	bad, _ := wire.Marshal(map[string]any{"prompt": "hi", "turns": 99})
	fmt.Println(reqfield.Read("demo", bad, read))
	// Output:
	// {hi 3} <nil>
	// { 0} AgenticRequestValidationError: demo request: field "turns": 99 is out of range [1, 10]
}
