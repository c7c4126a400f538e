package sweeper_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	store *runs.Store // the mesh's side: creates and ends runs
	sw    *sweeper.Sweeper
	nc    *nats.Conn // the sweeper's own connection
	js    jetstream.JetStream
	work  jetstream.Stream
	seqs  map[string]uint64 // run id → its work item's stream sequence
}

// start ensures the topology on an embedded server and binds a store and
// a sweeper to it, each on its own connection.
func start(t *testing.T, cfg sweeper.Config) *fixture {
	t.Helper()
	srv := natstest.RunJetStream(t)
	ctx := context.Background()
	deps := func() (*nats.Conn, service.Deps) {
		nc, js := natstest.Connect(t, srv)
		return nc, service.Deps{NC: nc, JS: js, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}
	}
	_, md := deps()
	if err := topology.Ensure(ctx, md.JS, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	store, err := runs.Open(ctx, md)
	if err != nil {
		t.Fatal(err)
	}
	work, err := md.JS.Stream(ctx, md.Names.WorkStream())
	if err != nil {
		t.Fatal(err)
	}
	snc, sd := deps()
	sw, err := sweeper.New(ctx, sd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{store: store, sw: sw, nc: snc, js: md.JS, work: work, seqs: map[string]uint64{}}
}

// route creates a run, publishes accepted and routed, records it routed
// with deadline (unix ms; 0 for none) and dispatches its work item.
func (f *fixture) route(t *testing.T, id string, deadline int64) runs.Run {
	t.Helper()
	ctx := context.Background()
	r, err := f.store.Create(ctx, wire.RunRecord{RunID: id, Tenant: "acme", Principal: "p", Profile: "fixture", Created: time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	w := f.store.Events().New("acme", id)
	for _, st := range []wire.State{wire.StateAccepted, wire.StateRouted} {
		if err := w.Status(ctx, wire.Status{State: st}); err != nil {
			t.Fatal(err)
		}
	}
	if r, err = f.store.Route(ctx, r, &wire.Pin{Provider: "fixture"}, "fixture", deadline); err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(subject.Names{}.Work("subprocess", "fixture", "acme"))
	msg.Data = []byte("work")
	msg.Header.Set(jetstream.MsgIDHeader, subject.RunMsgID("acme", id))
	ack, err := f.js.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	f.seqs[id] = ack.Sequence
	return r
}

// finish routes n runs and ends each as its runner would: succeeded,
// and then its work acknowledged (here: removed from the work stream).
func (f *fixture) finish(t *testing.T, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		r := f.route(t, id, 0)
		w, err := f.store.Events().Open(ctx, "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.store.End(ctx, w, r, wire.Status{State: wire.StateSucceeded}); err != nil {
			t.Fatal(err)
		}
		if err := f.work.DeleteMsg(ctx, f.seqs[id]); err != nil {
			t.Fatal(err)
		}
	}
}

// reconcile runs one reconcile and returns its counts and how many
// messages the sweeper's connection received for it (listing deliveries,
// read replies, API replies): what it costs the server, measured outside
// the sweeper.
func (f *fixture) reconcile(t *testing.T) (sweeper.Reconciled, uint64) {
	t.Helper()
	before := f.nc.Stats().InMsgs
	res, err := f.sw.Reconcile(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res, f.nc.Stats().InMsgs - before
}

// The reconcile reads the runs that have not ended, never the ones that
// did: ten times more ended runs cost it nothing more.
func TestReconcileReadsDoNotGrowWithEndedRuns(t *testing.T) {
	const n, live = 20, 3
	f := start(t, sweeper.Config{})
	for i := range live {
		f.route(t, fmt.Sprintf("going-%d", i), 0)
	}
	f.finish(t, "first", n)
	first, firstMsgs := f.reconcile(t)
	f.finish(t, "then", 10*n)
	then, thenMsgs := f.reconcile(t)
	t.Logf("after %d ended runs: %+v, %d messages received; after %d: %+v, %d messages", n, first, firstMsgs, 11*n, then, thenMsgs)
	want := sweeper.Reconciled{Listed: live, Read: live}
	if first != want || then != want {
		t.Fatalf("reconcile after %d ended runs = %+v, after %d = %+v; want %+v both times", n, first, 11*n, then, want)
	}
	if thenMsgs != firstMsgs {
		t.Fatalf("the sweeper received %d messages for a reconcile after %d ended runs, %d after %d: grew with the ended runs", thenMsgs, 11*n, firstMsgs, n)
	}
	// The records of the ended runs are all there: the reconcile skipped
	// them, it did not lose them.
	if r, err := f.store.Get(context.Background(), "acme", "first-0"); err != nil || r.Record.State != wire.StateSucceeded {
		t.Fatalf("an ended run's record: %s, %v", r.Record.State, err)
	}
}

// The reconcile keeps its duties on the runs it lists: it times out a
// queued run past its deadline, fails a run with output whose runner's
// lease is gone (and not one whose runner's lease is held),
// repairs the record of a run whose events ended (a writer that stopped
// before recording the end), and leaves a queued run in time alone.
func TestReconcileDuties(t *testing.T) {
	f := start(t, sweeper.Config{OrphanGrace: time.Millisecond})
	ctx := context.Background()
	f.route(t, "late", time.Now().Add(-time.Second).UnixMilli())
	f.route(t, "queued", time.Now().Add(time.Hour).UnixMilli())
	f.route(t, "committed", time.Now().Add(time.Hour).UnixMilli())
	w, err := f.store.Events().Open(ctx, "acme", "committed")
	if err != nil {
		t.Fatal(err)
	}
	// Written by a runner whose lease is gone.
	w.Author("runner-gone", "e1", 1)
	if err := w.Status(ctx, wire.Status{State: wire.StateRunning, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Chunk(ctx, wire.Chunk{Type: wire.ChunkText, Content: "out"}); err != nil {
		t.Fatal(err)
	}
	// Held by a runner whose lease is held: left alone.
	f.route(t, "held", time.Now().Add(time.Hour).UnixMilli())
	lease, err := f.store.HoldRunner(ctx, "runner-live")
	if err != nil {
		t.Fatal(err)
	}
	defer f.store.Release(lease)
	if w, err = f.store.Events().Open(ctx, "acme", "held"); err != nil {
		t.Fatal(err)
	}
	w.Author("runner-live", lease.Epoch(), 1)
	if err := w.Status(ctx, wire.Status{State: wire.StateRunning, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Chunk(ctx, wire.Chunk{Type: wire.ChunkText, Content: "out"}); err != nil {
		t.Fatal(err)
	}
	f.route(t, "unrecorded", time.Now().Add(time.Hour).UnixMilli())
	if w, err = f.store.Events().Open(ctx, "acme", "unrecorded"); err != nil {
		t.Fatal(err)
	}
	if err := w.Terminal(ctx, wire.Status{State: wire.StateSucceeded}); err != nil { // and stopped before the record
		t.Fatal(err)
	}
	f.finish(t, "done", 1)
	time.Sleep(2 * time.Millisecond) // past OrphanGrace since the records were written

	res, _ := f.reconcile(t)
	if want := (sweeper.Reconciled{Ended: 2, Listed: 5, Read: 5}); res != want {
		t.Fatalf("reconcile = %+v; want %+v (late and committed ended, unrecorded repaired; done-0 not listed)", res, want)
	}
	for id, want := range map[string]wire.State{"late": wire.StateTimedOut, "committed": wire.StateFailed, "queued": wire.StateRouted, "unrecorded": wire.StateSucceeded, "held": wire.StateRouted} {
		r, err := f.store.Get(ctx, "acme", id)
		if err != nil || r.Record.State != want {
			t.Errorf("%s: %s, %v; want %s", id, r.Record.State, err, want)
		}
	}
	// The sweeper's terminal statuses name the profile that ran, as a
	// runner's do (after a fallback, the one it moved to).
	for _, id := range []string{"late", "committed"} {
		tl, err := f.store.Events().Tail(ctx, "acme", id)
		if err != nil || !tl.Ended() || tl.Event.Status.Profile != "fixture" {
			t.Errorf("%s: terminal %+v, %v; want one naming profile fixture", id, tl.Event.Status, err)
		}
	}
	// Their work stays until a runner takes it, and the reconcile reads
	// their records again, ending nothing more.
	if res, _ := f.reconcile(t); res != (sweeper.Reconciled{Listed: 5, Read: 5}) {
		t.Fatalf("second reconcile = %+v; want 5 listed and read, none ended", res)
	}
	if r, err := f.store.Get(ctx, "acme", "committed"); err != nil || r.Record.Owner != "runner-gone" || !r.Record.Committed {
		t.Fatalf("committed's record = %+v, %v; want its runner and its output recorded", r.Record, err)
	}
}
