package client_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// item is one event to store: a status (state set), or the chunks of
// seqs seq to last, as one message (a batch when there are several).
type item struct {
	seq, last uint64
	state     wire.State
	tag       string // marks the chunks' content: "a" gives "a3" for seq 3
}

func status(seq uint64, st wire.State) item { return item{seq: seq, last: seq, state: st} }
func chunks(seq, last uint64, tag string) item {
	return item{seq: seq, last: last, tag: tag}
}

// encode is it as the writer stores it.
func (it item) encode(t *testing.T, runID string) []byte {
	t.Helper()
	if it.state != "" {
		b, err := wire.Marshal(&wire.Event{V: wire.Version, RunID: runID, Seq: it.seq, TS: 1, Kind: wire.KindStatus, Status: &wire.Status{State: it.state}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var batch wire.ChunkBatch
	for seq := it.seq; seq <= it.last; seq++ {
		if _, err := batch.Add(&wire.Chunk{Type: wire.ChunkText, Content: fmt.Sprint(it.tag, seq)}, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	b, err := batch.Encode(runID, it.seq, 1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type follow struct {
	t     *testing.T
	js    jetstream.JetStream
	c     *client.Client
	runID string
}

func startFollow(t *testing.T, opts ...client.Option) *follow {
	t.Helper()
	_, nc, js := natstest.RunMesh(t)
	c, err := client.New(nc, subject.Names{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &follow{t: t, js: js, c: c, runID: "r1"}
}

func (f *follow) store(items ...item) {
	f.t.Helper()
	f.storeRun(f.runID, items...)
}

// describe is what Events yields, as "1 running, 2 a2, 3 a3, ... error".
func describe(ev wire.Event, err error) string {
	switch {
	case err != nil:
		return fmt.Sprintf("%d error", ev.Seq)
	case ev.Kind == wire.KindStatus:
		return fmt.Sprintf("%d %s", ev.Seq, ev.Status.State)
	case ev.Kind == wire.KindChunk && ev.Chunk != nil:
		return fmt.Sprintf("%d %s", ev.Seq, ev.Chunk.Content)
	}
	return fmt.Sprintf("%d %s", ev.Seq, ev.Kind)
}

// unpackCases are stored runs and what a follower from seq from yields of
// them: each seq once, the first stored, batches unpacked, and an error at
// a gap.
var unpackCases = []struct {
	name   string
	from   uint64
	stored []item
	want   string
}{
	{
		name:   "batches and singles",
		stored: []item{status(1, wire.StateRunning), chunks(2, 4, "a"), chunks(5, 5, "a"), chunks(6, 8, "a"), status(9, wire.StateSucceeded)},
		want:   "1 running, 2 a2, 3 a3, 4 a4, 5 a5, 6 a6, 7 a7, 8 a8, 9 succeeded",
	},
	{
		name:   "from inside a batch",
		from:   3,
		stored: []item{status(1, wire.StateRunning), chunks(2, 4, "a"), chunks(5, 6, "a"), status(7, wire.StateSucceeded)},
		want:   "3 a3, 4 a4, 5 a5, 6 a6, 7 succeeded",
	},
	{
		// Two writers overlapped: the first stored of each seq is
		// yielded, once.
		name:   "overlapping batches",
		stored: []item{status(1, wire.StateRunning), chunks(2, 4, "a"), chunks(3, 6, "b"), chunks(5, 5, "c"), status(7, wire.StateFailed)},
		want:   "1 running, 2 a2, 3 a3, 4 a4, 5 b5, 6 b6, 7 failed",
	},
	{
		// A batch retried through a leader election, stored after the
		// one that follows it.
		name:   "a batch stored late",
		stored: []item{status(1, wire.StateRunning), chunks(4, 5, "a"), chunks(2, 3, "a"), status(6, wire.StateSucceeded)},
		want:   "1 running, 2 a2, 3 a3, 4 a4, 5 a5, 6 succeeded",
	},
	{
		name:   "held ahead and overlapped",
		stored: []item{status(1, wire.StateRunning), chunks(3, 6, "b"), chunks(2, 4, "a"), status(7, wire.StateSucceeded)},
		want:   "1 running, 2 a2, 3 a3, 4 a4, 5 b5, 6 b6, 7 succeeded",
	},
	{
		name:   "a gap at the terminal",
		stored: []item{status(1, wire.StateRunning), chunks(3, 4, "a"), status(5, wire.StateSucceeded)},
		want:   "1 running, 5 error",
	},
}

func TestEventsUnpacksBatches(t *testing.T) {
	for _, tt := range unpackCases {
		t.Run(tt.name, func(t *testing.T) {
			f := startFollow(t)
			f.store(tt.stored...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var got []string
			for ev, err := range f.c.Events(ctx, "acme", f.runID, tt.from) {
				got = append(got, describe(ev, err))
				if ev.Kind == wire.KindChunks || len(ev.Chunks) > 0 {
					t.Errorf("yielded a batch: %+v", ev)
				}
			}
			if s := strings.Join(got, ", "); s != tt.want {
				t.Errorf("yielded %s\nwant    %s", s, tt.want)
			}
		})
	}
}

// A follower that follows again (nothing came for the refollow interval)
// reads on after the last message it read; a batch that then overlaps
// what it yielded is yielded from the first seq it has not.
func TestEventsRefollowsIntoAnOverlappingBatch(t *testing.T) {
	f := startFollow(t, client.WithRefollowAfter(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type yielded struct {
		ev  wire.Event
		err error
	}
	out := make(chan yielded)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range f.c.Events(ctx, "acme", f.runID, 1) {
			out <- yielded{ev, err}
		}
		close(out)
	}()
	var got []string
	read := func(n int) {
		for range n {
			y := <-out
			got = append(got, describe(y.ev, y.err))
		}
	}
	f.store(status(1, wire.StateRunning), chunks(2, 4, "a"))
	read(4)
	// Wait for the second consumer: the follower has followed again.
	natstest.Eventually(t, 10*time.Second, func() error {
		st, err := f.js.Stream(ctx, subject.Names{}.EventsStream())
		if err != nil {
			return err
		}
		for name := range st.ConsumerNames(ctx).Name() {
			if strings.HasSuffix(name, "_2") {
				return nil
			}
		}
		return fmt.Errorf("no second consumer yet")
	})
	f.store(chunks(3, 6, "b"), status(7, wire.StateSucceeded))
	for y := range out {
		got = append(got, describe(y.ev, y.err))
	}
	<-done
	if s, want := strings.Join(got, ", "), "1 running, 2 a2, 3 a3, 4 a4, 5 b5, 6 b6, 7 succeeded"; s != want {
		t.Errorf("yielded %s\nwant    %s", s, want)
	}
}
