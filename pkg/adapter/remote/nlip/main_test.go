package nlip_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/nlip"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const model = "travel-agent"

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

// runCall ranges over one attempt to its end, recording what it saves.
func runCall(t *testing.T, a adapter.Adapter, call adapter.Call) conformance.Outcome {
	t.Helper()
	return conformance.CollectSaving(t, a, call)
}

// call validates fields as the router does and returns the first
// attempt's call on checkpoint.
func call(t *testing.T, a adapter.Adapter, fields map[string]any, checkpoint []byte) adapter.Call {
	t.Helper()
	c := conformance.Call(t, a, model, fields)
	c.Checkpoint = checkpoint
	return c
}

func run(t *testing.T, a adapter.Adapter, prompt string, checkpoint []byte) conformance.Outcome {
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
