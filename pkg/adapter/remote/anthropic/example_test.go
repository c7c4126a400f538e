package anthropic_test

import (
	"context"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/anthropic"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func ExampleDecode() {
	b, _ := wire.Marshal(map[string]any{
		"prompt": "What is in the README?",
		"tools": []any{map[string]any{"name": "fs.read", "input_schema": map[string]any{
			"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}},
		"thinking_budget": 2048,
	})
	req, err := anthropic.Decode(b)
	if err != nil {
		panic(err)
	}
	fmt.Println(req.Prompt, req.Tools[0].Name, req.ThinkingBudget)

	b, _ = wire.Marshal(map[string]any{"system": "be brief", "temperature": 2})
	_, err = anthropic.Decode(b)
	fmt.Println(err)
	// Output:
	// What is in the README? fs.read 2048
	// AgenticRequestValidationError: anthropic request: field "prompt": required, a non-empty string, unless tool_results is given; field "temperature": 2 is out of range [0, 1]
}

func ExampleNew() {
	srv, err := replay.Start("../../../../testdata/remote/anthropic")
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	a, err := anthropic.New(remote.Config{BaseURL: srv.URL() + "/text", AllowLoopback: true})
	if err != nil {
		panic(err)
	}
	b, _ := wire.Marshal(map[string]any{"prompt": "What is the answer?"})
	req, err := a.Validate(b)
	if err != nil {
		panic(err)
	}
	var state []byte
	call := adapter.Call{RunID: "r1", Request: req, Model: "claude-sonnet-4-5", Attempt: 1,
		SaveCheckpoint: func(b []byte) { state = b }}
	for c, err := range a.Stream(context.Background(), call) {
		if err != nil {
			panic(err)
		}
		switch c.Type {
		case wire.ChunkResult:
			fmt.Printf("result: stop %s, usage %+v\n", c.Metadata.StopReason, *c.Metadata.Usage)
		default:
			fmt.Printf("%s %q\n", c.Type, c.Content)
		}
	}
	fmt.Println("checkpoint saved:", len(state) > 0)
	// Output:
	// system ""
	// text "The answer"
	// text " is 42."
	// result: stop end_turn, usage {InputTokens:25 OutputTokens:9 CacheReadTokens:0 CacheWriteTokens:0 ReasoningTokens:0}
	// checkpoint saved: true
}
