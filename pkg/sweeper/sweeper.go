// Package sweeper ends running runs whose runner stopped heartbeating: when
// a run's lease expires, the sweeper publishes its terminal failed status
// with ProviderTransportError, fenced so that it never ends a run its runner
// ended first. Trajectory expiry (DESIGN §7) is not built yet.
package sweeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// Config configures a sweeper.
type Config struct {
	// ReconcileEvery is how often every run record is scanned for a running,
	// committed run without a lease (an expiry that happened while no
	// sweeper was watching) and for a queued run past its deadline
	// (default 1m; also once at start).
	ReconcileEvery time.Duration
	// Metadata is added to the sweeper's micro service info.
	Metadata map[string]string
}

// Sweeper watches leases.
type Sweeper struct {
	d        service.Deps
	cfg      Config
	runs     jetstream.KeyValue
	leases   jetstream.KeyValue
	log      *events.Log
	leaseTTL time.Duration

	mu   sync.Mutex
	seen map[string]time.Time // lease key (<tenant>.<run_id>) → last heartbeat seen
}

// New binds a sweeper to the topology, which must exist.
func New(ctx context.Context, d service.Deps, cfg Config) (*Sweeper, error) {
	if cfg.ReconcileEvery == 0 {
		cfg.ReconcileEvery = time.Minute
	}
	if cfg.ReconcileEvery < time.Second {
		return nil, fmt.Errorf("invalid sweeper config: reconcile interval must be at least 1s, got %s", cfg.ReconcileEvery)
	}
	s := &Sweeper{d: d, cfg: cfg, seen: map[string]time.Time{}}
	var err error
	if s.runs, err = d.JS.KeyValue(ctx, d.Names.RunsBucket()); err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", d.Names.RunsBucket(), err)
	}
	if s.leases, err = d.JS.KeyValue(ctx, d.Names.LeasesBucket()); err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", d.Names.LeasesBucket(), err)
	}
	if s.leaseTTL, err = topology.LeaseTTL(ctx, d.JS, d.Names); err != nil {
		return nil, err
	}
	if s.log, err = events.NewLog(ctx, d.JS, d.Names); err != nil {
		return nil, err
	}
	return s, nil
}

// Run sweeps until ctx ends and returns once its goroutines have.
func (s *Sweeper) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	svc, err := service.Register(s.d.NC, "agentmesh-sweeper", "ends runs whose lease expired",
		service.Metadata(s.cfg.Metadata, "lease_ttl", s.leaseTTL.String()),
		service.Endpoint{Name: "reconcile", Subject: s.d.Names.SweeperReconcile(), Handler: micro.HandlerFunc(func(req micro.Request) {
			n, err := s.Reconcile(ctx)
			if err != nil {
				_ = req.Error("500", err.Error(), nil)
				return
			}
			_ = req.Respond(fmt.Appendf(nil, "%d", n))
		})})
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	watcher, err := s.leases.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch %s: %w", s.d.Names.LeasesBucket(), err)
	}
	defer func() { _ = watcher.Stop() }()
	updates := watcher.Updates()
	s.d.Health.Add("sweeper", service.ConnCheck(s.d.NC))
	if _, err := s.Reconcile(ctx); err != nil {
		s.d.Log.Warn("initial reconcile", "err", err)
	}
	check := time.NewTicker(max(s.leaseTTL/4, 100*time.Millisecond))
	defer check.Stop()
	reconcile := time.NewTicker(s.cfg.ReconcileEvery)
	defer reconcile.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-updates:
			if !ok {
				// The watch ended under us (its consumer was lost): watch
				// again; the stale check and the reconcile cover the gap.
				s.d.Log.Warn("lease watcher closed; watching again")
				updates = nil
				if w, err := s.rewatch(ctx); err == nil {
					_ = watcher.Stop()
					watcher, updates = w, w.Updates()
				}
				continue
			}
			if e == nil {
				continue // end of the initial values
			}
			s.observe(ctx, e)
		case <-check.C:
			s.checkStale(ctx)
		case <-reconcile.C:
			if _, err := s.Reconcile(ctx); err != nil {
				s.d.Log.Warn("reconcile", "err", err)
			}
		}
	}
}

// rewatch opens a new watch on the leases bucket, retrying every second
// until it works or ctx ends.
func (s *Sweeper) rewatch(ctx context.Context) (jetstream.KeyWatcher, error) {
	for {
		w, err := s.leases.WatchAll(ctx)
		if err == nil {
			return w, nil
		}
		s.d.Log.Warn("watch leases", "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (s *Sweeper) observe(ctx context.Context, e jetstream.KeyValueEntry) {
	key := e.Key()
	switch e.Operation() {
	case jetstream.KeyValuePut:
		s.mu.Lock()
		s.seen[key] = e.Created()
		s.mu.Unlock()
	case jetstream.KeyValuePurge: // a MaxAge marker: the lease expired
		s.mu.Lock()
		delete(s.seen, key)
		s.mu.Unlock()
		s.expireKey(ctx, key)
	case jetstream.KeyValueDelete: // the runner released it
		s.mu.Lock()
		delete(s.seen, key)
		s.mu.Unlock()
	}
}

// checkStale expires leases not renewed within the TTL, in case the
// server's expiry marker has not arrived yet.
func (s *Sweeper) checkStale(ctx context.Context) {
	now := time.Now()
	var due []string
	s.mu.Lock()
	for key, at := range s.seen {
		if now.Sub(at) > s.leaseTTL {
			due = append(due, key)
		}
	}
	s.mu.Unlock()
	for _, key := range due {
		_, err := s.leases.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			s.mu.Lock()
			delete(s.seen, key)
			s.mu.Unlock()
			s.expireKey(ctx, key)
		}
	}
}

// Reconcile scans every run record, fails running, committed runs that
// have no lease and times out queued runs past their deadline. It returns
// how many it ended.
func (s *Sweeper) Reconcile(ctx context.Context) (int, error) {
	lister, err := s.runs.ListKeys(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return 0, nil
		}
		return 0, fmt.Errorf("list %s: %w", s.d.Names.RunsBucket(), err)
	}
	defer func() { _ = lister.Stop() }()
	n := 0
	for key := range lister.Keys() {
		entry, err := s.runs.Get(ctx, key)
		if err != nil {
			continue
		}
		rec, err := wire.Decode[wire.RunRecord](entry.Value())
		if err != nil {
			continue
		}
		if rec.State == wire.StateRouted && rec.Deadline > 0 && time.Now().UnixMilli() > rec.Deadline {
			// Queued past its deadline with no runner to notice.
			st := wire.Status{State: wire.StateTimedOut, Pin: rec.Pin, Error: wire.Errorf(wire.DeadlineExceeded, "run %s passed its deadline while queued", rec.RunID)}
			if done, err := s.log.ClaimAndEnd(ctx, s.runs, rec, entry.Revision(), st); err != nil {
				s.d.Log.Warn("time out queued run", "run_id", rec.RunID, "err", err)
			} else if done {
				s.d.Metrics.Runs.WithLabelValues(string(wire.StateTimedOut), rec.Adapter).Inc()
				n++
			}
			continue
		}
		if rec.State != wire.StateRunning || !rec.Committed {
			continue
		}
		if _, err := s.leases.Get(ctx, key); errors.Is(err, jetstream.ErrKeyNotFound) {
			if s.expire(ctx, rec.Tenant, rec.RunID) {
				n++
			}
		}
	}
	return n, nil
}

func (s *Sweeper) expireKey(ctx context.Context, key string) {
	tenant, runID, ok := strings.Cut(key, ".")
	if !ok {
		s.d.Log.Warn("lease key is not <tenant>.<run_id>", "key", key)
		return
	}
	s.expire(ctx, tenant, runID)
}

// expire ends a run whose lease is gone, if it is still running. The
// terminal status is published fenced before the record changes, so a
// runner that ended the run first wins and the record stays true.
func (s *Sweeper) expire(ctx context.Context, tenant, runID string) bool {
	key := subject.RunKey(tenant, runID)
	entry, err := s.runs.Get(ctx, key)
	if err != nil {
		s.d.Log.Warn("read run record", "run_id", runID, "err", err)
		return false
	}
	rec, err := wire.Decode[wire.RunRecord](entry.Value())
	if err != nil || rec.State != wire.StateRunning || !rec.Committed {
		return false
	}
	w, err := s.log.Open(ctx, tenant, runID)
	if err != nil {
		if !errors.Is(err, events.ErrEnded) {
			s.d.Log.Warn("open run events", "run_id", runID, "err", err)
		}
		return false
	}
	we := wire.Errorf(wire.ProviderTransportError, "lease of runner %s expired: the runner stopped during the run", rec.Owner)
	st := wire.Status{State: wire.StateFailed, Pin: rec.Pin, Error: we, Attempt: rec.Attempt}
	if err := w.Terminal(ctx, st); err != nil {
		if !errors.Is(err, events.ErrFenced) {
			s.d.Log.Warn("publish terminal status", "run_id", runID, "err", err)
		}
		return false
	}
	rec.State, rec.Error, rec.Updated = wire.StateFailed, we, time.Now().UnixMilli()
	if b, err := wire.Marshal(&rec); err == nil {
		if _, err := s.runs.Update(ctx, key, b, entry.Revision()); err != nil {
			s.d.Log.Warn("record expiry", "run_id", runID, "err", err)
		}
	}
	s.d.Metrics.LeaseExpiries.Inc()
	adapterName := rec.Adapter
	if adapterName == "" {
		adapterName = "none"
	}
	s.d.Metrics.Runs.WithLabelValues(string(wire.StateFailed), adapterName).Inc()
	s.d.Log.Info("ended run after lease expiry", "run_id", runID, "tenant", tenant, "owner", rec.Owner)
	return true
}
