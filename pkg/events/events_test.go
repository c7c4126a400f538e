package events_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const tenant = "acme"

var names = subject.Names{}

// fault is what flaky does to one publish attempt.
type fault int

const (
	pass      fault = iota
	lostAck         // stored, but the acknowledgement never arrives (the leader died after storing)
	noLeader        // not stored: 503 JetStream system temporarily unavailable
	noReply         // not stored: no responders
	notLeader       // not stored: the server asked is no longer the leader
)

// flaky is a JetStream whose publishes fail as scripted, the way they fail
// during a leader election; unscripted ones pass.
type flaky struct {
	jetstream.JetStream
	mu       sync.Mutex
	script   []fault
	attempts int
}

func (f *flaky) next() fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	if len(f.script) == 0 {
		return pass
	}
	x := f.script[0]
	f.script = f.script[1:]
	return x
}

func (f *flaky) fail(ctx context.Context, x fault, m *nats.Msg) error {
	switch x {
	case lostAck:
		if _, err := f.JetStream.PublishMsg(ctx, m); err != nil {
			return err
		}
		return context.DeadlineExceeded
	case noLeader:
		return fmt.Errorf("nats: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"})
	case noReply:
		return jetstream.ErrNoStreamResponse
	case notLeader:
		return fmt.Errorf("nats: %w", &jetstream.APIError{Code: 500, ErrorCode: 10009, Description: "JetStream cluster can not handle request"})
	}
	return nil
}

func (f *flaky) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if x := f.next(); x != pass {
		return nil, f.fail(ctx, x, m)
	}
	return f.JetStream.PublishMsg(ctx, m, opts...)
}

func (f *flaky) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if x := f.next(); x != pass {
		if err := f.fail(context.Background(), x, m); err != nil && x == lostAck {
			return &silent{}, nil // sent and stored; its ack never comes
		} else if err != nil {
			return nil, err
		}
	}
	return f.JetStream.PublishMsgAsync(m, opts...)
}

// silent is a publish whose acknowledgement never arrives.
type silent struct{ jetstream.PubAckFuture }

func (*silent) Ok() <-chan *jetstream.PubAck { return nil }
func (*silent) Err() <-chan error            { return nil }

func (f *flaky) set(script ...fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script, f.attempts = script, 0
}

func setup(t *testing.T) (*flaky, *events.Log) {
	t.Helper()
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	if err := topology.Ensure(ctx, js, topology.Config{Names: names}); err != nil {
		t.Fatal(err)
	}
	f := &flaky{JetStream: js}
	log, err := events.NewLog(ctx, f, names)
	if err != nil {
		t.Fatal(err)
	}
	return f, log
}

// stored returns the seqs of every event stored for the run, in stream
// order, a batch's expanded.
func stored(t *testing.T, js jetstream.JetStream, runID string) []uint64 {
	t.Helper()
	var seqs []uint64
	for _, ev := range storedEvents(t, js, runID) {
		for e := range ev.Expand() {
			seqs = append(seqs, e.Seq)
		}
	}
	return seqs
}

// storedEvents returns every event stored for the run, in stream order, as
// stored (a batch as one).
func storedEvents(t *testing.T, js jetstream.JetStream, runID string) []wire.Event {
	t.Helper()
	return clienttest.Stored(t, js, names, tenant, runID)
}

func TestPublishesRetryThroughALeaderElection(t *testing.T) {
	tests := []struct {
		name   string
		script []fault
		async  bool
	}{
		{name: "lost acks", script: []fault{lostAck, pass, lostAck, lostAck, pass}},
		{name: "no leader", script: []fault{noLeader, noLeader, noLeader, pass, noReply, notLeader}},
		{name: "async lost acks", script: []fault{pass, pass, pass, lostAck, pass, lostAck}, async: true},
		{name: "async no leader", script: []fault{pass, pass, pass, noLeader, noReply, pass, noLeader}, async: true},
		// The terminal status is stored by an attempt whose ack is lost; on
		// one server the retry is refused for its fence before the dedupe
		// check, and must still count as stored.
		{name: "terminal ack lost", script: []fault{pass, pass, pass, pass, pass, lostAck}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, log := setup(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			runID := newRunID()
			w := log.New(tenant, runID)
			f.set(tt.script...)
			if err := w.Status(ctx, wire.Status{State: wire.StateAccepted}); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				c := wire.Chunk{Type: wire.ChunkText, Content: fmt.Sprint(i)}
				var err error
				if tt.async {
					err = w.ChunkAsync(ctx, c)
				} else {
					err = w.Chunk(ctx, c)
				}
				if err != nil {
					t.Fatalf("chunk %d: %v", i, err)
				}
			}
			if err := w.Status(ctx, wire.Status{State: wire.StateRunning}); err != nil {
				t.Fatal(err)
			}
			if err := w.Terminal(ctx, wire.Status{State: wire.StateSucceeded}); err != nil {
				t.Fatalf("terminal: %v", err)
			}
			if got := fmt.Sprint(stored(t, f.JetStream, runID)); got != "[1 2 3 4 5 6]" {
				t.Errorf("stored seqs = %s, want [1 2 3 4 5 6], each once", got)
			}
			// The async chunks may have gone out as one batch or more.
			if msgs := len(storedEvents(t, f.JetStream, runID)); f.attempts <= msgs {
				t.Errorf("%d publish attempts, want retries beyond the %d messages stored", f.attempts, msgs)
			}
			ev, _, err := log.Last(ctx, tenant, runID)
			if err != nil || !ev.Terminal() || ev.Seq != 6 {
				t.Errorf("last = %+v, %v; want the terminal status at seq 6", ev, err)
			}
		})
	}
}

var runs int

// newRunID returns a run id no other test uses.
func newRunID() string {
	runs++
	return fmt.Sprintf("run-%d", runs)
}

func TestRetryEndsWithTheContext(t *testing.T) {
	f, log := setup(t)
	runID := newRunID()
	w := log.New(tenant, runID)
	script := make([]fault, 1000)
	for i := range script {
		script[i] = noLeader
	}
	f.set(script...)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := w.Status(ctx, wire.Status{State: wire.StateAccepted})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("status = %v, want the context's deadline", err)
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10008 {
		t.Errorf("status = %v, want the last attempt's error in it too", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %s, want soon after the 300ms deadline", d)
	}
	if f.attempts < 3 {
		t.Errorf("%d attempts, want several with backoff", f.attempts)
	}
	// The event stays the writer's: once JetStream is back it is sent, once.
	f.set()
	if err := w.Terminal(context.Background(), wire.Status{State: wire.StateFailed}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(stored(t, f.JetStream, runID)); got != "[1 2]" {
		t.Errorf("stored seqs = %s, want [1 2]", got)
	}
}

func TestDuplicateAckIsAnError(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprint("async=", async), func(t *testing.T) {
			f, log := setup(t)
			ctx := context.Background()
			runID := newRunID()
			// Another writer (the router) stored seqs 1 and 2; this writer
			// wrongly believes the run has one event.
			other := log.New(tenant, runID)
			for _, st := range []wire.State{wire.StateAccepted, wire.StateRouted} {
				if err := other.Status(ctx, wire.Status{State: st}); err != nil {
					t.Fatal(err)
				}
			}
			w := log.New(tenant, runID)
			if err := w.Chunk(ctx, wire.Chunk{Type: wire.ChunkText}); !errors.Is(err, events.ErrDuplicate) {
				t.Fatalf("first event = %v, want ErrDuplicate", err)
			}
			var err error
			if async {
				err = w.ChunkAsync(ctx, wire.Chunk{Type: wire.ChunkText})
			} else {
				err = w.Status(ctx, wire.Status{State: wire.StateRunning})
			}
			if !errors.Is(err, events.ErrDuplicate) {
				t.Errorf("after a duplicate: %v, want ErrDuplicate again", err)
			}
			if got := fmt.Sprint(stored(t, f.JetStream, runID)); got != "[1 2]" {
				t.Errorf("stored seqs = %s, want [1 2]", got)
			}
		})
	}
}

func TestDuplicateAsyncAckIsAnError(t *testing.T) {
	_, log := setup(t)
	ctx := context.Background()
	runID := newRunID()
	other := log.New(tenant, runID)
	if err := other.Status(ctx, wire.Status{State: wire.StateAccepted}); err != nil {
		t.Fatal(err)
	}
	if err := other.Status(ctx, wire.Status{State: wire.StateRouted}); err != nil {
		t.Fatal(err)
	}
	w := log.New(tenant, runID)
	if err := w.ChunkAsync(ctx, wire.Chunk{Type: wire.ChunkText}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); !errors.Is(err, events.ErrDuplicate) {
		t.Fatalf("flush = %v, want ErrDuplicate", err)
	}
}

func TestFencedTerminalIsNotRetried(t *testing.T) {
	f, log := setup(t)
	ctx := context.Background()
	runID := newRunID()
	w := log.New(tenant, runID)
	if err := w.Status(ctx, wire.Status{State: wire.StateAccepted}); err != nil {
		t.Fatal(err)
	}
	// Another writer ends the run first.
	endElsewhere(ctx, t, log, runID, wire.StateCancelled)
	f.set()
	if err := w.Terminal(ctx, wire.Status{State: wire.StateSucceeded}); !errors.Is(err, events.ErrFenced) {
		t.Fatalf("terminal = %v, want ErrFenced", err)
	}
	if f.attempts != 1 {
		t.Errorf("%d attempts, want 1: a fence is final", f.attempts)
	}
	if _, err := log.Open(ctx, tenant, runID); !errors.Is(err, events.ErrEnded) {
		t.Errorf("open = %v, want ErrEnded", err)
	}
}

func TestOpenContinuesAfterTheLastEvent(t *testing.T) {
	_, log := setup(t)
	ctx := context.Background()
	runID := newRunID()
	if _, _, err := log.Last(ctx, tenant, runID); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("last of a run without events = %v, want ErrMsgNotFound", err)
	}
	w := log.New(tenant, runID)
	if err := w.Status(ctx, wire.Status{State: wire.StateAccepted}); err != nil {
		t.Fatal(err)
	}
	w2, err := log.Open(ctx, tenant, runID)
	if err != nil {
		t.Fatal(err)
	}
	if w2.Seq() != 1 {
		t.Fatalf("seq = %d, want 1", w2.Seq())
	}
	if err := w2.Terminal(ctx, wire.Status{State: wire.StateSucceeded}); err != nil {
		t.Fatalf("terminal after the last event: %v", err)
	}
}
