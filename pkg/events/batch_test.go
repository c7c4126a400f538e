package events_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// never is a batch window that does not pass within a test: only size,
// Flush and the other publishes cut a batch.
const never = time.Hour

func text(i int) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkText, Content: fmt.Sprintf("chunk %03d", i), IsDelta: true}
}

// encodedSize is the size of c's encoding inside a batch.
func encodedSize(t *testing.T, c wire.Chunk) int {
	t.Helper()
	var b wire.ChunkBatch
	if _, err := b.Add(&c, 1<<20); err != nil {
		t.Fatal(err)
	}
	return b.Size()
}

// shape describes stored events as "status 1, chunks 2-4, chunk 5".
func shape(evs []wire.Event) string {
	var parts []string
	for _, ev := range evs {
		switch ev.Kind {
		case wire.KindChunks, wire.KindStatuses:
			parts = append(parts, fmt.Sprintf("%s %d-%d", ev.Kind, ev.Seq, ev.Last))
		default:
			parts = append(parts, fmt.Sprintf("%s %d", ev.Kind, ev.Seq))
		}
	}
	return strings.Join(parts, ", ")
}

// runningWithChunks returns a writer of runID that has stored the run's
// running status and written n text chunks with ChunkAsync (held in an
// open batch when the log's window does not pass).
func runningWithChunks(ctx context.Context, t *testing.T, log *events.Log, runID string, n int) *events.Writer {
	t.Helper()
	w := log.New(tenant, runID)
	if err := w.Status(ctx, wire.Status{State: wire.StateRunning}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.ChunkAsync(ctx, text(i)); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// wantStored fails t unless the events stored for runID have the shape
// want (as shape describes them).
func wantStored(t *testing.T, f *flaky, runID, want string) {
	t.Helper()
	if got := shape(storedEvents(t, f.JetStream, runID)); got != want {
		t.Errorf("stored %s, want %s", got, want)
	}
}

// endElsewhere ends runID with state as another writer would: one that
// opens the run after the last stored event.
func endElsewhere(ctx context.Context, t *testing.T, log *events.Log, runID string, state wire.State) {
	t.Helper()
	other, err := log.Open(ctx, tenant, runID)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Terminal(ctx, wire.Status{State: state}); err != nil {
		t.Fatal(err)
	}
}

func TestBatchesAreCutBySize(t *testing.T) {
	f, log := setup(t)
	size := encodedSize(t, text(0)) // every text(i) below 1000 has this size
	events.SetBatching(log, never, 3*size+size/2)
	ctx := context.Background()
	runID := newRunID()
	w := log.New(tenant, runID)
	if err := w.Status(ctx, wire.Status{State: wire.StateAccepted}); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if err := w.ChunkAsync(ctx, text(i)); err != nil {
			t.Fatal(err)
		}
		if w.Seq() != uint64(i)+2 {
			t.Fatalf("after chunk %d: seq %d, want %d", i, w.Seq(), i+2)
		}
	}
	// Two full batches went when the next chunk did not fit; the last
	// two chunks wait for the window or the next publish.
	natstest.Eventually(t, 5*time.Second, func() error {
		if got := shape(storedEvents(t, f.JetStream, runID)); got != "status 1, chunks 2-4, chunks 5-7" {
			return fmt.Errorf("stored %s", got)
		}
		return nil
	})
	if err := w.Terminal(ctx, wire.Status{State: wire.StateSucceeded}); err != nil {
		t.Fatal(err)
	}
	evs := storedEvents(t, f.JetStream, runID)
	if got, want := shape(evs), "status 1, chunks 2-4, chunks 5-7, chunks 8-9, status 10"; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
	i := 0
	for _, ev := range evs[1:4] {
		for e := range ev.Expand() {
			if !reflect.DeepEqual(*e.Chunk, text(i)) || e.TS != ev.TS {
				t.Errorf("seq %d = %+v at %d, want %+v at the batch's %d", e.Seq, *e.Chunk, e.TS, text(i), ev.TS)
			}
			i++
		}
	}
}

func TestALargeChunkGoesAlone(t *testing.T) {
	f, log := setup(t)
	events.SetBatching(log, never, 1000)
	ctx := context.Background()
	runID := newRunID()
	w := log.New(tenant, runID)
	big := wire.Chunk{Type: wire.ChunkText, Content: strings.Repeat("x", 2000)}
	for _, c := range []wire.Chunk{text(1), big, text(2), text(3)} {
		if err := w.ChunkAsync(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	// A chunk too large for a message is refused, and is not the writer's.
	huge := wire.Chunk{Type: wire.ChunkText, Content: strings.Repeat("x", wire.MaxMessageSize)}
	if err := w.ChunkAsync(ctx, huge); !errors.Is(err, wire.ErrTooLarge) {
		t.Fatalf("a chunk larger than a message: %v, want ErrTooLarge", err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wantStored(t, f, runID, "chunk 1, chunk 2, chunks 3-4")
	if w.Seq() != 4 {
		t.Errorf("seq %d, want 4", w.Seq())
	}
}

func TestALoneChunkGoesWithinTheWindow(t *testing.T) {
	f, log := setup(t)
	ctx := context.Background()
	runID := newRunID()
	w := log.New(tenant, runID)
	if err := w.Status(ctx, wire.Status{State: wire.StateRunning}); err != nil {
		t.Fatal(err)
	}
	// Nothing follows either chunk: the writer's timer publishes each.
	for i, want := range []string{"status 1, chunk 2", "status 1, chunk 2, chunk 3"} {
		if err := w.ChunkAsync(ctx, text(i)); err != nil {
			t.Fatal(err)
		}
		natstest.Eventually(t, 5*time.Second, func() error {
			if got := shape(storedEvents(t, f.JetStream, runID)); got != want {
				return fmt.Errorf("stored %s, want %s", got, want)
			}
			return nil
		})
	}
	if err := w.Terminal(ctx, wire.Status{State: wire.StateSucceeded}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(stored(t, f.JetStream, runID)); got != "[1 2 3 4]" {
		t.Errorf("stored seqs = %s, want [1 2 3 4]", got)
	}
}

func TestRetriedBatchIsStoredOnce(t *testing.T) {
	tests := []struct {
		name   string
		script []fault // from the batch's publish on
	}{
		// Stored, but its acknowledgement never comes: Flush sends it
		// again after jsretry.AttemptTimeout.
		{name: "async ack lost", script: []fault{lostAck}},
		// Not taken asynchronously; sent synchronously, stored with its
		// acknowledgement lost, sent again.
		{name: "no leader then ack lost", script: []fault{noLeader, lostAck, noReply, pass}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, log := setup(t)
			events.SetBatching(log, never, events.BatchBytes)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			runID := newRunID()
			w := runningWithChunks(ctx, t, log, runID, 3)
			f.set(tt.script...)
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := w.Terminal(ctx, wire.Status{State: wire.StateSucceeded}); err != nil {
				t.Fatal(err)
			}
			if got, want := shape(storedEvents(t, f.JetStream, runID)), "status 1, chunks 2-4, status 5"; got != want {
				t.Errorf("stored %s, want %s: the batch once", got, want)
			}
			if f.attempts <= 2 {
				t.Errorf("%d publish attempts after the status, want the batch's retried", f.attempts)
			}
		})
	}
}

func TestSeqIsGaplessAcrossBatchesAndStatuses(t *testing.T) {
	f, log := setup(t)
	// A window short enough that the timer races the calls.
	events.SetBatching(log, 20*time.Microsecond, 256)
	ctx := context.Background()
	runID := newRunID()
	w := log.New(tenant, runID)
	want := 0
	for round := range 5 {
		if err := w.Status(ctx, wire.Status{State: wire.StateRunning, Attempt: round + 1}); err != nil {
			t.Fatal(err)
		}
		want++
		for i := range 50 {
			if err := w.ChunkAsync(ctx, text(i)); err != nil {
				t.Fatal(err)
			}
			want++
		}
	}
	if err := w.Terminal(ctx, wire.Status{State: wire.StateSucceeded}); err != nil {
		t.Fatal(err)
	}
	want++
	var got []uint64
	msgs := 0
	for _, ev := range storedEvents(t, f.JetStream, runID) {
		msgs++
		for e := range ev.Expand() {
			got = append(got, e.Seq)
		}
	}
	for i, seq := range got {
		if seq != uint64(i)+1 {
			t.Fatalf("stored seqs %v: want 1 to %d, each once, in order", got, want)
		}
	}
	if len(got) != want || w.Seq() != uint64(want) {
		t.Fatalf("%d seqs stored, writer at %d; want %d", len(got), w.Seq(), want)
	}
	t.Logf("%d events in %d messages", want, msgs)
}

func TestOpenAfterABatch(t *testing.T) {
	f, log := setup(t)
	events.SetBatching(log, never, events.BatchBytes)
	ctx := context.Background()
	runID := newRunID()
	w := runningWithChunks(ctx, t, log, runID, 3)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ev, _, err := log.Last(ctx, tenant, runID)
	if err != nil || ev.Kind != wire.KindChunks || ev.LastSeq() != 4 {
		t.Fatalf("last = %+v, %v; want the batch of seqs 2 to 4", ev, err)
	}
	// The writer that takes over continues after the batch's last seq,
	// and its fenced terminal lands on top of the batch.
	other, err := log.Open(ctx, tenant, runID)
	if err != nil {
		t.Fatal(err)
	}
	if other.Seq() != 4 {
		t.Fatalf("opened at seq %d, want 4", other.Seq())
	}
	if err := other.Terminal(ctx, wire.Status{State: wire.StateCancelled}); err != nil {
		t.Fatal(err)
	}
	// The first writer is fenced off.
	if err := w.Terminal(ctx, wire.Status{State: wire.StateSucceeded}); !errors.Is(err, events.ErrFenced) {
		t.Fatalf("terminal of the first writer = %v, want ErrFenced", err)
	}
	wantStored(t, f, runID, "status 1, chunks 2-4, status 5")
}

// A router's accepted and routed go as one fenced message; the run's last
// event reads as the routed status, and a writer continues after it.
func TestStatusesFenced(t *testing.T) {
	f, log := setup(t)
	ctx := context.Background()
	runID := newRunID()
	w := log.New(tenant, runID)
	if err := w.StatusesFenced(ctx, wire.Status{State: wire.StateAccepted}); err == nil {
		t.Fatal("one status: no error")
	}
	if err := w.StatusesFenced(ctx, wire.Status{State: wire.StateAccepted}, wire.Status{State: wire.StateCancelled}); err == nil {
		t.Fatal("a terminal status: no error")
	}
	routed := wire.Status{State: wire.StateRouted, Pin: &wire.Pin{Provider: "fixture", Model: "m"}}
	if err := w.StatusesFenced(ctx, wire.Status{State: wire.StateAccepted}, routed); err != nil {
		t.Fatal(err)
	}
	if w.Seq() != 2 {
		t.Fatalf("seq after the batch = %d, want 2", w.Seq())
	}
	ev, _, err := log.Last(ctx, tenant, runID)
	if err != nil || ev.Kind != wire.KindStatus || ev.Seq != 2 || ev.Status.State != wire.StateRouted || ev.Status.Pin.Model != "m" {
		t.Fatalf("last = %+v, %v; want the routed status at seq 2", ev, err)
	}
	// A second router's batch on the same run is fenced off.
	if err := log.New(tenant, runID).StatusesFenced(ctx, wire.Status{State: wire.StateAccepted}, routed); !errors.Is(err, events.ErrFenced) {
		t.Fatalf("second batch = %v, want ErrFenced", err)
	}
	next, err := log.Open(ctx, tenant, runID)
	if err != nil || next.Seq() != 2 {
		t.Fatalf("open = seq %d, %v; want 2", next.Seq(), err)
	}
	if err := next.StatusFenced(ctx, wire.Status{State: wire.StateRunning}); err != nil {
		t.Fatal(err)
	}
	wantStored(t, f, runID, "statuses 1-2, status 3")
}

func TestABatchAfterAnotherWritersTerminalIsDropped(t *testing.T) {
	f, log := setup(t)
	events.SetBatching(log, never, events.BatchBytes)
	ctx := context.Background()
	runID := newRunID()
	w := runningWithChunks(ctx, t, log, runID, 3)
	// While the batch is open, another writer (the sweeper) ends the run:
	// its terminal has the seq, and so the Nats-Msg-Id, the batch starts at.
	endElsewhere(ctx, t, log, runID, wire.StateFailed)
	if err := w.Terminal(ctx, wire.Status{State: wire.StateSucceeded}); !errors.Is(err, events.ErrDuplicate) {
		t.Fatalf("terminal after the batch = %v, want ErrDuplicate (the batch dropped)", err)
	}
	wantStored(t, f, runID, "status 1, status 2")
}

func TestWriterIsSafeForConcurrentUse(t *testing.T) {
	f, log := setup(t)
	events.SetBatching(log, 50*time.Microsecond, 512)
	ctx := context.Background()
	runID := newRunID()
	w := log.New(tenant, runID)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 40 {
				var err error
				if i%10 == 9 {
					err = w.Status(ctx, wire.Status{State: wire.StateRunning, Attempt: g})
				} else {
					err = w.ChunkAsync(ctx, text(i))
				}
				if err != nil {
					t.Error(err)
					return
				}
				_ = w.Seq()
			}
		})
	}
	wg.Wait()
	if err := w.Terminal(ctx, wire.Status{State: wire.StateSucceeded}); err != nil {
		t.Fatal(err)
	}
	got := stored(t, f.JetStream, runID)
	for i, seq := range got {
		if seq != uint64(i)+1 {
			t.Fatalf("stored seqs %v: want 1 to 161, each once, in order", got)
		}
	}
	if len(got) != 161 {
		t.Fatalf("%d seqs stored, want 161", len(got))
	}
}

// TestAV1ReadersRunIsUnbatched: a writer for a submitter that reads
// contract v1 (ReaderVersion 1) publishes every chunk and every status as
// an event of its own, each stamped v1; one for a v2 reader batches, its
// batches stamped wire.BatchVersion.
func TestAV1ReadersRunIsUnbatched(t *testing.T) {
	f, log := setup(t)
	events.SetBatching(log, never, events.BatchBytes)
	ctx := context.Background()
	for _, tt := range []struct {
		v    int
		want string
	}{
		{1, "status 1, status 2, status 3, chunk 4, chunk 5, chunk 6, chunk 7, status 8"},
		{wire.BatchVersion, "statuses 1-2, status 3, chunks 4-7, status 8"},
	} {
		runID := newRunID()
		w := log.New(tenant, runID)
		w.ReaderVersion(tt.v)
		if err := w.StatusesFenced(ctx, wire.Status{State: wire.StateAccepted}, wire.Status{State: wire.StateRouted}); err != nil {
			t.Fatal(err)
		}
		if err := w.StatusFenced(ctx, wire.Status{State: wire.StateRunning}); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			if err := w.ChunkAsync(ctx, text(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Terminal(ctx, wire.Status{State: wire.StateSucceeded}); err != nil {
			t.Fatal(err)
		}
		evs := storedEvents(t, f.JetStream, runID)
		if got := shape(evs); got != tt.want {
			t.Errorf("reader v%d: stored %s, want %s", tt.v, got, tt.want)
		}
		for _, ev := range evs {
			if want := wire.VersionOf(&ev); ev.V != want || (tt.v == 1 && ev.V != 1) {
				t.Errorf("reader v%d: %s %d stamped v%d, want v%d", tt.v, ev.Kind, ev.Seq, ev.V, want)
			}
		}
	}
}
