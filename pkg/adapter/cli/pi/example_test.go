package pi_test

import (
	"encoding/json"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/pi"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Invoke turns a validated request into pi's argv: the pinned model fills
// an empty model field, the resume field becomes --session, and the prompt
// is the last element, whole.
func ExampleInvoke() {
	body, _ := wire.Marshal(map[string]any{
		"prompt":   `What is "$(the answer)"?`,
		"provider": "fake",
		"tools":    []any{"read", "grep"},
		"resume":   "01a22a8d-7f7d-7689-a314-843817dab2e1",
	})
	req, err := pi.Decode(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	inv, err := pi.Invoke(req, adapter.Call{Model: "fake-model", MaxAttempts: 3}, "/tmp")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range inv.Args {
		fmt.Printf("%q\n", a)
	}
	// Output:
	// "--mode"
	// "json"
	// "-p"
	// "--provider"
	// "fake"
	// "--model"
	// "fake-model"
	// "--tools"
	// "read,grep"
	// "--session"
	// "01a22a8d-7f7d-7689-a314-843817dab2e1"
	// "What is \"$(the answer)\"?"
}

// Decode refuses, in one AgenticRequestValidationError, everything wrong
// with a request.
func ExampleDecode() {
	body, _ := wire.Marshal(map[string]any{"prompt": "@/etc/passwd", "thinking": "max", "sandbox": "none"})
	_, err := pi.Decode(body)
	fmt.Println(err)
	// Output:
	// AgenticRequestValidationError: pi request: field "prompt": must not begin with "-" or "@" (pi would read it as an option or a file to attach); begin it with a space instead; unknown field "sandbox"; field "thinking": "max" is not one of off, minimal, low, medium, high, xhigh
}

// A Pi API failure arrives in-band, with exit status 0: the parser holds it
// until Pi is done, then emits the one error chunk.
func ExampleParser() {
	lines := []string{
		`{"type":"session","version":3,"id":"01a22a8d-8000-7398-aa57-f8102d7cae95","cwd":"/w"}`,
		`{"type":"message_end","message":{"role":"assistant","content":[],"model":"fake-model","stopReason":"error","errorMessage":"401 {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"invalid x-api-key\"}}"}}`,
		`{"type":"agent_end","messages":[]}`,
	}
	p := pi.NewParser(adapter.Call{MaxAttempts: 3})
	show := func(cs []wire.Chunk) {
		for _, c := range cs {
			switch c.Type {
			case wire.ChunkSystem:
				fmt.Println(c.Type, c.Metadata.SessionID)
			default:
				fmt.Println(c.Type, c.Metadata.ErrorClass, c.Content)
			}
		}
	}
	for _, l := range lines {
		var ev map[string]any
		_ = json.Unmarshal([]byte(l), &ev)
		cs, err := p.Event(ev)
		if err != nil {
			fmt.Println(err)
			return
		}
		show(cs)
	}
	cs, _ := p.End()
	show(cs)
	// Output:
	// system 01a22a8d-8000-7398-aa57-f8102d7cae95
	// error ProviderAuthError HTTP 401 authentication_error: invalid x-api-key
}
