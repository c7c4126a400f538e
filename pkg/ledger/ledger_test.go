package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/ledger"
	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T) *ledger.Store {
	t.Helper()
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	if err := topology.Ensure(context.Background(), js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	s, err := ledger.Open(context.Background(), js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var day1 = time.Date(2026, 3, 15, 23, 59, 0, 0, time.UTC)

// ended is the terminal record of run i of tenant, ended at `at`, with a
// cost that a float would round.
func ended(tenant string, i int, at time.Time) wire.RunRecord {
	return wire.RunRecord{V: wire.Version, RunID: fmt.Sprintf("run-%d", i), Tenant: tenant, Principal: fmt.Sprintf("p%d", i%3),
		Profile: "fixture", Labels: map[string]string{"team": fmt.Sprintf("t%d", i%2)}, State: wire.StateSucceeded,
		Usage: &wire.Usage{InputTokens: int64(i), OutputTokens: 7}, Cost: fmt.Sprintf("0.%06d1", i),
		Created: at.UnixMilli() - 1000, Updated: at.UnixMilli()}
}

func exact(t *testing.T, recs []wire.RunRecord) string {
	t.Helper()
	costs := make([]string, len(recs))
	for i, r := range recs {
		costs[i] = r.Cost
	}
	s, err := cost.Add(costs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Two writers feed every record of 200 runs, on two days, at once (each
// record twice, as a redelivery to another writer would): every run is
// counted once, exactly, by day, principal and label.
func TestRollupUnderConcurrentWriters(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	const n = 200
	var recs []wire.RunRecord
	for i := range n {
		recs = append(recs, ended("acme", i, day1.Add(time.Duration(i%2)*time.Minute))) // 23:59 and 00:00 the next day
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < 2*n; i += 8 {
				errs <- s.Record(ctx, recs[i%n])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	days := map[string][]wire.RunRecord{}
	for _, r := range recs {
		d := ledger.Day(time.UnixMilli(r.Updated))
		days[d] = append(days[d], r)
	}
	if len(days) != 2 {
		t.Fatalf("days = %d, want 2", len(days))
	}
	for d, want := range days {
		sp, err := s.DaySpend(ctx, "acme", d)
		if err != nil {
			t.Fatal(err)
		}
		total := sp.Total()
		if total.CostString() != exact(t, want) || total.Runs != int64(len(want)) {
			t.Errorf("day %s: %d runs, %s USD; want %d, %s", d, total.Runs, total.CostString(), len(want), exact(t, want))
		}
		var p0 []wire.RunRecord
		for _, r := range want {
			if r.Principal == "p0" {
				p0 = append(p0, r)
			}
		}
		if got := sp.Principal("p0").Total.CostString(); got != exact(t, p0) {
			t.Errorf("day %s principal p0: %s, want %s", d, got, exact(t, p0))
		}
	}
}

// A writer stopped after the spend entry and before the fold loses
// nothing: readers add the unfolded entry, and the record's redelivery
// folds it once. Stopped after the fold and before the quota release, the
// redelivery frees the slot and counts nothing again.
func TestCrashBetweenWrites(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	rec := ended("acme", 1, day1)
	day := ledger.Day(day1)
	e, key, ok := ledger.Entry(rec)
	if !ok {
		t.Fatal("no entry for an ended run")
	}
	g := ledger.NewGate(s, ledger.GateConfig{})
	if err := s.SetQuota(ctx, "acme", 1); err != nil {
		t.Fatal(err)
	}
	if err := g.Admit(ctx, "acme", rec.Principal, rec.RunID); err != nil {
		t.Fatal(err)
	}
	// The first writer: the entry, then it dies.
	if err := s.Put(ctx, key, e); err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		t.Helper()
		sp, err := s.DaySpend(ctx, "acme", day)
		if err != nil {
			t.Fatal(err)
		}
		if tot := sp.Total(); tot.CostString() != rec.Cost || tot.Runs != 1 || sp.Principal(rec.Principal).Labels["team=t1"].CostString() != rec.Cost {
			t.Fatalf("%s: %d runs, %s USD (by label %v); want 1, %s", stage, tot.Runs, tot.CostString(), sp.Principal(rec.Principal).Labels, rec.Cost)
		}
	}
	check("entry written, not folded")
	// The second writer: the entry again (exists), the fold, then it dies.
	if err := s.Put(ctx, key, e); err != nil {
		t.Fatal(err)
	}
	if err := s.Fold(ctx, "acme", day); err != nil {
		t.Fatal(err)
	}
	check("folded")
	if f, err := s.InFlight(ctx, "acme"); err != nil || len(f) != 1 {
		t.Fatalf("in flight = %v, %v; want the run", f, err)
	}
	// The third delivery completes it.
	for range 2 {
		if err := s.Record(ctx, rec); err != nil {
			t.Fatal(err)
		}
		check("recorded")
	}
	if f, err := s.InFlight(ctx, "acme"); err != nil || len(f) != 0 {
		t.Fatalf("in flight = %v, %v; want none", f, err)
	}
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// A budget refuses once the period's spend reached it, a principal's
// apart from its tenant's, and the next period admits again.
func TestBudgetPeriods(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	c := &clock{now: day1}
	g := ledger.NewGate(s, ledger.GateConfig{CacheTTL: time.Millisecond, Clock: c.Now})
	if err := s.SetBudget(ctx, wire.Budget{Tenant: "acme", Amount: "0.0000031", Period: wire.PeriodDay}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetBudget(ctx, wire.Budget{Tenant: "acme", Principal: "p1", Amount: "0.0000011", Period: wire.PeriodMonth}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []wire.Budget{{Tenant: "acme", Amount: "-1", Period: "day"}, {Tenant: "acme", Amount: "1e3", Period: "day"},
		{Tenant: "acme", Amount: "1", Period: "week"}, {Tenant: "a.b", Amount: "1", Period: "day"}} {
		if err := s.SetBudget(ctx, bad); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("SetBudget(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	admit := func(principal string, want wire.Class) {
		t.Helper()
		err := g.Admit(ctx, "acme", principal, "next")
		var we *wire.Error
		switch {
		case want == "" && err != nil:
			t.Fatalf("%s at %s: %v, want admitted", principal, c.Now(), err)
		case want != "" && (!errors.As(err, &we) || we.Class != want):
			t.Fatalf("%s at %s: %v, want %s", principal, c.Now(), err, want)
		}
	}
	admit("p1", "")
	// Run 1 (p1) spends 0.0000011: p1's month budget is spent.
	if err := s.Record(ctx, ended("acme", 1, day1)); err != nil {
		t.Fatal(err)
	}
	c.Set(day1.Add(time.Second))
	admit("p1", wire.BudgetExceeded)
	admit("p2", "")
	// Run 2 (p2) brings the tenant to 0.0000032 of 0.0000031.
	if err := s.Record(ctx, ended("acme", 2, day1)); err != nil {
		t.Fatal(err)
	}
	c.Set(day1.Add(2 * time.Second))
	admit("p2", wire.BudgetExceeded)
	// The next day: the tenant's budget admits, p1's month budget not.
	c.Set(day1.Add(time.Minute))
	admit("p2", "")
	admit("p1", wire.BudgetExceeded)
	c.Set(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	admit("p1", "")
}

// Two gates (two routers) admitting 40 runs of one tenant at once admit
// exactly its quota; a run admitted again keeps its slot, and a freed slot
// admits the next.
func TestQuotaTwoRouters(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	if err := s.SetQuota(ctx, "acme", 5); err != nil {
		t.Fatal(err)
	}
	gates := []*ledger.Gate{ledger.NewGate(s, ledger.GateConfig{}), ledger.NewGate(s, ledger.GateConfig{})}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			err := gates[i%2].Admit(ctx, "acme", "p", fmt.Sprint("r", i))
			var we *wire.Error
			switch {
			case err == nil:
				admitted.Add(1)
			case !errors.As(err, &we) || we.Class != wire.AdmissionRejected:
				t.Errorf("run %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	held, err := s.InFlight(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if admitted.Load() != 5 || len(held) != 5 {
		t.Fatalf("admitted %d, holding %v; want 5", admitted.Load(), held)
	}
	var one string
	for id := range held {
		one = id
	}
	if err := gates[1].Admit(ctx, "acme", "p", one); err != nil {
		t.Fatalf("a run admitted again: %v", err)
	}
	if err := s.Release(ctx, "acme", one); err != nil {
		t.Fatal(err)
	}
	if err := gates[0].Admit(ctx, "acme", "p", "late"); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if err := gates[0].Admit(ctx, "other", "p", "free"); err != nil {
		t.Fatalf("a tenant without a quota: %v", err)
	}
}

// A slot left behind by a run that never started (its router found it a
// duplicate of an ended run after admitting it) is freed once the quota
// is found taken and the slot is older than the grace; a slot of a run
// that has not ended is kept.
func TestQuotaFreesLeakedSlots(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	if err := s.SetQuota(ctx, "acme", 2); err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{"running": true, "next": true}
	var asked atomic.Int64
	g := ledger.NewGate(s, ledger.GateConfig{LeakGrace: time.Millisecond, Ended: func(_ context.Context, tenant, id string) (bool, error) {
		asked.Add(1)
		return !live[id], nil
	}})
	for _, id := range []string{"running", "ghost"} {
		if err := g.Admit(ctx, "acme", "p", id); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Millisecond) // older than the grace
	if err := g.Admit(ctx, "acme", "p", "next"); err != nil {
		t.Fatalf("with a leaked slot: %v", err)
	}
	held, err := s.InFlight(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 || held["ghost"] != 0 || held["running"] == 0 || held["next"] == 0 {
		t.Fatalf("in flight %v, want running and next", held)
	}
	if asked.Load() == 0 {
		t.Fatal("the gate never asked whether a run had ended")
	}
	// Full again, and nothing leaked: AdmissionRejected.
	var we *wire.Error
	if err := g.Admit(ctx, "acme", "p", "over"); !errors.As(err, &we) || we.Class != wire.AdmissionRejected {
		t.Fatalf("over the quota: %v, want AdmissionRejected", err)
	}
}
