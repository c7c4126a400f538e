package mesh_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// A runner whose lease goes unrenewed past two thirds of its TTL but not
// its whole TTL (here a pause; a loss of quorum does the same to the
// renewals) holds its run's output until its next renewal, which keeps
// the lease, and then goes on: the run with output succeeds with every
// chunk, where before the runner abandoned it and the sweeper failed it
// (docs/operating.md, "Faults and what they take"). At the resume the
// fixture's next chunk (held until the renewal) and the overdue renewal
// race; either way the run must succeed.
func TestPausedRunnerWithinItsLeaseGoesOn(t *testing.T) {
	srv := natstest.RunJetStream(t)
	cfg := mesh.Config{WithoutRunner: true}
	const ttl = 10 * time.Second
	cfg.Topology.LeaseTTL = ttl
	startNode(t, srv, cfg)
	c := newClient(t, srv)
	r := startRunnerProcess(t, srv, "held")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := submitRunning(ctx, t, c, fixtureReq{Prompt: "x", Script: "slow", DelayMS: 700})

	// Pause the runner right after a renewal of its lease, for longer than
	// two thirds of the TTL (the lease is stale when it wakes) and shorter
	// than the TTL (the bucket has not expired it).
	_, js := natstest.Connect(t, srv)
	leases, err := js.KeyValue(ctx, subject.Names{}.LeasesBucket())
	if err != nil {
		t.Fatal(err)
	}
	w, err := leases.Watch(ctx, "runner.held", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	select {
	case e := <-w.Updates():
		if e == nil || e.Operation() != jetstream.KeyValuePut {
			t.Fatalf("lease watch: %v", e)
		}
	case <-ctx.Done():
		t.Fatal("no renewal of the runner's lease seen")
	}
	if err := r.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl * 3 / 4)
	if err := r.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, id)
	checkGapless(t, evs)
	if st := last(evs); st.State != wire.StateSucceeded {
		t.Fatalf("terminal = %+v after a pause within the lease; events: %s", st, describe(evs))
	}
	ticks := 0
	for _, ev := range evs {
		if ev.Kind == wire.KindChunk && ev.Chunk.Type == wire.ChunkText {
			ticks++
			if want := fmt.Sprintf("tick %d\n", ticks); ev.Chunk.Content != want {
				t.Fatalf("chunk %q, want %q: %s", ev.Chunk.Content, want, describe(evs))
			}
		}
	}
	if ticks != 20 {
		t.Fatalf("%d chunks, want 20: %s", ticks, describe(evs))
	}
}
