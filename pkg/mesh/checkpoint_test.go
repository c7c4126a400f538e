package mesh_test

import (
	"context"
	"iter"
	"strconv"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// counterAdapter is a test adapter with continuation state: each run on a
// conversation answers with one more than the last successful run, and a
// request with fail=true fails after saving a state that must not be kept.
type counterAdapter struct{}

type counterReq struct{ fail bool }

func (counterAdapter) Name() string { return "counter" }
func (counterAdapter) Capabilities() wire.Capabilities {
	return wire.Capabilities{Transport: wire.TransportInProcess}
}
func (counterAdapter) RuntimeKeys() []string { return nil }
func (counterAdapter) Validate(b []byte) (any, error) {
	d, err := reqfield.Decode("counter", b)
	if err != nil {
		return nil, err
	}
	d.String("prompt")
	r := counterReq{fail: d.Bool("fail")}
	return r, d.Err()
}
func (counterAdapter) Stream(_ context.Context, call adapter.Call) iter.Seq2[wire.Chunk, error] {
	return func(yield func(wire.Chunk, error) bool) {
		n, _ := strconv.Atoi(string(call.Checkpoint))
		n++
		if call.SaveCheckpoint != nil {
			call.SaveCheckpoint([]byte(strconv.Itoa(n)))
		}
		if !yield(wire.Chunk{Type: wire.ChunkText, Content: strconv.Itoa(n)}, nil) {
			return
		}
		if call.Request.(counterReq).fail {
			yield(wire.Chunk{}, wire.Errorf(wire.ProviderTransportError, "failing on purpose"))
		}
	}
}

func TestCheckpointCarriesContinuationAcrossRuns(t *testing.T) {
	srv := natstest.RunJetStream(t)
	profiles, err := profile.New(profile.Profile{Name: "counter", Adapter: "counter", Transport: wire.TransportInProcess, Model: "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	n := startNodeWith(t, srv, mesh.Config{}, profiles, counterAdapter{})
	c := newClient(t, srv)
	text := func(evs []wire.Event) string {
		for _, ev := range evs {
			if ev.Kind == wire.KindChunk && ev.Chunk.Type == wire.ChunkText {
				return ev.Chunk.Content
			}
		}
		return ""
	}
	for i, want := range []string{"1", "2", "3"} {
		if got := text(converse(t, c, "counter", "conv", map[string]any{"prompt": "x"})); got != want {
			t.Fatalf("run %d on the conversation answered %q, want %q", i+1, got, want)
		}
	}
	// A failed run's state is not kept.
	if evs := converse(t, c, "counter", "conv", map[string]any{"prompt": "x", "fail": true}); last(evs).State != wire.StateFailed {
		t.Fatalf("failing run: %s", describe(evs))
	}
	if got := text(converse(t, c, "counter", "conv", map[string]any{"prompt": "x"})); got != "4" {
		t.Fatalf("after a failed run answered %q, want 4", got)
	}
	// Another conversation starts fresh; no conversation keeps nothing.
	if got := text(converse(t, c, "counter", "other", map[string]any{"prompt": "x"})); got != "1" {
		t.Fatalf("fresh conversation answered %q", got)
	}
	kv, err := n.d.JS.KeyValue(context.Background(), n.d.Names.CheckpointsBucket())
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), tenant+".conv")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := wire.Decode[wire.Checkpoint](e.Value())
	if err != nil || cp.Adapter != "counter" || cp.Pin.Model != "c-1" || string(cp.State) != "4" {
		t.Fatalf("checkpoint = %+v, %v", cp, err)
	}
}
