package nlip_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/nlip"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixtureDir holds the recorded agent answers, one JSON file per case.
var fixtureDir = filepath.Join("..", "..", "..", "..", "testdata", "remote", "nlip")

const model = "travel-agent"

func serve(t *testing.T) *replay.Server {
	t.Helper()
	srv, err := replay.Start(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// agentURL is the agent URL of case name: the reference server's /nlip/.
func agentURL(srv *replay.Server, name string) string {
	return srv.URL() + "/" + name + "/nlip/"
}

func newAdapter(t *testing.T, srv *replay.Server, name string) adapter.Adapter {
	t.Helper()
	a, err := nlip.New(remote.Config{BaseURL: agentURL(srv, name), AllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

type outcome struct {
	chunks     []wire.Chunk
	err        error
	checkpoint []byte
	saved      bool
}

func runCall(t *testing.T, a adapter.Adapter, call adapter.Call) outcome {
	t.Helper()
	var o outcome
	call.SaveCheckpoint = func(b []byte) { o.checkpoint, o.saved = b, true }
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

func call(t *testing.T, a adapter.Adapter, fields map[string]any, checkpoint []byte) adapter.Call {
	t.Helper()
	b, err := wire.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	req, err := a.Validate(b)
	if err != nil {
		t.Fatalf("validate %v: %v", fields, err)
	}
	return adapter.Call{RunID: "run-1", Request: req, Attempt: 1, Model: model, MaxAttempts: 3, Checkpoint: checkpoint}
}

func run(t *testing.T, a adapter.Adapter, prompt string, checkpoint []byte) outcome {
	t.Helper()
	return runCall(t, a, call(t, a, map[string]any{"prompt": prompt}, checkpoint))
}

var caps = nlip.Capabilities

func sys() wire.Chunk {
	return wire.Chunk{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: "nlip", Model: model, Capabilities: &caps}}
}
func text(s string) wire.Chunk { return wire.Chunk{Type: wire.ChunkText, Content: s} }
func result(stop string) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkResult, Metadata: wire.Metadata{StopReason: stop}}
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
