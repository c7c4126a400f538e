// Package runner is the runner host both runner services use: it pulls work
// for its adapters through the pool's shared durable consumers, admits at
// most max_active runs per adapter and per profile per process, and drives each run through
// its adapter with a deadline, cancellation, a lease heartbeat, retry before
// first output and never after it, the work acked only once the run's end
// is recorded, a gapless per-run seq and exactly one fenced terminal status
// (docs/contract.md §4.5, §4.6).
package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
)

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("invalid runner config")

// Config configures a runner host. A runner service reads it from its
// environment (AGENTMESH_RUNNER_ID, ...): the tags name the variables, and
// Validate's problems are reported under them (service.LoadConfig).
type Config struct {
	// ID names this runner process in run records and on its cancel subject
	// (default: a random id).
	ID string `split_words:"true" desc:"runner id in run records and on its cancel subject (default: random)"`
	// MaxActive is the number of runs of one adapter this process executes
	// at once, by adapter name, over all its profiles (default
	// DefaultMaxActive).
	MaxActive map[string]int `split_words:"true" desc:"runs executed at once per adapter, over all its profiles, as adapter:n,... (default: the sum of its profiles' policy.max_active; each profile is held to its own too)"`
	// DefaultMaxActive applies to adapters not in MaxActive (default 1, the
	// record's in-process default).
	DefaultMaxActive int `split_words:"true" desc:"runs executed at once by an adapter not in RUNNER_MAX_ACTIVE (default 1)"`
	// ProfileMaxActive is the number of runs of one profile this process
	// executes at once, by profile name (its policy.max_active), within
	// its adapter's MaxActive; a profile not in it has only its adapter's
	// bound. Work of a profile at its bound is handed back to the pool
	// (ProfileBusyRetry).
	ProfileMaxActive map[string]int `ignored:"true"`
	// AckWait is the work consumers' ack wait; until it is settled (at the
	// first output, or the terminal status) a run's work is kept in
	// progress every AckWait/3 (default 30s). It must be above the hosted
	// adapters' teardown (adapter.Teardown).
	AckWait time.Duration `split_words:"true" desc:"ack wait of the work consumers (default 30s)"`
	// RetryBackoff is the first step of the exponential backoff before a
	// retryable attempt is redelivered, doubled at each attempt up to 30s,
	// with jitter (backoff; default 250ms).
	RetryBackoff time.Duration `ignored:"true"`
	// DrainTimeout is how long Run waits, once its context ends, for runs in
	// hand to finish before cancelling them (default 10s).
	DrainTimeout time.Duration `split_words:"true" desc:"how long runs in hand may finish at shutdown (default 10s)"`
	// Metadata is added to the runner's micro service info (the profiles'
	// registry_version, for one).
	Metadata map[string]string `ignored:"true"`
	// Unsandboxed says the operator turned the sandbox off: the statuses
	// of every run of a subprocess adapter say so (wire.SandboxOff), to a
	// follower of contract v2 or later.
	Unsandboxed bool `ignored:"true"`
	// WorkspaceRoot is the CLI adapters' workspace root (cli.Config's):
	// a subprocess run whose work names a workspace source, or continues a
	// conversation that has a head, runs in a fresh directory under its
	// RunsDir, which its runtime workspace names (default ".").
	WorkspaceRoot string `ignored:"true"`
	// GitAllow are the remotes a run's git source may name, URL prefixes
	// (workspace.Materializer.GitAllow; none: every git source is
	// refused).
	GitAllow []string `split_words:"true" desc:"URL prefixes a run's git workspace source may name, as a,b,... (end one with / to keep it a directory; default: none, every git source is refused)"`
	// WorkspaceMaxBytes bounds a run's source tree, a git one's or a
	// snapshot's; PatchMaxBytes its patch, read and written, and
	// ArchiveMaxBytes its archive of changed files (defaults
	// DefaultWorkspaceMaxBytes, DefaultPatchMaxBytes,
	// DefaultArchiveMaxBytes).
	WorkspaceMaxBytes int64 `split_words:"true" desc:"size limit in bytes of a run's workspace source tree, git or snapshot (default 1 GiB)"`
	PatchMaxBytes     int64 `split_words:"true" desc:"size limit in bytes of a run's workspace patch, read and written (default 64 MiB)"`
	ArchiveMaxBytes   int64 `split_words:"true" desc:"size limit in bytes of a run's archive of changed files (default 256 MiB)"`
}

// Workspace limits' defaults.
const (
	DefaultWorkspaceMaxBytes = 1 << 30
	DefaultPatchMaxBytes     = 64 << 20
	DefaultArchiveMaxBytes   = 256 << 20
)

// RunsDir is the directory under the workspace root that holds the runs'
// fresh workspaces.
const RunsDir = ".agentmesh-runs"

func (c *Config) setDefaults() {
	if c.ID == "" {
		c.ID = nuid.Next()
	}
	if c.DefaultMaxActive == 0 {
		c.DefaultMaxActive = 1
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = 250 * time.Millisecond
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.WorkspaceRoot == "" {
		c.WorkspaceRoot = "."
	}
	if c.WorkspaceMaxBytes == 0 {
		c.WorkspaceMaxBytes = DefaultWorkspaceMaxBytes
	}
	if c.PatchMaxBytes == 0 {
		c.PatchMaxBytes = DefaultPatchMaxBytes
	}
	if c.ArchiveMaxBytes == 0 {
		c.ArchiveMaxBytes = DefaultArchiveMaxBytes
	}
}

// Validate reports every field that is invalid once the defaults are
// filled in, each a *service.FieldError wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	c.setDefaults()
	bad := service.FieldErrors{Sentinel: ErrInvalidConfig}
	if c.DefaultMaxActive < 1 {
		bad.Add("DefaultMaxActive", "must be > 0, got %d", c.DefaultMaxActive)
	}
	for _, a := range slices.Sorted(maps.Keys(c.MaxActive)) {
		if n := c.MaxActive[a]; n < 1 {
			bad.Add("MaxActive", "%s must be > 0, got %d", a, n)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(c.ProfileMaxActive)) {
		if n := c.ProfileMaxActive[p]; n < 1 {
			bad.Add("ProfileMaxActive", "%s must be > 0, got %d", p, n)
		}
	}
	if c.AckWait < time.Second {
		bad.Add("AckWait", "must be at least 1s, got %s", c.AckWait)
	}
	if c.RetryBackoff < 0 {
		bad.Add("RetryBackoff", "must be > 0, got %s", c.RetryBackoff)
	}
	if c.DrainTimeout < 0 {
		bad.Add("DrainTimeout", "must be > 0, got %s", c.DrainTimeout)
	}
	for _, l := range []struct {
		field string
		n     int64
	}{{"WorkspaceMaxBytes", c.WorkspaceMaxBytes}, {"PatchMaxBytes", c.PatchMaxBytes}, {"ArchiveMaxBytes", c.ArchiveMaxBytes}} {
		if l.n < 0 {
			bad.Add(l.field, "must be > 0, got %d", l.n)
		}
	}
	if err := subject.ValidToken("runner id", c.ID); err != nil {
		bad.Add("ID", "%v", err)
	}
	return bad.Err()
}

// Host executes work for a set of adapters.
type Host struct {
	d           service.Deps
	cfg         Config
	adapters    *adapter.Registry
	store       *runs.Store
	sessions    jetstream.KeyValue
	checkpoints jetstream.KeyValue
	cons        map[string]jetstream.Consumer
	workspaces  *Workspaces

	mu      sync.Mutex
	active  map[string]*run // by <tenant>.<run_id>: the delivery executing it
	profile map[string]int  // runs executing, by profile (ProfileMaxActive)
	lease   *runs.Lease     // this runner's lease; nil while it is taken anew

	tally service.Tally // the counts of its micro stats
}

// currentLease is the runner's lease to claim a run under, or nil while
// it is being taken anew (after it was lost).
func (h *Host) currentLease() *runs.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// holdsOther reports whether a delivery other than r executes the run
// under key on this runner.
func (h *Host) holdsOther(key string, r *run) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.active[key]
	return a != nil && a != r
}

// keepLease takes the runner's lease and keeps it until ctx ends, then
// deletes it. A lease lost (not renewed within two thirds of its TTL, or
// replaced) stops every run in hand without publishing (the sweeper ends
// the ones with output once it expires; the others come back to the
// pool) and is taken anew under a new epoch. ready is closed once the
// first lease is held.
func (h *Host) keepLease(ctx context.Context, ready chan<- struct{}) {
	for {
		var l *runs.Lease
		wait := jsretry.Waiting{Log: h.d.Log, Msg: "waiting for JetStream", Attrs: []any{"for", "the runner's lease"}}
		for l == nil {
			var err error
			if l, err = h.store.HoldRunner(ctx, h.cfg.ID); err != nil {
				if ctx.Err() != nil {
					return
				}
				wait.Note(err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
		}
		wait.Done()
		lost := make(chan error, 1)
		l.Keep(func(err error) { lost <- err })
		h.mu.Lock()
		h.lease = l
		h.mu.Unlock()
		if ready != nil {
			close(ready)
			ready = nil
		}
		select {
		case <-ctx.Done():
			h.store.Release(l)
			return
		case err := <-lost:
			h.mu.Lock()
			h.lease = nil
			held := make([]*run, 0, len(h.active))
			for _, r := range h.active {
				if r.lease == l {
					held = append(held, r)
				}
			}
			h.mu.Unlock()
			h.d.Log.Error("runner lease lost; abandoning the runs in hand", "runs", len(held), "err", err)
			for _, r := range held {
				r.stop(errLeaseLost)
			}
		}
	}
}

// New binds a host to the topology, which must exist, and ensures the
// durable consumer of each adapter's pool. While JetStream is not ready (a
// cluster forming or recovering) it waits, logging that (jsretry.Await),
// until ctx ends.
func New(ctx context.Context, d service.Deps, adapters *adapter.Registry, cfg Config) (*Host, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h, err := jsretry.Await(ctx, d.NC, d.Log, "runner", func(ctx context.Context) (*Host, error) {
		return bind(ctx, d, adapters, cfg)
	})
	if err != nil {
		return nil, err
	}
	h.registerMetrics()
	return h, nil
}

// bind is one attempt of New.
func bind(ctx context.Context, d service.Deps, adapters *adapter.Registry, cfg Config) (*Host, error) {
	h := &Host{d: d, cfg: cfg, adapters: adapters, cons: map[string]jetstream.Consumer{}, active: map[string]*run{}, profile: map[string]int{}}
	var err error
	if h.store, err = runs.Open(ctx, d); err != nil {
		return nil, err
	}
	if h.sessions, err = d.JS.KeyValue(ctx, d.Names.SessionsBucket()); err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", d.Names.SessionsBucket(), err)
	}
	if h.checkpoints, err = d.JS.KeyValue(ctx, d.Names.CheckpointsBucket()); err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", d.Names.CheckpointsBucket(), err)
	}
	if h.workspaces, err = openWorkspaces(ctx, d, cfg); err != nil {
		return nil, err
	}
	if err := checkTeardown(adapters, cfg.AckWait, h.store.LeaseTTL()); err != nil {
		return nil, err
	}
	for _, name := range adapters.Names() {
		a, _ := adapters.Get(name)
		c, err := d.JS.CreateOrUpdateConsumer(ctx, d.Names.WorkStream(), jetstream.ConsumerConfig{
			Durable:       d.Names.WorkConsumer(name),
			FilterSubject: d.Names.WorkAdapter(string(a.Capabilities().Transport), name),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       cfg.AckWait,
			MaxDeliver:    -1,
			MaxAckPending: -1,
		})
		if err != nil {
			return nil, fmt.Errorf("ensure consumer %s: %w", d.Names.WorkConsumer(name), err)
		}
		h.cons[name] = c
	}
	return h, nil
}

// checkTeardown refuses an ack wait or lease TTL that is not above the
// longest teardown of the hosted adapters (a CLI's kill grace plus its
// stderr drain): a run's work and lease are kept alive until its terminal
// status is published, and that includes the teardown.
func checkTeardown(adapters *adapter.Registry, ackWait, leaseTTL time.Duration) error {
	var bound time.Duration
	var slowest string
	for _, name := range adapters.Names() {
		a, _ := adapters.Get(name)
		if b := adapter.TeardownBound(a); b > bound {
			bound, slowest = b, name
		}
	}
	if bound == 0 {
		return nil
	}
	var errs []error
	if ackWait <= bound {
		errs = append(errs, fmt.Errorf("%w: AGENTMESH_RUNNER_ACK_WAIT %s must be above %s, adapter %s's teardown (kill grace, SIGKILL wait and stderr drain)", ErrInvalidConfig, ackWait, bound, slowest))
	}
	if leaseTTL <= bound {
		errs = append(errs, fmt.Errorf("%w: AGENTMESH_LEASE_TTL %s (the leases bucket's TTL) must be above %s, adapter %s's teardown (kill grace, SIGKILL wait and stderr drain)", ErrInvalidConfig, leaseTTL, bound, slowest))
	}
	return errors.Join(errs...)
}

// ID is the runner's id.
func (h *Host) ID() string { return h.cfg.ID }

func (h *Host) maxActive(name string) int {
	if n, ok := h.cfg.MaxActive[name]; ok {
		return n
	}
	return h.cfg.DefaultMaxActive
}

// ProfileBusyRetry is how long work of a profile at its bound on this
// runner (ProfileMaxActive) waits before it is delivered again, here or
// to another runner of the pool.
const ProfileBusyRetry = 250 * time.Millisecond

// takeProfile takes one of profile's slots, and reports false when all
// are taken. A profile without a bound has as many as its adapter.
func (h *Host) takeProfile(profile string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n, ok := h.cfg.ProfileMaxActive[profile]; ok && h.profile[profile] >= n {
		return false
	}
	h.profile[profile]++
	return true
}

// giveProfile gives back a slot takeProfile took.
func (h *Host) giveProfile(profile string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.profile[profile]--; h.profile[profile] <= 0 {
		delete(h.profile, profile)
	}
}

// Run executes work until ctx ends. It then stops taking work, lets runs in
// hand finish for up to DrainTimeout, cancels the rest (work without output
// goes back to the pool; a run with output ends failed) and returns once
// every goroutine it started has returned.
func (h *Host) Run(ctx context.Context) error {
	execCtx, stopExec := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopExec(nil)
	var wg sync.WaitGroup
	defer wg.Wait()

	svc, err := service.RegisterCounting(h.d.NC, "agentmesh-runner", "executes runs for its adapters", h.microMetadata(), &h.tally,
		service.Endpoint{Name: "cancel", Subject: h.d.Names.RunnerCancel(h.cfg.ID), Handler: h.cancelHandler(&wg)},
		service.Endpoint{Name: "input", Subject: h.d.Names.RunnerInput(h.cfg.ID), Handler: h.inputHandler()},
		service.Endpoint{Name: "permission", Subject: h.d.Names.RunnerPermission(h.cfg.ID), Handler: h.permissionHandler()})
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()

	// The lease outlives the runs in hand: it is released once they all
	// have returned.
	leaseCtx, stopLease := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLease()
	ready := make(chan struct{})
	wg.Go(func() { h.keepLease(leaseCtx, ready) })
	select {
	case <-ready:
	case <-ctx.Done():
		return nil
	}

	var workers sync.WaitGroup
	for _, name := range h.adapters.Names() {
		a, _ := h.adapters.Get(name)
		workers.Go(func() { h.pull(ctx, execCtx, a, &workers) })
	}
	h.d.Health.Add("runner-"+h.cfg.ID, service.ConnCheck(h.d.NC))
	<-ctx.Done()
	finished := make(chan struct{})
	go func() { workers.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(h.cfg.DrainTimeout):
		stopExec(errShutdown)
		<-finished
	}
	stopLease()
	return nil
}

// pull takes one adapter's work until ctx ends: one pull request at a
// time per adapter and process (the server bounds a consumer's waiting
// pulls), asking for as many items as the adapter has free slots of its
// max active, and executing each on its own goroutine (owned by workers)
// that frees its slot when done.
func (h *Host) pull(ctx, execCtx context.Context, a adapter.Adapter, workers *sync.WaitGroup) {
	name := a.Name()
	cons := h.cons[name]
	n := h.maxActive(name)
	slots := make(chan struct{}, n)
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		k := 1
	free:
		for k < n {
			select {
			case slots <- struct{}{}:
				k++
			default:
				break free
			}
		}
		batch, err := cons.Fetch(k, jetstream.FetchMaxWait(time.Second))
		got := 0
		if err == nil {
			for msg := range batch.Messages() {
				got++
				workers.Go(func() {
					defer func() { <-slots }()
					h.execute(execCtx, a, msg)
				})
			}
			err = batch.Error()
		}
		for range k - got {
			<-slots
		}
		if err == nil || idle(err) {
			h.d.Quorum.Report(nil)
		} else if ctx.Err() == nil {
			h.d.Quorum.Report(err) // no responders: the consumer's leader is out of reach
		}
		if err != nil && !idle(err) && ctx.Err() == nil {
			h.d.Log.Warn("fetch work", "adapter", name, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// cancelHandler answers the control responder's forwarded cancel for a run
// this process holds, once the run has ended.
func (h *Host) cancelHandler(wg *sync.WaitGroup) micro.HandlerFunc {
	return func(req micro.Request) {
		key := string(req.Data())
		_, runID, err := subject.SplitRunKey(key)
		reply := wire.CancelReply{V: wire.Version, RunID: runID}
		if err != nil {
			reply.Error = wire.Errorf(wire.AgenticRequestValidationError, "cancel: %v", err)
			respond(req, &reply, service.Reply)
			return
		}
		h.mu.Lock()
		r := h.active[key]
		h.mu.Unlock()
		if r == nil {
			reply.Error = wire.Errorf(wire.AgenticRequestValidationError, "runner %s does not hold run %s", h.cfg.ID, key)
			respond(req, &reply, service.Reply)
			return
		}
		wg.Go(func() {
			r.requestCancel()
			<-r.done
			reply.State = r.final
			switch r.final {
			case "":
				reply.Error = wire.Errorf(wire.AgenticRequestValidationError, "runner %s released run %s", h.cfg.ID, runID)
			case wire.StateCancelled:
				reply.Cancelled = true
			default:
				reply.Ended = true
			}
			respond(req, &reply, service.ReplyLater)
		})
	}
}

// respond answers req with reply through send: service.Reply before the
// handler returns, service.ReplyLater after.
func respond(req micro.Request, reply *wire.CancelReply, send func(micro.Request, wire.ContentType, []byte, *wire.Error) error) {
	b, err := wire.Marshal(reply)
	if err == nil {
		_ = send(req, wire.TypeCancelReply.ContentType(), b, reply.Error)
	}
}

// execute handles one delivery of work and settles it (run.go).
func (h *Host) execute(ctx context.Context, a adapter.Adapter, msg jetstream.Msg) {
	d := h.deliver(msg)
	defer d.release() // a path that settled nothing leaves the work to come back
	work, err := wire.Decode[wire.Work](msg.Data())
	if err != nil {
		h.undecodable(ctx, d, err)
		return
	}
	if !h.takeProfile(work.Profile) {
		// Its profile's slots here are all taken: the work goes back,
		// nothing of the run read or written, for this runner once a
		// slot is free or another runner of the pool.
		d.settle(settleRetry, ProfileBusyRetry)
		return
	}
	defer h.giveProfile(work.Profile)
	a, _ = h.adapters.ForWork(a.Name(), work.Profile) // the profile's own settings
	if md, err := msg.Metadata(); err == nil && md.NumDelivered > 1 {
		h.d.Metrics.Redeliveries.WithLabelValues(a.Name()).Inc()
	}
	r := &run{h: h, a: a, d: d, work: work, done: make(chan struct{})}
	defer h.inFlight(a.Name(), r)()
	key := subject.RunKey(work.Tenant, work.RunID)
	h.mu.Lock()
	if h.active[key] == nil {
		h.active[key] = r // (a second delivery of a run in hand is not)
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if h.active[key] == r {
			delete(h.active, key)
		}
		h.mu.Unlock()
		close(r.done)
	}()
	defer func() {
		// The adapter's own panics fail only their run (run.go); one here
		// is the runner's, and costs this delivery, not the process.
		if p := recover(); p != nil {
			h.d.Log.Error("panic while handling work; it will come back", append(r.logger(), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))...)
		}
	}()
	r.exec(ctx)
}

// undecodable ends the run a work item that cannot be decoded was for,
// found by its Nats-Msg-Id (<tenant>.<run_id>), failed: a run that can
// never run ends. Work that names no run is dropped.
func (h *Host) undecodable(ctx context.Context, d *delivery, decodeErr error) {
	h.d.Log.Error("undecodable work", "subject", d.msg.Subject(), "err", decodeErr)
	tenant, runID, err := subject.SplitWorkMsgID(d.msg.Headers().Get(jetstream.MsgIDHeader))
	if err != nil {
		h.d.Metrics.Dropped.WithLabelValues("runner", "decode").Inc()
		d.settle(settleTerm, 0)
		return
	}
	_, err = h.store.EndUnowned(ctx, tenant, runID, func(rec wire.RunRecord, _ events.Tail) bool { return !rec.Committed }, func(rec wire.RunRecord) wire.Status {
		return wire.Status{State: wire.StateFailed, Profile: rec.Profile, Pin: rec.Pin, Attempt: rec.Attempt,
			Error: wire.Errorf(wire.ProviderProtocolError, "the work item of run %s cannot be decoded: %v", runID, decodeErr)}
	})
	if err != nil && !errors.Is(err, runs.ErrNotFound) {
		h.d.Log.Warn("end run of undecodable work", "tenant", tenant, "run_id", runID, "err", err)
		d.settle(settleRetry, time.Second)
		return
	}
	d.settle(settleTerm, 0)
}

// idle reports whether a fetch error only means no work arrived in time.
func idle(err error) bool {
	return errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}
