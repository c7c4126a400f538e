package ollama_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/ollama"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const model = "qwen3:8b"

// newAdapter returns the adapter pointed at case name of srv.
func newAdapter(t *testing.T, srv *replay.Server, name string) adapter.Adapter {
	t.Helper()
	a, err := ollama.New(remote.Config{BaseURL: srv.URL() + "/" + name, AllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// run validates fields as the router does and ranges over one attempt on
// checkpoint to its end, recording what it saves.
func run(t *testing.T, a adapter.Adapter, fields map[string]any, checkpoint []byte) conformance.Outcome {
	t.Helper()
	call := conformance.Call(t, a, model, fields)
	call.Checkpoint = checkpoint
	return conformance.CollectSaving(t, a, call)
}

// Chunk builders for expected streams.
var caps = ollama.Capabilities

func sys() wire.Chunk {
	return wire.Chunk{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: "ollama", Model: model, Capabilities: &caps}}
}
func text(s string) wire.Chunk { return wire.Chunk{Type: wire.ChunkText, Content: s, IsDelta: true} }
func think(s string) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkThinking, Content: s, IsDelta: true}
}
func tool(id, name string, input map[string]any) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkToolUse, ToolID: id, ToolName: name, ToolInput: input}
}
func result(in, out, ms int64, stop string) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkResult, Metadata: wire.Metadata{Usage: &wire.Usage{InputTokens: in, OutputTokens: out},
		DurationMS: &ms, StopReason: stop}}
}
func errChunk(class wire.Class, msg string) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkError, Content: msg, IsError: true, Metadata: wire.Metadata{ErrorClass: class}}
}

func secretFor(s string) secret.String { return secret.New(s) }
