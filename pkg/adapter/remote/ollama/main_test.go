package ollama_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/ollama"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixtureDir holds the recorded /api/chat responses, one JSON file per case.
var fixtureDir = filepath.Join("..", "..", "..", "..", "testdata", "remote", "ollama")

const model = "qwen3:8b"

// serve starts the fixture server for the test.
func serve(t *testing.T) *replay.Server {
	t.Helper()
	srv, err := replay.Start(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// newAdapter returns the adapter pointed at case name of srv.
func newAdapter(t *testing.T, srv *replay.Server, name string) adapter.Adapter {
	t.Helper()
	a, err := ollama.New(remote.Config{BaseURL: srv.URL() + "/" + name, AllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// request validates fields as the router does.
func request(t *testing.T, a adapter.Adapter, fields map[string]any) any {
	t.Helper()
	b, err := wire.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	req, err := a.Validate(b)
	if err != nil {
		t.Fatalf("validate %v: %v", fields, err)
	}
	return req
}

// outcome is one attempt as the runner sees it.
type outcome struct {
	chunks     []wire.Chunk
	err        error
	checkpoint []byte
	saved      bool
}

// run ranges over one attempt to its end.
func run(t *testing.T, a adapter.Adapter, fields map[string]any, checkpoint []byte) outcome {
	t.Helper()
	var o outcome
	call := adapter.Call{RunID: "run-1", Request: request(t, a, fields), Attempt: 1, Model: model, MaxAttempts: 3,
		Checkpoint: checkpoint, SaveCheckpoint: func(b []byte) { o.checkpoint, o.saved = b, true }}
	for c, err := range a.Stream(context.Background(), call) {
		if o.err != nil {
			t.Fatalf("a value after the error %v: (%+v, %v)", o.err, c, err)
		}
		if err != nil {
			o.err = err
			continue
		}
		o.chunks = append(o.chunks, c)
	}
	return o
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

func chunksJSON(cs []wire.Chunk) string {
	var b strings.Builder
	for _, c := range cs {
		j, _ := json.Marshal(c)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func secretFor(s string) secret.String { return secret.New(s) }
