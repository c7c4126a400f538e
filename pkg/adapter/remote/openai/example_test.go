package openai_test

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// A tool call against a recorded response served on loopback: the dotted
// platform tool travels as "fs_read" and comes back under its own name.
func ExampleNew() {
	srv, err := replay.Start(filepath.Join("..", "..", "..", "..", "testdata", "remote", "openai"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	a, err := openai.New(remote.Config{
		BaseURL:       srv.URL() + "/tool-call/v1", // a profile's base_url: https://api.openai.com/v1
		AllowLoopback: true,
		Credential:    secret.New("sk-example"),
	}, openai.Options{NoTemperatureModels: []string{"gpt-5.5"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	req, err := a.Validate(mustMarshal(map[string]any{
		"prompt": "Read the README.",
		"tools": []any{map[string]any{"name": "fs.read", "input_schema": map[string]any{
			"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}},
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	call := adapter.Call{RunID: "run-1", Request: req, Attempt: 1, Model: "gpt-5.5", MaxAttempts: 3,
		SaveCheckpoint: func(state []byte) { fmt.Println("checkpoint saved") }}
	for c, err := range a.Stream(context.Background(), call) {
		switch {
		case err != nil:
			fmt.Println("error:", err)
		case c.Type == wire.ChunkToolUse:
			fmt.Println(c.Type, c.ToolName, c.ToolID, c.ToolInput["path"])
		case c.Type == wire.ChunkResult:
			fmt.Println(c.Type, c.Metadata.StopReason, *c.Metadata.Usage)
		default:
			fmt.Println(c.Type)
		}
	}
	// Output:
	// system
	// thinking
	// thinking
	// thinking
	// tool_use fs.read call_Xq4nT8vLw2ZpR6sKj0mYb3Hd README.md
	// checkpoint saved
	// result tool_use {212 23 0 0 64}
}

func mustMarshal(v any) []byte {
	b, err := wire.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
