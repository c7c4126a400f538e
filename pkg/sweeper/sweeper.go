// Package sweeper ends runs no live runner will end: when a runner's
// lease expires it ends every run that runner held with output failed
// with ProviderTransportError (those without output come back to the
// pool), and its periodic reconcile does the same for a run whose
// runner's lease is gone while no sweeper watched, times out runs past
// their deadline that no runner holds (queued, or claimed by a runner that
// died before output) and repairs records whose writer ended the run but
// died before recording it.
// The reconcile reads only the runs that have not ended (those whose work
// is in the work stream, Store.Dispatched of pkg/runs), so its work does
// not grow with the runs that ended.
// It ends runs only through pkg/runs, fenced, so it never ends a run its
// runner ended first.
//
// With Config.Exports set it also expires trajectory exports
// (docs/contract.md §7) in two phases, on an interval and on request
// (ExportsSweep): it lists the expired export records (retention passed,
// consent withdrawn, or abandoned half way by an exporter), deletes their
// bytes, and only then deletes each record (pkg/exports).
//
// It also expires runs' artifacts (pkg/artifacts) the same way, always:
// retention passed, withdrawn, or abandoned half way by their writer. Each
// origin of expiring bytes (trajectories, artifacts) is an Origin, swept
// on its own interval: its sweep queries its own records and deletes
// bytes from its own byte store.
package sweeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("invalid sweeper config")

// Config configures a sweeper. The sweeper service reads it from its
// environment (AGENTMESH_SWEEPER_RECONCILE_EVERY, ...): the tags name the
// variables, and Validate's problems are reported under them
// (service.LoadConfig).
type Config struct {
	// ReconcileEvery is how often the runs not yet ended are scanned for
	// a running, committed run without a lease (an expiry that happened
	// while no sweeper was watching) and for a queued run past its
	// deadline (default 1m; also once at start).
	ReconcileEvery time.Duration `split_words:"true" desc:"how often all run records are scanned for running runs without a lease and queued runs past their deadline (default 1m)"`
	// Metadata is added to the sweeper's micro service info.
	Metadata map[string]string `ignored:"true"`
	// OrphanGrace is how long past its deadline a run claimed by a runner
	// and without output is left to that runner before the reconcile
	// times it out itself (default 30s: a live runner ends it at the
	// deadline, after its transport's teardown).
	OrphanGrace time.Duration `ignored:"true"`
	// Exports, when set, makes the sweeper expire trajectory exports.
	Exports *ExportsConfig `split_words:"true"`
	// ArtifactsEvery is how often runs' artifacts are swept (default 1m;
	// also once at start).
	ArtifactsEvery time.Duration `split_words:"true" desc:"how often runs' artifacts are swept (retention passed, withdrawn; default 1m); AGENTMESH_ARTIFACT_RETENTION sets the retention"`
	// ArtifactBytes is where the artifacts' bytes are deleted (nil: the
	// artifact store's).
	ArtifactBytes exports.Bytes `ignored:"true"`
	// ArtifactsAbandonAfter is how long an artifact record may stay
	// unstored before it is swept as abandoned (default
	// exports.DefaultAbandonAfter).
	ArtifactsAbandonAfter time.Duration `ignored:"true"`
}

// Origin is one origin of expiring bytes and their records: trajectory
// exports (exports.Sweeper) or runs' artifacts (artifacts.Sweeper). Its
// Sweep lists its expired records, deletes their bytes from its byte
// store, and then deletes each record whose bytes are gone; a record whose
// bytes could not be deleted stays for the next sweep.
type Origin interface {
	Sweep(ctx context.Context) (exports.Result, error)
}

// origin is an Origin as the sweeper runs it: one sweep at a time.
type origin struct {
	name  string // "trajectories", "artifacts": in logs and errors
	tally string // its count of swept items in the micro stats
	every time.Duration
	mu    sync.Mutex
	o     Origin
}

// ExportsConfig configures the expiry of trajectory exports.
type ExportsConfig struct {
	// Store holds the trajectories' bytes (pkg/exporter/trajstore).
	Store exports.Bytes `ignored:"true"`
	// Every is how often the exports are swept (default 1m; also once at
	// start).
	Every time.Duration `split_words:"true" desc:"how often the trajectory exports are swept (retention passed, consent withdrawn; default 1m); AGENT_ARTIFACT_ROOT and AGENT_TRAJECTORY_* apply"`
	// AbandonAfter is how long an export record may stay unstored before
	// it is swept as abandoned (default exports.DefaultAbandonAfter).
	AbandonAfter time.Duration `ignored:"true"`
}

// setDefaults fills in the defaults, on a copy of Exports.
func (c *Config) setDefaults() {
	if c.ReconcileEvery == 0 {
		c.ReconcileEvery = time.Minute
	}
	if c.OrphanGrace == 0 {
		c.OrphanGrace = 30 * time.Second
	}
	if c.ArtifactsEvery == 0 {
		c.ArtifactsEvery = time.Minute
	}
	if c.Exports != nil {
		x := *c.Exports
		if x.Every == 0 {
			x.Every = time.Minute
		}
		c.Exports = &x
	}
}

// Validate reports every field that is invalid once the defaults are
// filled in, each a *service.FieldError wrapping ErrInvalidConfig. The
// exports' Store is New's to check: a service sets it after reading the
// rest from its environment.
func (c Config) Validate() error {
	c.setDefaults()
	bad := service.FieldErrors{Sentinel: ErrInvalidConfig}
	if c.ReconcileEvery < time.Second {
		bad.Add("ReconcileEvery", "must be at least 1s, got %s", c.ReconcileEvery)
	}
	if c.OrphanGrace < 0 {
		bad.Add("OrphanGrace", "must be >= 0, got %s", c.OrphanGrace)
	}
	if c.ArtifactsEvery < time.Second {
		bad.Add("ArtifactsEvery", "must be at least 1s, got %s", c.ArtifactsEvery)
	}
	if c.ArtifactsAbandonAfter < 0 {
		bad.Add("ArtifactsAbandonAfter", "must be >= 0, got %s", c.ArtifactsAbandonAfter)
	}
	if x := c.Exports; x != nil {
		if x.Every < time.Second {
			bad.Add("Every", "must be at least 1s, got %s", x.Every)
		}
		if x.AbandonAfter < 0 {
			bad.Add("AbandonAfter", "must be >= 0, got %s", x.AbandonAfter)
		}
	}
	return bad.Err()
}

// Sweeper watches leases.
type Sweeper struct {
	d        service.Deps
	cfg      Config
	store    *runs.Store
	leaseTTL time.Duration

	mu   sync.Mutex
	seen map[string]time.Time // lease key (<tenant>.<run_id>) → last heartbeat seen

	exports   *origin // trajectory exports; nil without Config.Exports
	artifacts *origin // runs' artifacts

	tally service.Tally // the counts of its micro stats
}

// New binds a sweeper to the topology, which must exist. While JetStream
// is not ready (a cluster forming or recovering) it waits, logging that
// (jsretry.Await), until ctx ends.
func New(ctx context.Context, d service.Deps, cfg Config) (*Sweeper, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Exports != nil && cfg.Exports.Store == nil {
		return nil, fmt.Errorf("%w: exports need a store", ErrInvalidConfig)
	}
	s, err := jsretry.Await(ctx, d.NC, d.Log, "sweeper", func(ctx context.Context) (*Sweeper, error) {
		return bind(ctx, d, cfg)
	})
	if err != nil {
		return nil, err
	}
	s.registerMetrics()
	return s, nil
}

// bind is one attempt of New.
func bind(ctx context.Context, d service.Deps, cfg Config) (*Sweeper, error) {
	s := &Sweeper{d: d, cfg: cfg, seen: map[string]time.Time{}}
	var err error
	if s.store, err = runs.Open(ctx, d); err != nil {
		return nil, err
	}
	s.leaseTTL = s.store.LeaseTTL()
	if x := cfg.Exports; x != nil {
		records, err := exports.Open(ctx, d.JS, d.Names)
		if err != nil {
			return nil, err
		}
		grants, err := consent.Open(ctx, d.JS, d.Names)
		if err != nil {
			return nil, err
		}
		s.exports = &origin{name: "trajectories", tally: tallySwept, every: x.Every,
			o: &exports.Sweeper{Records: records, Consent: grants, Store: x.Store, Metrics: d.Metrics, AbandonAfter: x.AbandonAfter}}
	}
	store, err := artifacts.Open(ctx, d.JS, d.Names)
	if err != nil {
		return nil, err
	}
	s.artifacts = &origin{name: "artifacts", tally: tallyArtifactsSwept, every: cfg.ArtifactsEvery,
		o: &artifacts.Sweeper{Store: store, Bytes: cfg.ArtifactBytes, AbandonAfter: cfg.ArtifactsAbandonAfter}}
	return s, nil
}

// SweepExports runs one sweep of the trajectory exports now, after any
// sweep of them in progress, and returns its counts.
func (s *Sweeper) SweepExports(ctx context.Context) (exports.Result, error) {
	if s.exports == nil {
		return exports.Result{}, errors.New("this sweeper does not expire exports (trajectory export is disabled)")
	}
	return s.sweep(ctx, s.exports)
}

// SweepArtifacts runs one sweep of runs' artifacts now, after any sweep of
// them in progress, and returns its counts.
func (s *Sweeper) SweepArtifacts(ctx context.Context) (exports.Result, error) {
	return s.sweep(ctx, s.artifacts)
}

func (s *Sweeper) sweep(ctx context.Context, o *origin) (exports.Result, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	res, err := o.o.Sweep(ctx)
	s.tally.Add(o.tally, uint64(res.Swept))
	if err == nil && res.Swept > 0 {
		s.d.Log.Info(o.name+" swept", "swept", res.Swept, "pending", res.Pending, "kept", res.Kept)
	}
	return res, err
}

// sweepEvery sweeps o at start and then every interval until ctx ends.
func (s *Sweeper) sweepEvery(ctx context.Context, o *origin) {
	t := time.NewTicker(o.every)
	defer t.Stop()
	for {
		if res, err := s.sweep(ctx, o); err != nil && ctx.Err() == nil {
			s.d.Log.Warn(o.name+" sweep", "failed", res.Failed, "pending", res.Pending, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Run sweeps until ctx ends and returns once its goroutines have.
func (s *Sweeper) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	svc, err := service.RegisterCounting(s.d.NC, "agentmesh-sweeper", "ends runs whose lease expired",
		service.Metadata(s.cfg.Metadata, "lease_ttl", s.leaseTTL.String()), &s.tally,
		service.Endpoint{Name: "reconcile", Subject: s.d.Names.SweeperReconcile(), Handler: micro.HandlerFunc(func(req micro.Request) {
			res, err := s.Reconcile(ctx)
			if err != nil {
				_ = req.Error("500", err.Error(), nil)
				return
			}
			_ = req.Respond(fmt.Appendf(nil, "%d", res.Ended), micro.WithHeaders(micro.Headers(wire.TextContentType.Header())))
		})},
		service.Endpoint{Name: "exports-sweep", Subject: s.d.Names.ExportsSweep(), QueueGroup: "agentmesh-sweepers", Handler: micro.HandlerFunc(func(req micro.Request) {
			if s.exports == nil {
				_ = req.Error("503", "this sweeper does not expire exports (trajectory export is disabled)", nil)
				return
			}
			// Answered from its own goroutine: ReplyLater, never req.Error,
			// which would write micro's stats as the handler returns.
			wg.Go(func() {
				res, err := s.SweepExports(ctx)
				b, merr := json.Marshal(SweepReply{Result: res, Error: errString(err)})
				if merr != nil {
					_ = service.ReplyLater(req, wire.ContentType{}, nil, wire.Errorf(wire.AgenticHandlerError, "encode sweep reply: %v", merr))
					return
				}
				var werr *wire.Error
				if err != nil { // the counts so far stay in the body
					werr = wire.Errorf(wire.ProviderTransportError, "sweep exports: %v", err).Retry()
				}
				_ = service.ReplyLater(req, wire.JSONContentType, b, werr)
			})
		})})
	if err != nil {
		return err
	}
	for _, o := range []*origin{s.exports, s.artifacts} {
		if o != nil {
			wg.Go(func() { s.sweepEvery(ctx, o) })
		}
	}
	defer func() { _ = svc.Stop() }()
	watcher, err := jsretry.Await(ctx, s.d.NC, s.d.Log, "sweeper's watch of the leases", s.store.WatchLeases)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: nothing to report
		}
		return fmt.Errorf("watch leases: %w", err)
	}
	defer func() { _ = watcher.Stop() }()
	updates := watcher.Updates()
	s.d.Health.Add("sweeper", service.ConnCheck(s.d.NC))
	if _, err := s.Reconcile(ctx); err != nil && ctx.Err() == nil {
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
			if _, err := s.Reconcile(ctx); err != nil && ctx.Err() == nil {
				s.d.Log.Warn("reconcile", "err", err)
			}
		}
	}
}

// SweepReply answers an ExportsSweep request, in JSON, once the sweep
// has finished: its counts, and what failed (an empty Error if nothing).
type SweepReply struct {
	exports.Result
	Error string `json:"error,omitempty"`
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// rewatch opens a new watch on the leases bucket, retrying every second
// until it works or ctx ends.
func (s *Sweeper) rewatch(ctx context.Context) (jetstream.KeyWatcher, error) {
	for {
		w, err := s.store.WatchLeases(ctx)
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
		held, err := s.store.LeaseHeld(ctx, key)
		if err == nil && !held {
			s.mu.Lock()
			delete(s.seen, key)
			s.mu.Unlock()
			s.expireKey(ctx, key)
		}
	}
}

// Reconciled counts what one Reconcile did.
type Reconciled struct {
	// Ended is how many runs it ended.
	Ended int
	// Listed is how many work items the listing of the work stream
	// returned (runs.Store.Dispatched): the runs dispatched and not ended,
	// and the work of runs cancelled while queued that no runner took yet.
	Listed int
	// Read is how many run records it read: one per work item listed.
	Read int
}

// Reconcile scans the runs that have not ended, as the work stream lists
// them, never the records of runs that ended. It fails running,
// committed runs that have no lease; times out runs past their deadline
// that no runner holds (queued ones at once, ones claimed without output
// once the claiming runner had OrphanGrace to end them); and repairs a
// record whose run's events already end.
func (s *Sweeper) Reconcile(ctx context.Context) (Reconciled, error) {
	var res Reconciled
	keys, err := s.store.Dispatched(ctx)
	if err != nil {
		return res, err
	}
	res.Listed = len(keys)
	for _, key := range keys {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		run, err := s.store.GetKey(ctx, key)
		res.Read++
		if err == nil && !run.Record.State.Terminal() && s.reconcile(ctx, run) {
			res.Ended++
		}
	}
	return res, nil
}

// reconcile acts on one run for Reconcile and reports whether it ended
// it. A run's record is written when it is created and when it ends; in
// between its tail (its last event and who wrote it) says where it is.
func (s *Sweeper) reconcile(ctx context.Context, run runs.Run) bool {
	rec := run.Record
	if rec.State.Terminal() {
		return false
	}
	t, err := s.store.Events().Tail(ctx, rec.Tenant, rec.RunID)
	if err != nil {
		s.d.Log.Warn("read the events of a run", "run_id", rec.RunID, "tenant", rec.Tenant, "err", err)
		return false
	}
	if t.Ended() {
		// Its writer ended the run and stopped before recording it.
		if _, err := s.store.Ended(ctx, rec.Tenant, rec.RunID); err != nil {
			s.d.Log.Warn("repair run record", "run_id", rec.RunID, "tenant", rec.Tenant, "err", err)
		}
		return false
	}
	now := time.Now()
	pastDeadline := rec.Deadline > 0 && now.UnixMilli() > rec.Deadline
	if t.Runner == "" {
		if t.Event.Seq >= 2 && pastDeadline {
			return s.timeOut(ctx, rec, "while queued", func(_ wire.RunRecord, t events.Tail) bool { return t.Runner == "" })
		}
		return false
	}
	held, err := s.store.RunnerHeld(ctx, t.Runner, t.Epoch)
	switch {
	case err != nil || held:
		return false
	case t.HasOutput():
		return s.expire(ctx, rec.Tenant, rec.RunID, t)
	case pastDeadline && now.Sub(time.UnixMilli(rec.Deadline)) > s.cfg.OrphanGrace:
		// Its runner would have ended it at the deadline: it died before
		// output and no delivery of its work came to another runner.
		owner, epoch, attempt := t.Runner, t.Epoch, t.Attempt
		return s.timeOut(ctx, rec, "after its runner stopped", func(_ wire.RunRecord, t events.Tail) bool {
			return t.Runner == owner && t.Epoch == epoch && t.Attempt == attempt && !t.HasOutput()
		})
	}
	return false
}

// timeOut ends a run past its deadline that no runner holds, if cond
// still holds of it.
func (s *Sweeper) timeOut(ctx context.Context, rec wire.RunRecord, where string, cond func(wire.RunRecord, events.Tail) bool) bool {
	done, err := s.store.EndUnowned(ctx, rec.Tenant, rec.RunID, cond, func(r wire.RunRecord) wire.Status {
		return wire.Status{State: wire.StateTimedOut, Profile: r.Profile, Pin: r.Pin, Attempt: r.Attempt,
			Error: wire.Errorf(wire.DeadlineExceeded, "run %s passed its deadline %s", r.RunID, where)}
	})
	if err != nil {
		s.d.Log.Warn("time out run", "run_id", rec.RunID, "tenant", rec.Tenant, "err", err)
	}
	if done {
		s.tally.Add(tallyTimedOut, 1)
	}
	return done
}

// expireKey acts on the expiry of the lease under key: a runner's
// (runs.RunnerLeaseKey). Every run not ended whose events name that
// runner and that have output are ended failed (expire); those without
// output are left to the next delivery of their work.
func (s *Sweeper) expireKey(ctx context.Context, key string) {
	id, ok := strings.CutPrefix(key, runs.RunnerLeaseKey(""))
	if !ok || id == "" {
		s.d.Log.Warn("lease key is not a runner's", "key", key)
		return
	}
	keys, err := s.store.Dispatched(ctx)
	if err != nil {
		s.d.Log.Warn("list the runs of an expired runner lease", "runner", id, "err", err)
		return
	}
	for _, k := range keys {
		tenant, runID, err := subject.SplitRunKey(k)
		if err != nil {
			continue
		}
		t, err := s.store.Events().Tail(ctx, tenant, runID)
		if err != nil || t.Runner != id || t.Ended() || !t.HasOutput() {
			continue
		}
		s.expire(ctx, tenant, runID, t)
	}
}

// expire ends a run whose runner is gone, if it has published output
// (runs.Store.EndOrphaned): fenced, so a runner that ended the run first
// wins. One without output is left to the next delivery of its work. A
// session whose tail t is a session chunk (between turns, or asking
// permission) ends with SessionLost, as its runner ends one it finds
// orphaned; one lost mid-turn with ProviderTransportError.
func (s *Sweeper) expire(ctx context.Context, tenant, runID string, t events.Tail) bool {
	var owner string
	done, err := s.store.EndOrphaned(ctx, tenant, runID, func(rec wire.RunRecord) wire.Status {
		owner = rec.Owner
		we := wire.Errorf(wire.ProviderTransportError, "lease of runner %s expired: the runner stopped during the run", rec.Owner)
		if inSession(t.Event) {
			we = wire.Errorf(wire.SessionLost, "lease of runner %s expired: the runner of session %s stopped; a run on its conversation resumes it through session/load where the agent supports it", rec.Owner, rec.RunID)
		}
		return wire.Status{State: wire.StateFailed, Profile: rec.Profile, Pin: rec.Pin, Attempt: rec.Attempt, Error: we}
	})
	if err != nil {
		s.d.Log.Warn("end run after lease expiry", "run_id", runID, "tenant", tenant, "err", err)
		return false
	}
	if done {
		s.d.Metrics.LeaseExpiries.Inc()
		s.tally.Add(tallyExpired, 1)
		s.d.Log.Info("ended run after lease expiry", "run_id", runID, "tenant", tenant, "owner", owner)
	}
	return done
}

// inSession says ev holds a chunk only a session writes: a follow-up's
// input, a turn's end, or a permission request or its answer.
func inSession(ev wire.Event) bool {
	for e := range ev.Expand() {
		if e.Kind != wire.KindChunk {
			continue
		}
		switch e.Chunk.Type {
		case wire.ChunkInput, wire.ChunkTurnEnd, wire.ChunkPermissionRequested, wire.ChunkPermissionResolved:
			return true
		}
	}
	return false
}
