package sweeper_test

import (
	"context"
	"errors"
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
	snc, sd := deps()
	sw, err := sweeper.New(ctx, sd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{store: store, sw: sw, nc: snc, js: md.JS}
}

// route creates a run, publishes accepted and routed, and records it
// routed with deadline (unix ms; 0 for none).
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
	return r
}

// finish routes n runs and ends each, as its runner would, succeeded.
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
		if err := f.store.End(ctx, w, r, wire.Status{State: wire.StateSucceeded}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// settled waits until the live index lists exactly want entries: the
// removal markers of the runs just ended have expired.
func (f *fixture) settled(t *testing.T, want int) {
	t.Helper()
	natstest.Eventually(t, 15*time.Second, func() error {
		keys, err := f.store.Live(context.Background())
		if err != nil || len(keys) != want {
			return fmt.Errorf("live index lists %d keys (%v), want %d", len(keys), err, want)
		}
		return nil
	})
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
	f.settled(t, live)
	first, firstMsgs := f.reconcile(t)
	f.finish(t, "then", 10*n)
	f.settled(t, live)
	then, thenMsgs := f.reconcile(t)
	t.Logf("after %d ended runs: %+v, %d messages received; after %d: %+v, %d messages", n, first, firstMsgs, 11*n, then, thenMsgs)
	want := sweeper.Reconciled{Listed: live, Read: live}
	if first != want || then != want {
		t.Fatalf("reconcile after %d ended runs = %+v, after %d = %+v; want %+v both times", n, first, 11*n, then, want)
	}
	if thenMsgs > firstMsgs+2 {
		t.Fatalf("the sweeper received %d messages for a reconcile after %d ended runs, %d after %d: grew with the ended runs", thenMsgs, 11*n, firstMsgs, n)
	}
	// The records of the ended runs are all there: the reconcile skipped
	// them, it did not lose them.
	if r, err := f.store.Get(context.Background(), "acme", "first-0"); err != nil || r.Record.State != wire.StateSucceeded {
		t.Fatalf("an ended run's record: %s, %v", r.Record.State, err)
	}
}

// The reconcile keeps its duties on the runs it lists: it times out a
// queued run past its deadline and fails a committed run without a
// lease, which leave the live index as they end; it drops the live key of a
// run whose record is terminal (a writer that stopped after recording
// the end) or gone for longer than the grace, and keeps a fresh one.
func TestReconcileDuties(t *testing.T) {
	f := start(t, sweeper.Config{LiveGrace: 2 * time.Second})
	ctx := context.Background()
	names := subject.Names{}
	liveKV, err := f.js.KeyValue(ctx, names.LiveBucket())
	if err != nil {
		t.Fatal(err)
	}
	f.route(t, "late", time.Now().Add(-time.Second).UnixMilli())
	f.route(t, "queued", time.Now().Add(time.Hour).UnixMilli())
	r := f.route(t, "committed", time.Now().Add(time.Hour).UnixMilli())
	if r, err = f.store.Claim(ctx, r, "runner-gone"); err != nil {
		t.Fatal(err)
	}
	w, err := f.store.Events().Open(ctx, "acme", "committed")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Status(ctx, wire.Status{State: wire.StateRunning}); err != nil {
		t.Fatal(err)
	}
	lease, err := f.store.Hold(ctx, r, "runner-gone")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Commit(ctx, r); err != nil {
		t.Fatal(err)
	}
	lease.Stop()
	leases, err := f.js.KeyValue(ctx, names.LeasesBucket())
	if err != nil {
		t.Fatal(err)
	}
	if err := leases.Delete(ctx, r.Key()); err != nil { // the runner is gone
		t.Fatal(err)
	}
	f.finish(t, "done", 1)
	if _, err := liveKV.Put(ctx, "acme.done-0", []byte("0")); err != nil { // its writer stopped before removing it
		t.Fatal(err)
	}
	if _, err := liveKV.Put(ctx, "acme.creating", []byte("0")); err != nil { // a record being created
		t.Fatal(err)
	}

	res, _ := f.reconcile(t)
	// The two it ended left the live index as they ended (runs.Store.End);
	// it dropped done-0's itself.
	if want := (sweeper.Reconciled{Ended: 2, Listed: 5, Read: 5, Dropped: 1}); res != want {
		t.Fatalf("reconcile = %+v; want %+v (late and committed ended, done-0 dropped)", res, want)
	}
	for id, want := range map[string]wire.State{"late": wire.StateTimedOut, "committed": wire.StateFailed, "queued": wire.StateRouted} {
		r, err := f.store.Get(ctx, "acme", id)
		if err != nil || r.Record.State != want {
			t.Errorf("%s: %s, %v; want %s", id, r.Record.State, err, want)
		}
	}
	got := map[string]bool{}
	natstest.Eventually(t, 10*time.Second, func() error { // the removal markers expired
		live, err := f.store.Live(ctx)
		if err != nil {
			return err
		}
		clear(got)
		for _, k := range live {
			got[k] = true
		}
		if len(got) != 2 {
			return fmt.Errorf("live = %v", got)
		}
		return nil
	})
	if !got["acme.queued"] || !got["acme.creating"] {
		t.Fatalf("live after the reconcile = %v; want acme.queued and acme.creating", got)
	}

	// Past the grace, a live key without a record is dropped.
	natstest.Eventually(t, 10*time.Second, func() error {
		res, _ := f.reconcile(t)
		if res.Dropped != 1 {
			return fmt.Errorf("reconcile = %+v; want the record-less key dropped", res)
		}
		return nil
	})
	if _, err := liveKV.Get(ctx, "acme.creating"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("record-less live key after the grace: %v", err)
	}
}
