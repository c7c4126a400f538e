package codex_test

import (
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/codex"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Decode validates a request strictly; a resumed turn names the thread a
// system chunk confirmed.
func ExampleDecode() {
	b, _ := wire.Marshal(map[string]any{
		"prompt":           "What was the answer again?",
		"resume_thread_id": "01a22a8b-564f-7be0-9f56-beadbebf0082",
	})
	req, err := codex.Decode(b)
	fmt.Printf("%q %s %v\n", req.Prompt, req.ResumeThreadID, err)

	b, _ = wire.Marshal(map[string]any{"sandbox": "danger-full-access", "max_turns": 3})
	_, err = codex.Decode(b)
	fmt.Println(errors.Is(err, wire.AgenticRequestValidationError))
	fmt.Println(err)
	// Output:
	// "What was the answer again?" 01a22a8b-564f-7be0-9f56-beadbebf0082 <nil>
	// true
	// AgenticRequestValidationError: codex request: unknown field "max_turns"; field "prompt": required, a non-empty string; field "sandbox": "danger-full-access" is not allowed: the model's tools would escape the workspace
}

// A parser maps the CLI's events to chunks; turn.completed's cumulative
// usage is the run's own on a new thread.
func ExampleParser() {
	p := codex.NewParser("gpt-5.5", "")
	for _, ev := range []map[string]any{
		{"type": "thread.started", "thread_id": "01a22a8b-564f-7be0-9f56-beadbebf0082"},
		{"type": "turn.started"},
		{"type": "item.completed", "item": map[string]any{"id": "item_0", "type": "agent_message", "text": "The answer is 42."}},
		{"type": "turn.completed", "usage": map[string]any{"input_tokens": 9835.0, "cached_input_tokens": 0.0, "output_tokens": 20.0}},
	} {
		chunks, _ := p.Event(ev)
		for _, c := range chunks {
			fmt.Println(c.Type, c.Content, c.Metadata.SessionID, c.Metadata.Usage)
		}
	}
	// Output:
	// system  01a22a8b-564f-7be0-9f56-beadbebf0082 <nil>
	// text The answer is 42.  <nil>
	// result  01a22a8b-564f-7be0-9f56-beadbebf0082 &{9835 20 0 0 0}
}
