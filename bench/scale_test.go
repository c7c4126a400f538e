package bench_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bench"
	"github.com/agentmesh/agentmesh/pkg/natstest"
)

// scaleLoad is issue 11's 1,000 runs at once: each a fixture run of a few
// chunks, followed by its own client.Events.
var scaleLoad = bench.Workload{Runs: 1000, Chunks: 5, ChunkBytes: 64}

// TestScale1000Runs runs 1,000 fixture runs at once on one runner host
// (max active 1,000), each followed by a client, and asserts that every
// run succeeds with its chunks and that neither the mesh's services nor
// the embedded server logged a pull refused for MaxWaiting or a consumer
// refused for the stream's consumer limit (bench.Limits). It is built
// with the scale tag only (make scale) until the mesh passes it.
func TestScale1000Runs(t *testing.T) {
	srv := natstest.RunJetStream(t)
	var logs bench.LogRecorder
	logs.Watch(srv)
	m := bench.StartMesh(t, srv, bench.MeshConfig{MaxActive: scaleLoad.Runs, Log: logs.Logger()})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	got, err := m.Throughput(ctx, scaleLoad)
	if err != nil {
		msg := err.Error()
		if len(msg) > 4000 {
			msg = msg[:4000] + "…"
		}
		t.Errorf("%d runs at once: %s", scaleLoad.Runs, msg)
	} else if want := scaleLoad.Runs * scaleLoad.Chunks; got.Items != want {
		t.Errorf("%d runs at once: %d chunks, want %d", scaleLoad.Runs, got.Items, want)
	} else {
		t.Logf("%d runs x %d chunks at once: all succeeded in %s", scaleLoad.Runs, scaleLoad.Chunks, got.Elapsed)
	}
	t.Logf("mesh and server logs: %s", logs.Summary())
	for _, limit := range bench.Limits {
		if lines := logs.Lines(limit); len(lines) > 0 {
			t.Errorf("%d log lines of %q, the first: %s", len(lines), limit, lines[0])
		}
	}
	if err != nil && strings.Contains(err.Error(), "maximum consumers limit") {
		t.Errorf("a follower met the events stream's consumer limit")
	}
}
