package exports

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore/storetest"
	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	records *Records
	consent *consent.Store
	store   *storetest.Faulty
	metrics *service.Metrics
}

func newEnv(t *testing.T) env {
	t.Helper()
	_, _, js := natstest.RunMesh(t)
	ctx := context.Background()
	records, err := Open(ctx, js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	grants, err := consent.Open(ctx, js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := trajstore.NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return env{records: records, consent: grants, store: &storetest.Faulty{Store: dir}, metrics: service.NewMetrics(prometheus.NewRegistry())}
}

func (e env) sweeper() *Sweeper {
	return &Sweeper{Records: e.records, Consent: e.consent, Store: e.store, Metrics: e.metrics}
}

// export stores bytes and a stored record for run, expiring at expires.
func (e env) export(t *testing.T, runID string, expires time.Time) Entry {
	t.Helper()
	ctx := context.Background()
	data := []byte(fmt.Sprintf(`{"run_id":%q}`+"\n", runID))
	sum := trajstore.SHA256(data)
	name, err := trajstore.Name("acme", runID, sum)
	if err != nil {
		t.Fatal(err)
	}
	rec := wire.ExportRecord{Tenant: "acme", RunID: runID, Principal: "alice", Object: name, SHA256: sum, Size: int64(len(data)), ConsentRev: 1}
	rev, err := e.records.Begin(ctx, rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Put(ctx, name, data); err != nil {
		t.Fatal(err)
	}
	rec.Created, rec.Expires = time.Now().UnixMilli(), expires.UnixMilli()
	if rev, err = e.records.Finish(ctx, rec, rev); err != nil {
		t.Fatal(err)
	}
	rec.V, rec.Stored = wire.Version, true
	return Entry{Record: rec, Rev: rev}
}

// wantExists fails t unless ent's record and bytes exist as record and
// bytes say; what names ent in the failure.
func (e env) wantExists(t *testing.T, ent Entry, record, bytes bool, what string) {
	t.Helper()
	if r, b := e.exists(t, ent); r != record || b != bytes {
		t.Errorf("%s: record %v, bytes %v; want record %v, bytes %v", what, r, b, record, bytes)
	}
}

func (e env) exists(t *testing.T, ent Entry) (record, bytes bool) {
	t.Helper()
	ctx := context.Background()
	_, err := e.records.Get(ctx, "acme", ent.Record.RunID)
	switch {
	case err == nil:
		record = true
	case !errors.Is(err, ErrNotFound):
		t.Fatal(err)
	}
	bytes, err = e.store.Store.Exists(ctx, ent.Record.Object)
	if err != nil {
		t.Fatal(err)
	}
	return record, bytes
}

// TestSweepByteDeleteFailsOnce: the byte delete fails once; the record
// survives; the next sweep removes both.
func TestSweepByteDeleteFailsOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	expired := e.export(t, "r1", time.Now().Add(-time.Minute))
	kept := e.export(t, "r2", time.Now().Add(time.Hour))
	s := e.sweeper()

	e.store.FailNext(storetest.OpDelete, 1)
	res, err := s.Sweep(ctx)
	if !errors.Is(err, storetest.ErrInjected) || res.Failed != 1 || res.Swept != 0 || res.Pending != 1 || res.Kept != 1 {
		t.Fatalf("sweep with a failing delete = %+v, %v; want 1 failed and pending, 1 kept, the injected error", res, err)
	}
	e.wantExists(t, expired, true, true, "after the failed delete")
	if got := testutil.ToFloat64(e.metrics.ExportSweepFailures); got != 1 {
		t.Errorf("sweep failures metric = %v, want 1", got)
	}
	if got := testutil.ToFloat64(e.metrics.ExportsPending); got != 1 {
		t.Errorf("pending metric = %v, want 1", got)
	}
	res, err = s.Sweep(ctx)
	if err != nil || res.Swept != 1 || res.Failed != 0 || res.Pending != 0 || res.Kept != 1 {
		t.Fatalf("next sweep = %+v, %v; want 1 swept, 1 kept", res, err)
	}
	e.wantExists(t, expired, false, false, "after the next sweep")
	e.wantExists(t, kept, true, true, "the unexpired export")
	if got := testutil.ToFloat64(e.metrics.ExportsSwept.WithLabelValues(ReasonRetention)); got != 1 {
		t.Errorf("swept metric = %v, want 1", got)
	}
}

// TestSweepDeleteAnswerLost: the bytes are deleted but the answer is
// lost: the record is kept, and the next sweep finishes (deleting absent
// bytes is success).
func TestSweepDeleteAnswerLost(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ent := e.export(t, "r1", time.Now().Add(-time.Minute))
	s := e.sweeper()
	e.store.FailNextAfter(storetest.OpDelete, 1)
	if res, err := s.Sweep(ctx); err == nil || res.Failed != 1 {
		t.Fatalf("sweep = %+v, %v; want the lost answer counted as a failure", res, err)
	}
	e.wantExists(t, ent, true, false, "after the lost answer")
	if res, err := s.Sweep(ctx); err != nil || res.Swept != 1 {
		t.Fatalf("next sweep = %+v, %v; want 1 swept", res, err)
	}
	if rec, _ := e.exists(t, ent); rec {
		t.Fatal("record left after the next sweep")
	}
}

// TestSweepCrashBetweenPhases: a sweeper that died after deleting the
// bytes and before deleting the record leaves a state the next sweep
// completes. A sweeper that died after listing, before either delete,
// leaves everything for the next.
func TestSweepCrashBetweenPhases(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	afterBytes := e.export(t, "r1", time.Now().Add(-time.Minute))
	afterList := e.export(t, "r2", time.Now().Add(-time.Minute))
	// The first sweeper's phase 2 for r1, then it dies.
	if err := e.store.Store.Delete(ctx, afterBytes.Record.Object); err != nil {
		t.Fatal(err)
	}
	res, err := e.sweeper().Sweep(ctx) // a new sweeper: nothing in memory
	if err != nil || res.Swept != 2 || res.Pending != 0 {
		t.Fatalf("sweep after the crash = %+v, %v; want both swept", res, err)
	}
	for _, ent := range []Entry{afterBytes, afterList} {
		e.wantExists(t, ent, false, false, ent.Record.RunID)
	}
}

// TestSweepNeverDeletesARecordWhoseBytesRemain: if the bytes are still
// there after their delete answered (a store that lies, or a writer that
// put them again), the record stays.
func TestSweepNeverDeletesARecordWhoseBytesRemain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ent := e.export(t, "r1", time.Now().Add(-time.Minute))
	stubborn := &undeletable{Store: e.store.Store}
	s := &Sweeper{Records: e.records, Consent: e.consent, Store: stubborn, Metrics: e.metrics}
	if res, err := s.Sweep(ctx); err == nil || res.Swept != 0 || res.Failed != 1 {
		t.Fatalf("sweep = %+v, %v; want a failure and nothing swept", res, err)
	}
	e.wantExists(t, ent, true, true, "the export")
}

// undeletable answers every Delete with success and deletes nothing.
type undeletable struct{ trajstore.Store }

func (undeletable) Delete(context.Context, string) error { return nil }

// TestSweepWithdrawn: a withdrawal after the grant an export was made
// under expires it, whatever its retention; a later grant does not
// protect it, and exports under the later grant are kept.
func TestSweepWithdrawn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	g, err := e.consent.Grant(ctx, "acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	old := e.export(t, "r1", time.Now().Add(time.Hour))
	old.Record.ConsentRev = g.Rev
	if _, err := e.consent.Withdraw(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	g2, err := e.consent.Grant(ctx, "acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	// Re-stamp the two exports with the grants they were made under.
	restamp := func(ent Entry, rev uint64) Entry {
		t.Helper()
		ent.Record.ConsentRev = rev
		n, err := e.records.write(ctx, ent.Record, ent.Rev)
		if err != nil {
			t.Fatal(err)
		}
		ent.Rev = n
		return ent
	}
	old = restamp(old, g.Rev)
	fresh := restamp(e.export(t, "r2", time.Now().Add(time.Hour)), g2.Rev)
	res, err := e.sweeper().Sweep(ctx)
	if err != nil || res.Swept != 1 || res.Kept != 1 {
		t.Fatalf("sweep = %+v, %v; want the export under the withdrawn grant swept, the other kept", res, err)
	}
	e.wantExists(t, old, false, false, "withdrawn export")
	e.wantExists(t, fresh, true, true, "export under the new grant")
	if got := testutil.ToFloat64(e.metrics.ExportsSwept.WithLabelValues(ReasonWithdrawn)); got != 1 {
		t.Errorf("swept (withdrawn) = %v, want 1", got)
	}
}

// TestSweepAbandoned: a record left unstored (its exporter died between
// the record and the bytes) is swept once it has stayed unchanged for the
// abandon grace, bytes first.
func TestSweepAbandoned(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	data := []byte("{}\n")
	name, _ := trajstore.Name("acme", "r1", trajstore.SHA256(data))
	rec := wire.ExportRecord{Tenant: "acme", RunID: "r1", Principal: "alice", Object: name, SHA256: trajstore.SHA256(data), Size: 3}
	if _, err := e.records.Begin(ctx, rec, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Put(ctx, name, data); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s := e.sweeper()
	s.AbandonAfter = time.Minute
	s.now = func() time.Time { return now }
	if res, err := s.Sweep(ctx); err != nil || res.Kept != 1 || res.Swept != 0 {
		t.Fatalf("first sight of the unstored record: %+v, %v; want it kept", res, err)
	}
	now = now.Add(2 * time.Minute)
	if res, err := s.Sweep(ctx); err != nil || res.Swept != 1 {
		t.Fatalf("after the grace: %+v, %v; want it swept", res, err)
	}
	if ok, _ := e.store.Store.Exists(ctx, name); ok {
		t.Error("abandoned bytes left")
	}
}

// TestSweepersRace: several sweepers sweep the same expired exports at
// once; each export is removed, and counted, exactly once.
func TestSweepersRace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const n = 20
	for i := range n {
		e.export(t, fmt.Sprintf("r%d", i), time.Now().Add(-time.Minute))
	}
	var mu sync.Mutex
	swept := 0
	var wg sync.WaitGroup
	for range 4 {
		s := e.sweeper()
		wg.Go(func() {
			for range 3 {
				res, err := s.Sweep(ctx)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				swept += res.Swept
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if swept != n {
		t.Fatalf("swept %d over 4 racing sweepers, want exactly %d", swept, n)
	}
	if left, err := e.records.List(ctx, ""); err != nil || len(left) != 0 {
		t.Fatalf("left %d records (%v)", len(left), err)
	}
}
