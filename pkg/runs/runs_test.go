package runs_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T) (*runs.Store, service.Deps) {
	t.Helper()
	srv := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, srv)
	if err := topology.Ensure(context.Background(), js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	d := service.Deps{NC: nc, JS: js, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}
	s, err := runs.Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}

// routed creates a run, publishes accepted and routed, and records it routed.
func routed(t *testing.T, s *runs.Store, tenant, id string) runs.Run {
	t.Helper()
	ctx := context.Background()
	r, err := s.Create(ctx, wire.RunRecord{RunID: id, Tenant: tenant, Principal: "p", Profile: "fixture"})
	if err != nil {
		t.Fatal(err)
	}
	w := s.Events().New(tenant, id)
	if err := w.Status(ctx, wire.Status{State: wire.StateAccepted}); err != nil {
		t.Fatal(err)
	}
	if err := w.Status(ctx, wire.Status{State: wire.StateRouted}); err != nil {
		t.Fatal(err)
	}
	if r, err = s.Route(ctx, r, &wire.Pin{Provider: "fixture"}, "fixture", 0); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCreateIsPerTenant(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	for _, tn := range []string{"alpha", "beta"} {
		if _, err := s.Create(ctx, wire.RunRecord{RunID: "job-1", Tenant: tn}); err != nil {
			t.Fatalf("%s: %v", tn, err)
		}
	}
	if _, err := s.Create(ctx, wire.RunRecord{RunID: "job-1", Tenant: "alpha"}); !errors.Is(err, runs.ErrExists) {
		t.Fatalf("second create in alpha: %v, want ErrExists", err)
	}
	// A new record says when it was written, as every later write does.
	if r, err := s.Get(ctx, "beta", "job-1"); err != nil || r.Record.Updated == 0 {
		t.Fatalf("created record %+v, %v: want its updated time", r.Record, err)
	}
}

// Of many writers ending one run at once, exactly one ends it; the record
// says what the one terminal event says.
func TestExactlyOneWriterEndsARun(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	const writers = 8
	for i := range 20 {
		id := "race-" + string(rune('a'+i))
		routed(t, s, "acme", id)
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for w := range writers {
			wg.Go(func() {
				state := wire.StateCancelled
				if w%2 == 1 {
					state = wire.StateTimedOut
				}
				done, err := s.EndUnowned(ctx, "acme", id, func(rec wire.RunRecord, _ events.Tail) bool { return rec.State == wire.StateRouted },
					func(rec wire.RunRecord) wire.Status { return wire.Status{State: state} })
				if err != nil {
					t.Error(err)
				}
				if done {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("run %s was ended by %d writers", id, wins)
		}
		ev, _, err := s.Events().Last(ctx, "acme", id)
		if err != nil || !ev.Terminal() || ev.Seq != 3 {
			t.Fatalf("last event %+v, %v; want the one terminal at seq 3", ev, err)
		}
		r, err := s.Get(ctx, "acme", id)
		if err != nil || r.Record.State != ev.Status.State {
			t.Fatalf("record %s, %v; terminal event %s", r.Record.State, err, ev.Status.State)
		}
	}
}

// A running status fenced after a terminal one is refused: a runner's claim
// cannot land after a cancel ended the queued run.
func TestClaimAfterEndIsFenced(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	routed(t, s, "acme", "late")
	w, err := s.Events().Open(ctx, "acme", "late") // the runner reads the events...
	if err != nil {
		t.Fatal(err)
	}
	done, err := s.EndUnowned(ctx, "acme", "late", nil,
		func(wire.RunRecord) wire.Status { return wire.Status{State: wire.StateCancelled} }) // ...a cancel ends the run...
	if err != nil || !done {
		t.Fatalf("cancel: %t, %v", done, err)
	}
	// ...and the claim that read the events first cannot publish.
	if err := w.StatusFenced(ctx, wire.Status{State: wire.StateRunning}); !errors.Is(err, events.ErrFenced) {
		t.Fatalf("running after cancelled: %v, want ErrFenced", err)
	}
}

// Between its create and its end a run's record is not written: its
// tail says who holds it, and the end records the runner, the attempt
// and the output.
func TestTheTailSaysWhoHoldsARun(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	r := routed(t, s, "acme", "held")
	w, err := s.Events().Open(ctx, "acme", "held")
	if err != nil {
		t.Fatal(err)
	}
	w.Author("runner-1", "epoch-1", 2)
	if err := w.StatusFenced(ctx, wire.Status{State: wire.StateRunning, Attempt: 2}); err != nil {
		t.Fatal(err)
	}
	tail := func() events.Tail {
		t.Helper()
		tl, err := s.Events().Tail(ctx, "acme", "held")
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	tl := tail()
	if tl.Runner != "runner-1" || tl.Epoch != "epoch-1" || tl.Attempt != 2 || tl.HasOutput() {
		t.Fatalf("tail = %+v; want runner-1, epoch-1, attempt 2, no output", tl)
	}
	if rec := runs.WithTail(r.Record, tl); rec.State != wire.StateRunning || rec.Owner != "runner-1" || rec.Attempt != 2 || rec.Committed {
		t.Fatalf("record with its tail = %+v", rec)
	}
	if err := w.ChunkFenced(ctx, wire.Chunk{Type: wire.ChunkText, Content: "x"}); err != nil {
		t.Fatal(err)
	}
	if rec := runs.WithTail(r.Record, tail()); !rec.Committed || rec.Owner != "runner-1" {
		t.Fatalf("record with its tail after output = %+v", rec)
	}
	if cur, err := s.Get(ctx, "acme", "held"); err != nil || cur.Rev != r.Rev {
		t.Fatalf("record written between create and end: rev %d, was %d (%v)", cur.Rev, r.Rev, err)
	}
	r.Record.Owner, r.Record.Attempt, r.Record.Committed = "runner-1", 2, true
	if err := s.End(ctx, w, r, wire.Status{State: wire.StateSucceeded}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "acme", "held")
	if err != nil || got.Record.State != wire.StateSucceeded || got.Record.Owner != "runner-1" || got.Record.Attempt != 2 || !got.Record.Committed {
		t.Fatalf("ended record = %+v, %v", got.Record, err)
	}
	if tl := tail(); !tl.Ended() || tl.Runner != "runner-1" {
		t.Fatalf("tail after the end = %+v", tl)
	}
}

// A runner's lease names an epoch; one taken anew under the same id has
// another, so runs held under the first are told apart.
func TestRunnerLeaseEpochs(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	if _, err := s.HoldRunner(ctx, "bad.id"); err == nil {
		t.Fatal("a runner id with a dot: no error")
	}
	first, err := s.HoldRunner(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if held, err := s.RunnerHeld(ctx, "r1", first.Epoch()); err != nil || !held {
		t.Fatalf("held under the first epoch: %t, %v", held, err)
	}
	second, err := s.HoldRunner(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if second.Epoch() == first.Epoch() {
		t.Fatal("the same epoch twice")
	}
	if held, _ := s.RunnerHeld(ctx, "r1", first.Epoch()); held {
		t.Fatal("held under the first epoch after the second lease")
	}
	s.Release(second)
	if held, err := s.RunnerHeld(ctx, "r1", second.Epoch()); err != nil || held {
		t.Fatalf("held after release: %t, %v", held, err)
	}
}

// A writer that ended a run and stopped before recording it leaves a
// record that Ended repairs.
func TestEndedRepairsARecordLeftBehind(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	routed(t, s, "acme", "orphan")
	w, err := s.Events().Open(ctx, "acme", "orphan")
	if err != nil {
		t.Fatal(err)
	}
	// The terminal event without the rest of the protocol.
	if err := w.Terminal(ctx, wire.Status{State: wire.StateFailed, Error: wire.Errorf(wire.ProviderError, "x")}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Get(ctx, "acme", "orphan"); r.Record.State != wire.StateRouted {
		t.Fatalf("record %s before repair", r.Record.State)
	}
	ended, err := s.Ended(ctx, "acme", "orphan")
	if err != nil || !ended {
		t.Fatalf("Ended = %t, %v", ended, err)
	}
	r, err := s.Get(ctx, "acme", "orphan")
	if err != nil || r.Record.State != wire.StateFailed || !errors.Is(r.Record.Error, wire.ProviderError) {
		t.Fatalf("repaired record %+v, %v", r.Record, err)
	}
}

// The record of an ended run carries its terminal summary's usage and
// exact cost, and whether it had output, whether End wrote it or Repair
// did after a writer stopped between the terminal event and the record.
func TestEndedRecordCarriesUsageAndCost(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	usage := &wire.Usage{InputTokens: 1200, OutputTokens: 34, CacheReadTokens: 5}
	st := wire.Status{State: wire.StateSucceeded, Summary: &wire.Summary{Chunks: 3, Usage: usage, Cost: "0.0041235"}}

	r := routed(t, s, "acme", "ended-1")
	w, _, err := s.Events().OpenTail(ctx, "acme", "ended-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.End(ctx, w, r, st); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "acme", "ended-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Record.Cost != "0.0041235" || got.Record.Usage == nil || *got.Record.Usage != *usage {
		t.Fatalf("End: record usage %+v cost %q, want %+v %q", got.Record.Usage, got.Record.Cost, usage, "0.0041235")
	}

	// A writer that stored the terminal event and died before the record.
	routed(t, s, "acme", "ended-2")
	w, _, err = s.Events().OpenTail(ctx, "acme", "ended-2")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Terminal(ctx, st); err != nil {
		t.Fatal(err)
	}
	if ended, err := s.Ended(ctx, "acme", "ended-2"); err != nil || !ended {
		t.Fatalf("Ended = %v, %v", ended, err)
	}
	got, err = s.Get(ctx, "acme", "ended-2")
	if err != nil {
		t.Fatal(err)
	}
	if got.Record.State != wire.StateSucceeded || got.Record.Cost != "0.0041235" || got.Record.Usage == nil || *got.Record.Usage != *usage {
		t.Fatalf("Repair: record %+v, want succeeded with the summary's usage and cost", got.Record)
	}
	// The summary's 3 chunks were output: the repaired record says so, as
	// the runner's own would (TestChaosClusterKillAll found one that did
	// not, after a runner's record write failed with the whole cluster down).
	if !got.Record.Committed {
		t.Fatalf("Repair: record %+v not committed, though its terminal status counts %d chunks", got.Record, st.Summary.Chunks)
	}
}
