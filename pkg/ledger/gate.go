package ledger

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// GateConfig configures a Gate.
type GateConfig struct {
	// CacheTTL is how long a budget, a quota and a period's spend read
	// are used before they are read again (default 1s). The in-flight set
	// of a quota is read at every admission.
	CacheTTL time.Duration
	// Clock says what time it is for the budgets' periods and the cache
	// (default time.Now); a test drives it.
	Clock func() time.Time
	// Ended reports whether a run has ended or never started (no record),
	// for freeing the slots of a full quota that a router left behind
	// (see Admit). Nil frees none that way.
	Ended func(ctx context.Context, tenant, runID string) (bool, error)
	// LeakGrace is how long a run holds its slot before a full quota asks
	// Ended about it (default 1m: a router creates the run's record just
	// after it admits it).
	LeakGrace time.Duration
}

// Gate is the router's admission check against the budgets and quotas.
// It is safe for concurrent use.
type Gate struct {
	s   *Store
	cfg GateConfig

	mu      sync.Mutex
	cache   map[string]cached
	checked map[string]time.Time // tenant → last look for leaked slots
}

type cached struct {
	at  time.Time
	v   any
	err error
}

// NewGate returns a gate over s.
func NewGate(s *Store, cfg GateConfig) *Gate {
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.LeakGrace <= 0 {
		cfg.LeakGrace = time.Minute
	}
	return &Gate{s: s, cfg: cfg, cache: map[string]cached{}, checked: map[string]time.Time{}}
}

// load returns key's cached value, or reads it with read when the cache
// has none younger than CacheTTL (by the gate's clock; a clock that went
// back reads again).
func (g *Gate) load(ctx context.Context, now time.Time, key string, read func(context.Context) (any, error)) (any, error) {
	g.mu.Lock()
	c, ok := g.cache[key]
	g.mu.Unlock()
	if age := now.Sub(c.at); ok && age >= 0 && age < g.cfg.CacheTTL {
		return c.v, c.err
	}
	v, err := read(ctx)
	if err != nil && !errors.Is(err, ErrNotSet) {
		return nil, err // not cached: an infrastructure failure
	}
	g.mu.Lock()
	if len(g.cache) > 4096 {
		for k, c := range g.cache {
			if now.Sub(c.at) >= g.cfg.CacheTTL || now.Before(c.at) {
				delete(g.cache, k)
			}
		}
	}
	g.cache[key] = cached{at: now, v: v, err: err}
	g.mu.Unlock()
	return v, err
}

func (g *Gate) budget(ctx context.Context, now time.Time, tenant, principal string) (*wire.Budget, error) {
	v, err := g.load(ctx, now, "budget\x00"+tenant+"\x00"+principal, func(ctx context.Context) (any, error) {
		b, err := g.s.Budget(ctx, tenant, principal)
		return &b, err
	})
	if errors.Is(err, ErrNotSet) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return v.(*wire.Budget), nil
}

// periodSpend is tenant's spend in the period of the given kind holding
// now, from its first day to now's.
func (g *Gate) periodSpend(ctx context.Context, now time.Time, tenant, period string) (*Spend, time.Time, error) {
	start, err := PeriodStart(period, now)
	if err != nil {
		return nil, start, err
	}
	v, err := g.load(ctx, now, "spend\x00"+tenant+"\x00"+Day(start)+"\x00"+period, func(ctx context.Context) (any, error) {
		days, err := g.s.Range(ctx, tenant, Days(start, now))
		if err != nil {
			return nil, err
		}
		total := &Spend{}
		for _, sp := range days {
			total.Merge(sp)
		}
		return total, nil
	})
	if err != nil {
		return nil, start, err
	}
	return v.(*Spend), start, nil
}

// Admit decides whether a run of tenant's principal may start: nil, or a
// *wire.Error of class BudgetExceeded (the tenant's or the principal's
// budget is spent in its current period) or AdmissionRejected (the
// tenant's quota of runs admitted and not ended is taken); any other
// error is an infrastructure failure to try again. Admitting takes one
// of the quota's slots for the run, once: a run admitted again (a
// redelivered submission) keeps the one it has. The slot is freed when
// the ledger writer sees the run's end (Store.Release).
//
// A slot can be left behind by a run that never started (a resubmission
// of a run id that had ended, admitted before it was found a duplicate):
// a quota found taken asks, at most once a second, whether each run
// holding a slot for over LeakGrace has ended or never started, and
// frees those.
func (g *Gate) Admit(ctx context.Context, tenant, principal, runID string) error {
	now := g.cfg.Clock()
	for _, p := range []string{"", principal} {
		b, err := g.budget(ctx, now, tenant, p)
		if err != nil {
			return err
		}
		if b == nil {
			continue
		}
		if err := g.checkBudget(ctx, now, b); err != nil {
			return err
		}
	}
	v, err := g.load(ctx, now, "quota\x00"+tenant, func(ctx context.Context) (any, error) {
		q, err := g.s.Quota(ctx, tenant)
		return q, err
	})
	if errors.Is(err, ErrNotSet) {
		return nil
	}
	if err != nil {
		return err
	}
	return g.take(ctx, tenant, runID, v.(wire.Quota).MaxRunning)
}

func (g *Gate) checkBudget(ctx context.Context, now time.Time, b *wire.Budget) error {
	limit, err := amount(b.Amount)
	if err != nil {
		return err
	}
	sp, start, err := g.periodSpend(ctx, now, b.Tenant, b.Period)
	if err != nil {
		return err
	}
	scope, spent := "tenant "+b.Tenant, sp.Total()
	if b.Principal != "" {
		scope, spent = "principal "+b.Principal+" of tenant "+b.Tenant, sp.Principal(b.Principal).Total
	}
	if spent.Cost != nil && spent.Cost.Cmp(limit) >= 0 {
		return wire.Errorf(wire.BudgetExceeded, "%s has spent %s USD of its %s budget of %s USD since %s UTC",
			scope, spent.CostString(), b.Period, cost.Format(limit), start.Format(time.DateOnly))
	}
	return nil
}

// take adds the run to the tenant's in-flight set if it has fewer than
// max, by compare-and-set.
func (g *Gate) take(ctx context.Context, tenant, runID string, max int) error {
	admitted := time.Now().UnixMilli()
	for pass := 0; ; pass++ {
		var held int
		err := g.s.changeInFlight(ctx, tenant, func(runs map[string]int64) (bool, error) {
			if _, ok := runs[runID]; ok {
				return false, nil
			}
			if held = len(runs); held >= max {
				return false, errFull
			}
			runs[runID] = admitted
			return true, nil
		})
		if !errors.Is(err, errFull) {
			return err
		}
		if pass > 0 || !g.freeLeaked(ctx, tenant) {
			return wire.Errorf(wire.AdmissionRejected, "tenant %s has %d runs admitted and not ended, its quota is %d", tenant, held, max)
		}
	}
}

// freeLeaked frees the slots of runs that have ended or never started,
// among those held over LeakGrace, at most once a second per tenant; it
// reports whether it freed any.
func (g *Gate) freeLeaked(ctx context.Context, tenant string) bool {
	if g.cfg.Ended == nil {
		return false
	}
	now := time.Now()
	g.mu.Lock()
	if last, ok := g.checked[tenant]; ok && now.Sub(last) < time.Second {
		g.mu.Unlock()
		return false
	}
	g.checked[tenant] = now
	g.mu.Unlock()
	runs, err := g.s.InFlight(ctx, tenant)
	if err != nil {
		return false
	}
	freed := false
	for id, at := range runs {
		if now.Sub(time.UnixMilli(at)) < g.cfg.LeakGrace {
			continue
		}
		ended, err := g.cfg.Ended(ctx, tenant, id)
		if err != nil || !ended {
			continue
		}
		if g.s.Release(ctx, tenant, id) == nil {
			freed = true
		}
	}
	return freed
}
