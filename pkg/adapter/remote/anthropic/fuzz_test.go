package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// FuzzAnthropicStream feeds arbitrary bytes as the event-stream body
// through the adapter's own read loop and parser. It asserts no panic, a
// chunk stream that keeps every rule of docs/contract.md §1.3 (conformance.Check),
// tool names that are the declared canonical ones, errors that are typed,
// non-retryable wire errors, and, when the message ended, an assistant
// turn that is a JSON array of blocks.
func FuzzAnthropicStream(f *testing.F) {
	for _, b := range conformance.Seeds(f, Name, "*.sse") {
		f.Add(b)
	}
	obj := map[string]any{"type": "object"}
	tools := newToolSet([]toolschema.Tool{{Name: "fs.read_file", Schema: obj}, {Name: "weather.get", Schema: obj}})
	f.Fuzz(func(t *testing.T, data []byte) {
		p := newParser(tools, true, "claude-sonnet-4-5")
		var chunks []wire.Chunk
		stops := 0
		err := readStream(context.Background(), bytes.NewReader(data), p,
			func() error { stops++; return nil },
			func(cs ...wire.Chunk) error { chunks = append(chunks, cs...); return nil })
		for _, problem := range conformance.Check(Capabilities, chunks, err, conformance.Ran) {
			t.Errorf("stream rule: %s", problem)
		}
		if err != nil {
			var we *wire.Error
			if !errors.As(err, &we) || we.Retryable || !we.Class.IsA(wire.ProviderError) {
				t.Errorf("error %v (%T) is not a non-retryable provider wire error", err, err)
			}
		}
		for _, c := range chunks {
			if c.Type == wire.ChunkToolUse && c.ToolName != "fs.read_file" && c.ToolName != "weather.get" && c.ToolName != webSearchName {
				t.Errorf("tool_use of %q, which is not a declared canonical name", c.ToolName)
			}
		}
		switch {
		case p.stopped:
			if stops != 1 || err != nil || len(chunks) == 0 || chunks[len(chunks)-1].Type != wire.ChunkResult {
				t.Errorf("message_stop: %d onStop calls, err %v, last chunk %v", stops, err, chunks)
			}
			if turn := p.assistantTurn(); turn != nil {
				var blocks []map[string]any
				if json.Unmarshal(turn, &blocks) != nil || len(blocks) == 0 {
					t.Errorf("the assistant turn is not a JSON array of blocks: %s", turn)
				}
			}
		case stops != 0:
			t.Errorf("onStop ran for a stream that did not stop")
		}
	})
}
