// Package router consumes run requests from AGENTMESH_SUBMIT through the
// shared durable consumer, validates them, creates the run (pkg/runs),
// publishes accepted and then routed or rejected, and dispatches work to
// AGENTMESH_WORK on the tenant's own work subject. A submission that names
// its tenant and run id but cannot be decoded or validated ends rejected
// with its typed error on the run's events; only one naming no run at all
// is dropped. It also answers cancel requests (control.go) and, through
// pkg/router/consumerproxy, tenants' consumer creates on the events stream.
package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/ledger"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/router/consumerproxy"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/runs/convlog"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/service/telemetry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
)

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("invalid router config")

// Config configures a router. The router service reads it from its
// environment (AGENTMESH_ROUTER_WORKERS, ...): the tags name the variables,
// and Validate's problems are reported under them (service.LoadConfig).
type Config struct {
	// Workers is how many submissions one router handles at once (default 16).
	Workers int `split_words:"true" desc:"submissions handled at once (default 16)"`
	// AckWait is the submit consumer's ack wait (default 30s).
	AckWait time.Duration `split_words:"true" desc:"ack wait of the submit consumer (default 30s)"`
	// DefaultDeadline applies when a request has no deadline_ms (default 30m).
	DefaultDeadline time.Duration `split_words:"true" desc:"deadline of a request without deadline_ms (default 30m)"`
	// MaxDeadline caps deadline_ms (default 24h).
	MaxDeadline time.Duration `split_words:"true" desc:"cap on a request's deadline_ms (default 24h)"`
	// AdapterQueueMax bounds one adapter's queued work over all tenants
	// (default 1024, AGENTMESH_WORK_QUEUE_MAX); a tenant's own bound is the
	// work stream's (AGENTMESH_WORK_QUEUE_TENANT_MAX).
	AdapterQueueMax int64 `ignored:"true"`
	// ExportEnabled is the operator's AGENT_TRAJECTORY_EXPORT_ENABLED: when
	// set, each accepted run is stamped with its principal's consent (one
	// leader read of the consent bucket per submission); when not, every
	// run is stamped not consented without a read.
	ExportEnabled bool `ignored:"true"`
	// SpendCacheTTL is how long the router uses a budget, a quota and a
	// period's spend it read before reading them again (default 1s): a
	// term of the budgets' overshoot bound (docs/contract.md §12.3).
	SpendCacheTTL time.Duration `split_words:"true" desc:"how long a budget, quota or period's spend read is used (default 1s)"`
	// Clock is the time of the budgets' periods (default time.Now); a
	// test drives it.
	Clock func() time.Time `ignored:"true"`
}

func (c *Config) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 16
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.DefaultDeadline == 0 {
		c.DefaultDeadline = 30 * time.Minute
	}
	if c.MaxDeadline == 0 {
		c.MaxDeadline = 24 * time.Hour
	}
	if c.AdapterQueueMax == 0 {
		c.AdapterQueueMax = 1024
	}
	if c.SpendCacheTTL == 0 {
		c.SpendCacheTTL = time.Second
	}
}

// Validate reports every field that is invalid once the defaults are
// filled in, each a *service.FieldError wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	c.setDefaults()
	bad := service.FieldErrors{Sentinel: ErrInvalidConfig}
	if c.Workers < 1 {
		bad.Add("Workers", "must be > 0, got %d", c.Workers)
	}
	if c.AckWait < time.Second {
		bad.Add("AckWait", "must be at least 1s, got %s", c.AckWait)
	}
	if c.AdapterQueueMax < 1 {
		bad.Add("AdapterQueueMax", "must be > 0, got %d", c.AdapterQueueMax)
	}
	if c.SpendCacheTTL < time.Millisecond {
		bad.Add("SpendCacheTTL", "must be at least 1ms, got %s", c.SpendCacheTTL)
	}
	if c.MaxDeadline < 0 {
		bad.Add("MaxDeadline", "must be > 0, got %s", c.MaxDeadline)
	}
	if c.DefaultDeadline < 0 || c.DefaultDeadline > c.MaxDeadline {
		bad.Add("DefaultDeadline", "must be in (0, max deadline %s], got %s", c.MaxDeadline, c.DefaultDeadline)
	}
	return bad.Err()
}

// Router routes submissions. Build it with New and run it with Run.
type Router struct {
	d           service.Deps
	cfg         Config
	profiles    *profile.Registry
	adapters    *adapter.Registry
	store       *runs.Store
	sessions    jetstream.KeyValue
	checkpoints jetstream.KeyValue
	convs       jetstream.KeyValue // each conversation's runs (pkg/runs/convlog)
	consent     *consent.Store     // nil unless export is enabled
	submit      jetstream.Consumer
	work        jetstream.Stream
	depth       depthCache
	gate        *ledger.Gate   // budgets and quotas
	ledger      *ledger.Writer // feeds ended runs into the spend ledger
	tally       service.Tally  // the counts of its micro stats
}

// New binds a router to the topology, which must exist. While JetStream
// is not ready (a cluster forming or recovering) it waits, logging that
// (jsretry.Await), until ctx ends.
func New(ctx context.Context, d service.Deps, profiles *profile.Registry, adapters *adapter.Registry, cfg Config) (*Router, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r, err := jsretry.Await(ctx, d.NC, d.Log, "router", func(ctx context.Context) (*Router, error) {
		return bind(ctx, d, profiles, adapters, cfg)
	})
	if err != nil {
		return nil, err
	}
	r.registerMetrics()
	return r, nil
}

// bind is one attempt of New.
func bind(ctx context.Context, d service.Deps, profiles *profile.Registry, adapters *adapter.Registry, cfg Config) (*Router, error) {
	store, err := runs.Open(ctx, d)
	if err != nil {
		return nil, err
	}
	sessions, err := d.JS.KeyValue(ctx, d.Names.SessionsBucket())
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", d.Names.SessionsBucket(), err)
	}
	checkpoints, err := d.JS.KeyValue(ctx, d.Names.CheckpointsBucket())
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", d.Names.CheckpointsBucket(), err)
	}
	convs, err := d.JS.KeyValue(ctx, d.Names.ConversationsBucket())
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", d.Names.ConversationsBucket(), err)
	}
	work, err := d.JS.Stream(ctx, d.Names.WorkStream())
	if err != nil {
		return nil, fmt.Errorf("open stream %s: %w", d.Names.WorkStream(), err)
	}
	var grants *consent.Store
	if cfg.ExportEnabled {
		if grants, err = consent.Open(ctx, d.JS, d.Names); err != nil {
			return nil, err
		}
	}
	cons, err := d.JS.CreateOrUpdateConsumer(ctx, d.Names.SubmitStream(), jetstream.ConsumerConfig{
		Durable:       d.Names.RouterConsumer(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: 4 * cfg.Workers,
		MaxDeliver:    -1,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s: %w", d.Names.RouterConsumer(), err)
	}
	spend, err := ledger.Open(ctx, d.JS, d.Names)
	if err != nil {
		return nil, err
	}
	gate := ledger.NewGate(spend, ledger.GateConfig{CacheTTL: cfg.SpendCacheTTL, Clock: cfg.Clock, Ended: func(ctx context.Context, tenant, runID string) (bool, error) {
		run, err := store.Get(ctx, tenant, runID)
		if errors.Is(err, runs.ErrNotFound) {
			return true, nil
		}
		return err == nil && run.Record.State.Terminal(), err
	}})
	r := &Router{d: d, cfg: cfg, profiles: profiles, adapters: adapters, store: store, sessions: sessions, checkpoints: checkpoints, convs: convs,
		consent: grants, submit: cons, work: work, depth: depthCache{at: map[string]time.Time{}, n: map[string]uint64{}},
		gate: gate, ledger: ledger.NewWriter(spend, store, d.Names.LedgerConsumer(), ledger.WriterConfig{AckWait: cfg.AckWait}, d.Log)}
	return r, nil
}

// Run routes submissions until ctx ends, then finishes the ones in hand and
// returns. It also serves cancel requests and the consumer-create proxy,
// and feeds ended runs into the spend ledger (a failure of that ends Run
// with its error).
func (r *Router) Run(ctx context.Context) (err error) {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, stop := context.WithCancelCause(ctx)
	defer func() {
		if cause := context.Cause(ctx); err == nil && cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
	}()
	defer stop(nil)
	wg.Go(func() {
		if err := r.ledger.Run(ctx); err != nil {
			stop(fmt.Errorf("spend ledger: %w", err))
		}
	})
	proxy, err := consumerproxy.New(r.d.NC, r.d.Names, r.d.Log, consumerproxy.Config{})
	if err != nil {
		return err
	}
	depth := newQueueDepth(r)
	r.d.Metrics.Register(depth)
	defer r.d.Metrics.Unregister(depth)
	svc, err := service.RegisterCounting(r.d.NC, "agentmesh-router", "routes run requests and answers cancel, sessions' input and permission answers, and tenants' consumer create requests",
		map[string]string{"registry_version": r.profiles.Version()}, &r.tally,
		service.Endpoint{Name: "cancel", Subject: r.d.Names.CancelAll(), QueueGroup: "agentmesh-control", Handler: r.cancelHandler(ctx, &wg)},
		service.Endpoint{Name: "input", Subject: r.d.Names.InputAll(), QueueGroup: "agentmesh-control", Handler: r.sessionHandler(ctx, &wg, inputRequest)},
		service.Endpoint{Name: "permission", Subject: r.d.Names.PermissionAll(), QueueGroup: "agentmesh-control", Handler: r.sessionHandler(ctx, &wg, permissionRequest)},
		service.Endpoint{Name: "consumer-create", Subject: proxy.Subject(), QueueGroup: "agentmesh-consumers", Handler: proxy.Handler(ctx, &wg)})
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	r.d.Health.Add("router", service.ConnCheck(r.d.NC))
	return service.Consume(ctx, r.submit, r.d.Names.RouterConsumer(), r.cfg.Workers, r.d.Log, r.handle)
}

// errDrop marks a submission that cannot be addressed (no tenant or run
// id to reject it on): it is terminated with a log line and a metric.
var errDrop = errors.New("unaddressable submission")

// dropError is an errDrop with the reason for the metric.
type dropError struct {
	reason string
	err    error
}

func (e *dropError) Error() string   { return fmt.Sprintf("%s: %v", e.reason, e.err) }
func (e *dropError) Unwrap() []error { return []error{errDrop, e.err} }

// handle routes one submission and settles it, in the run's span (the
// child of the client's, whose trace context the submission carries).
func (r *Router) handle(ctx context.Context, msg jetstream.Msg) {
	var err error
	ctx, endSpan := r.d.Tracing.StartRun(ctx, msg.Headers())
	defer func() { endSpan(err) }()
	func() {
		defer func() {
			if p := recover(); p != nil {
				r.d.Log.Error("panic while routing; submission will be retried", "subject", msg.Subject(), "panic", p, "stack", string(debug.Stack()))
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		err = r.route(ctx, msg)
	}()
	r.settle(msg, err)
	r.tally.Add(tallySubmissions, 1)
}

// settle is the one place a submission is settled: nil acks it, an
// unaddressable one is terminated, and anything else (an infrastructure
// failure) is redelivered after a second.
func (r *Router) settle(msg jetstream.Msg, err error) {
	var de *dropError
	switch {
	case err == nil:
		_ = msg.Ack()
	case errors.As(err, &de):
		r.d.Metrics.Dropped.WithLabelValues("router", de.reason).Inc()
		r.d.Log.Warn("dropping submission", "subject", msg.Subject(), "reason", de.reason, "err", de.err)
		_ = msg.Term()
	default:
		r.d.Log.Warn("submission will be retried", "subject", msg.Subject(), "err", err)
		_ = msg.NakWithDelay(time.Second)
	}
}

// address finds the tenant and run id a submission is about: the tenant
// from its subject, the run id from its Nats-Msg-Id (<tenant>.<run_id>,
// or the bare run id of a v1 request that names the same run).
// An id in another form that still names a run gives that run with the
// problem to reject it with; none at all is a dropError.
func address(msg jetstream.Msg, body *wire.RunRequest) (tenant, runID string, problem *wire.Error, err error) {
	tenant = msg.Subject()[strings.LastIndexByte(msg.Subject(), '.')+1:]
	if err := subject.ValidToken("tenant", tenant); err != nil {
		return "", "", nil, &dropError{"tenant", err}
	}
	id := msg.Headers().Get(jetstream.MsgIDHeader)
	t, rid, splitErr := subject.SplitRunKey(id)
	switch {
	case splitErr == nil && t == tenant:
		return tenant, rid, nil, nil
	case splitErr == nil:
		return tenant, rid, wire.Errorf(wire.AgenticRequestValidationError, "Nats-Msg-Id %q names tenant %q; the subject's tenant is %q", id, t, tenant), nil
	case subject.ValidToken("run_id", id) == nil && body != nil && body.V == wire.Version && body.RunID == id:
		// Contract v1 has the bare run id as a submission's Nats-Msg-Id:
		// a v1 submitter is taken at its word (docs/contract.md §3.9).
		return tenant, id, nil, nil
	case subject.ValidToken("run_id", id) == nil:
		return tenant, id, wire.Errorf(wire.AgenticRequestValidationError, "Nats-Msg-Id must be <tenant>.<run_id> (%s.%s), got the bare run id %q", tenant, id, id), nil
	case id == "" && body != nil && subject.ValidToken("run_id", body.RunID) == nil:
		return tenant, body.RunID, wire.Errorf(wire.AgenticRequestValidationError, "the submission has no Nats-Msg-Id; it must be %s", subject.RunMsgID(tenant, body.RunID)), nil
	}
	return "", "", nil, &dropError{"run_id", fmt.Errorf("Nats-Msg-Id %q is not <tenant>.<run_id>", id)}
}

// route routes one submission. A nil error means it is done with (routed,
// rejected or a duplicate); any other error is for settle.
func (r *Router) route(ctx context.Context, msg jetstream.Msg) error {
	rr, decErr := wire.Decode[wire.RunRequest](msg.Data())
	var body *wire.RunRequest
	if decErr == nil {
		body = &rr
	}
	tenant, runID, problem, err := address(msg, body)
	if err != nil {
		return err
	}
	switch {
	case problem != nil:
	case decErr != nil:
		problem = wire.Errorf(wire.AgenticRequestValidationError, "undecodable run request: %v", decErr)
	case rr.RunID != runID:
		problem = wire.Errorf(wire.AgenticRequestValidationError, "run_id %q differs from %q of the Nats-Msg-Id", rr.RunID, runID)
	}
	now := time.Now()
	rec := wire.RunRecord{RunID: runID, Tenant: tenant, RequestDigest: digest(msg.Data()), Created: now.UnixMilli()}
	adapterName := "none"
	if problem == nil {
		rec.Principal, rec.Profile, rec.Conversation = rr.Principal, rr.Profile, rr.Conversation
		if err := r.stamp(ctx, &rec, &rr); err != nil {
			return err
		}
		rec.Labels = rr.Labels // the spend ledger sums by label
		wk, p, err := r.validate(ctx, tenant, &rr, now)
		if err == nil {
			err = r.admit(ctx, p)
		}
		if err == nil && !r.admitted(ctx, msg, tenant, runID) {
			err = r.gate.Admit(ctx, tenant, rr.Principal, runID)
		}
		if err == nil {
			return r.dispatchNew(ctx, msg, rec, wk, p)
		}
		if !errors.As(err, &problem) {
			return err // infrastructure failure: try again later
		}
		if p != nil {
			adapterName = p.Adapter
		}
		if problem.Class == wire.AdmissionRejected {
			r.d.Metrics.AdmissionRejections.WithLabelValues(adapterName).Inc()
		}
	}
	run, w, _, err := r.open(ctx, msg, rec)
	if err != nil || w == nil {
		return err
	}
	return r.reject(ctx, w, run, problem, adapterName)
}

// admitted reports whether a redelivered submission's run was admitted
// already (its record exists): a budget spent since, or a quota taken,
// must not strand a run its router created and stopped routing half way.
// A first delivery, or a failed read, is not.
func (r *Router) admitted(ctx context.Context, msg jetstream.Msg, tenant, runID string) bool {
	if md, err := msg.Metadata(); err != nil || md.NumDelivered < 2 {
		return false
	}
	_, err := r.store.Get(ctx, tenant, runID)
	return err == nil
}

// dispatchNew routes a validated run on the fast path: its record is
// created routed (pin, adapter, deadline) while its accepted and routed
// statuses are published as one message, fenced on the run having no
// events (both at once); then the work, carrying the handoff, so the
// runner of its first delivery claims it without reading. A resubmission, or a
// redelivery of a submission whose router stopped half way, finds the
// record or the events there and goes on where they are (resume).
func (r *Router) dispatchNew(ctx context.Context, msg jetstream.Msg, rec wire.RunRecord, wk wire.Work, p *profile.Profile) error {
	rec.State, rec.Pin, rec.Adapter, rec.Deadline = wire.StateRouted, &wk.Pin, wk.Adapter, wk.Deadline
	var (
		run       runs.Run
		createErr error
		wg        sync.WaitGroup
	)
	wg.Go(func() { run, createErr = r.store.Create(ctx, rec) })
	w := r.store.Events().New(rec.Tenant, rec.RunID)
	w.ReaderVersion(wk.V) // a v1 submitter's accepted and routed go one event each
	acceptErr := w.StatusesFenced(ctx, wire.Status{State: wire.StateAccepted}, wire.Status{State: wire.StateRouted, Profile: wk.Profile, Pin: &wk.Pin})
	wg.Wait()
	switch {
	case errors.Is(createErr, runs.ErrExists) || errors.Is(acceptErr, events.ErrFenced):
		return r.resume(ctx, msg, rec, wk, p, createErr == nil)
	case createErr != nil:
		return createErr
	case acceptErr != nil:
		return acceptErr
	}
	return r.finish(ctx, w, run, wk, p)
}

// resume continues a run whose record or events already exist: only a
// redelivery of the submission that created them (or this very attempt,
// created) with the same bytes, while the run is still being routed;
// anything else is a duplicate, done with.
func (r *Router) resume(ctx context.Context, msg jetstream.Msg, rec wire.RunRecord, wk wire.Work, p *profile.Profile, created bool) error {
	run, err := r.store.Get(ctx, rec.Tenant, rec.RunID)
	if err != nil {
		return err // not found: the create is still on its way; try again
	}
	md, _ := msg.Metadata()
	redelivered := md != nil && md.NumDelivered >= 2
	st := run.Record.State
	if (st != wire.StateAccepted && st != wire.StateRouted) || (!redelivered && !created) || run.Record.RequestDigest != rec.RequestDigest {
		r.d.Log.Debug("duplicate submission", "run_id", rec.RunID, "tenant", rec.Tenant)
		return nil
	}
	w, last, err := r.store.Events().OpenLast(ctx, rec.Tenant, rec.RunID)
	if errors.Is(err, events.ErrEnded) {
		_, err = r.store.Ended(ctx, rec.Tenant, rec.RunID) // repairs the record
		return err
	}
	if err != nil {
		return err
	}
	w.ReaderVersion(wk.V)
	switch {
	case w.Seq() == 0:
		if err := w.StatusesFenced(ctx, wire.Status{State: wire.StateAccepted}, wire.Status{State: wire.StateRouted, Profile: wk.Profile, Pin: &wk.Pin}); err != nil {
			return err
		}
	case w.Seq() > 2 || (w.Seq() == 2 && (last.Status == nil || last.Status.State != wire.StateRouted)):
		return nil // past routing: a runner has it
	}
	if st == wire.StateAccepted {
		// Created by the reject path's open, then validated after all.
		if run, err = r.store.Route(ctx, run, &wk.Pin, wk.Adapter, wk.Deadline); err != nil {
			return err
		}
	}
	return r.finish(ctx, w, run, wk, p)
}

// finish publishes the routed status, unless stored already (with
// accepted, by dispatchNew or resume), and dispatches the work with its
// handoff. A queue found full only now ends
// the run rejected after routed.
func (r *Router) finish(ctx context.Context, w *events.Writer, run runs.Run, wk wire.Work, p *profile.Profile) error {
	if w.Seq() < 2 {
		if err := w.Status(ctx, wire.Status{State: wire.StateRouted, Profile: wk.Profile, Pin: &wk.Pin}); err != nil {
			if errors.Is(err, events.ErrDuplicate) || errors.Is(err, events.ErrFenced) {
				return nil // another writer (a cancel) ended the run first
			}
			return err
		}
	}
	if err := r.recordTurn(ctx, run.Record, wk); err != nil {
		return err // try again later (resume): the log keeps a run once
	}
	wk.Handoff = &wire.Handoff{Record: run.Record, Rev: run.Rev, Seq: w.Seq(), StreamSeq: w.Last()}
	if err := r.dispatch(ctx, p, wk); err != nil {
		var we *wire.Error
		if !errors.As(err, &we) {
			return err // infrastructure failure: try again later (resume)
		}
		if we.Class == wire.AdmissionRejected {
			r.d.Metrics.AdmissionRejections.WithLabelValues(p.Adapter).Inc()
		}
		return r.reject(ctx, w, run, we, p.Adapter)
	}
	r.d.Metrics.Runs.WithLabelValues(string(wire.StateRouted), wk.Adapter).Inc()
	r.tally.Add(tallyRouted, 1)
	return nil
}

// recordTurn appends a run of a conversation to the conversation's log
// (pkg/runs/convlog), with its first prompt (the request's "prompt", if it has
// one), before its work is dispatched: a run a runner may start is in
// its conversation's history. Recording again (a redelivery, resume) is
// a no-op.
func (r *Router) recordTurn(ctx context.Context, rec wire.RunRecord, wk wire.Work) error {
	if rec.Conversation == "" {
		return nil
	}
	return convlog.Record(ctx, r.d.JS, r.convs, rec.Tenant, rec.Conversation,
		convlog.Run{RunID: rec.RunID, Created: rec.Created, Prompt: requestPrompt(wk.Request)})
}

// requestPrompt is the "prompt" of an adapter's request, if it is a
// string: every adapter's request names its first turn's prompt so.
func requestPrompt(request []byte) string {
	var m map[string]any
	if msgpack.Unmarshal(request, &m) != nil {
		return ""
	}
	p, _ := m["prompt"].(string)
	return p
}

// stamp sets the run's export decision, taken now, as it is accepted:
// the operator enabled export and the principal's consent (read from the
// consent bucket's leader) is granted. A consented run keeps its request
// for its trajectory (every run keeps its labels, for the spend ledger). A principal that is not a valid token
// is not looked up (validate rejects the run).
func (r *Router) stamp(ctx context.Context, rec *wire.RunRecord, rr *wire.RunRequest) error {
	if r.consent == nil || subject.ValidToken("principal", rr.Principal) != nil {
		return nil
	}
	st, err := r.consent.Get(ctx, rec.Tenant, rr.Principal)
	if err != nil {
		return err // infrastructure: try again later
	}
	if st.Granted {
		rec.Consent, rec.ConsentRev = true, st.Rev
		rec.Request = rr.Request
	}
	return nil
}

// open creates the run's record and publishes accepted, or resumes a
// submission whose router stopped half way (a redelivery of the same
// bytes while the record still says accepted). A nil writer with a nil
// error means there is nothing to do: a resubmission of a run that exists.
// routed reports that the resumed run's routed event is already stored.
func (r *Router) open(ctx context.Context, msg jetstream.Msg, rec wire.RunRecord) (run runs.Run, w *events.Writer, routed bool, err error) {
	run, err = r.store.Create(ctx, rec)
	if err == nil {
		w = r.store.Events().New(rec.Tenant, rec.RunID)
		return run, w, false, w.Status(ctx, wire.Status{State: wire.StateAccepted})
	}
	if !errors.Is(err, runs.ErrExists) {
		return run, nil, false, err
	}
	if run, err = r.store.Get(ctx, rec.Tenant, rec.RunID); err != nil {
		return run, nil, false, err
	}
	md, _ := msg.Metadata()
	if run.Record.State != wire.StateAccepted || md == nil || md.NumDelivered < 2 || run.Record.RequestDigest != rec.RequestDigest {
		r.d.Log.Debug("duplicate submission", "run_id", rec.RunID, "tenant", rec.Tenant)
		return run, nil, false, nil
	}
	w, err = r.store.Events().Open(ctx, rec.Tenant, rec.RunID)
	if errors.Is(err, events.ErrEnded) {
		_, err = r.store.Ended(ctx, rec.Tenant, rec.RunID) // repairs the record
		return run, nil, false, err
	}
	if err != nil {
		return run, nil, false, err
	}
	switch w.Seq() {
	case 0:
		err = w.Status(ctx, wire.Status{State: wire.StateAccepted})
	case 1:
	default:
		routed = true
	}
	return run, w, routed, err
}

// reject ends the run rejected with we, straight from accepted.
func (r *Router) reject(ctx context.Context, w *events.Writer, run runs.Run, we *wire.Error, adapterName string) error {
	run.Record.Adapter = adapterName
	telemetry.Rejected(ctx, run.Record.Tenant, run.Record.RunID, we)
	err := r.store.End(ctx, w, run, wire.Status{State: wire.StateRejected, Error: we})
	if errors.Is(err, events.ErrFenced) {
		return nil // another writer ended it (a cancel): it is not ours to end
	}
	return err
}

// validate checks the request and builds its work item. A returned
// *wire.Error rejects the run; p is set once the profile resolved.
func (r *Router) validate(ctx context.Context, tenant string, rr *wire.RunRequest, now time.Time) (wk wire.Work, p *profile.Profile, err error) {
	if rr.Tenant != tenant {
		return wk, nil, wire.Errorf(wire.AgenticRequestValidationError, "tenant %q in the request differs from tenant %q of the subject", rr.Tenant, tenant)
	}
	if err := subject.ValidToken("principal", rr.Principal); err != nil {
		return wk, nil, wire.Errorf(wire.AgenticRequestValidationError, "%v", err)
	}
	if rr.Conversation != "" {
		if err := subject.ValidToken("conversation", rr.Conversation); err != nil {
			return wk, nil, wire.Errorf(wire.AgenticRequestValidationError, "%v", err)
		}
	}
	if err := wire.CheckLabels(rr.Labels); err != nil {
		return wk, nil, err
	}
	deadline := r.cfg.DefaultDeadline
	switch {
	case rr.DeadlineMS < 0:
		return wk, nil, wire.Errorf(wire.AgenticRequestValidationError, "deadline_ms must be >= 0, got %d", rr.DeadlineMS)
	case rr.DeadlineMS > r.cfg.MaxDeadline.Milliseconds():
		return wk, nil, wire.Errorf(wire.AgenticRequestValidationError, "deadline_ms %d exceeds the maximum %d", rr.DeadlineMS, r.cfg.MaxDeadline.Milliseconds())
	case rr.DeadlineMS > 0:
		deadline = time.Duration(rr.DeadlineMS) * time.Millisecond
	}
	p, pin, err := r.profiles.Resolve(rr.Profile)
	if err != nil {
		return wk, nil, wire.Errorf(wire.ProfileError, "%v", err)
	}
	held := false // a conversation with a checkpoint: its pin holds
	if rr.Conversation != "" {
		if p, pin, held, err = r.pinned(ctx, tenant, rr.Conversation, p, pin); err != nil {
			return wk, p, err
		}
	}
	a, ok := r.adapters.ForWork(p.Adapter, p.Name)
	if !ok {
		return wk, p, wire.Errorf(wire.ProviderUnavailable, "profile %s: adapter %s is not available", p.Name, p.Adapter)
	}
	if a.Capabilities().Transport != p.Transport {
		return wk, p, wire.Errorf(wire.ProfileError, "profile %s: transport %s contradicts adapter %s's %s", p.Name, p.Transport, p.Adapter, a.Capabilities().Transport)
	}
	if rr.Workspace != nil {
		if err := rr.Workspace.Check(); err != nil {
			return wk, p, wire.Errorf(wire.AgenticRequestValidationError, "%v", err)
		}
	}
	if rr.Workspace != nil && a.Capabilities().Transport != wire.TransportSubprocess {
		// Only a CLI run has a workspace a runner materializes: a source
		// is refused, not dropped.
		return wk, p, wire.Errorf(wire.AgenticOperationUnsupported, "workspace: profile %s's adapter %s is not a subprocess adapter; only a CLI run takes a workspace source", p.Name, p.Adapter)
	}
	if err := adapter.SplitRuntime(a, rr.Runtime); err != nil {
		return wk, p, err
	}
	request, sessionID, err := r.injectSession(ctx, tenant, rr, a.Capabilities())
	if err != nil {
		return wk, p, err
	}
	if _, err := a.Validate(request); err != nil {
		return wk, p, wire.AsError(err)
	}
	wk = wire.Work{
		V: rr.V, RunID: rr.RunID, Tenant: tenant, Principal: rr.Principal, Adapter: p.Adapter, Profile: p.Name,
		Request: request, Runtime: rr.Runtime, Workspace: rr.Workspace, Pin: pin, Conversation: rr.Conversation, SessionID: sessionID,
		Deadline: now.Add(deadline).UnixMilli(),
		Policy:   wire.AttemptPolicy{MaxAttempts: p.MaxAttempts, StallAfterMS: p.StallAfter().Milliseconds()},
	}
	if !held {
		wk.Fallback = r.fallbacks(p, request)
	}
	return wk, p, nil
}

// fallbacks resolves p's policy.fallback for a run of request
// (docs/contract.md §4.13): each profile as a run's profile is resolved,
// in order. A profile whose adapter this mesh does not serve, whose
// transport contradicts its adapter's, or whose adapter refuses the
// request could never run it, and is left out (logged).
func (r *Router) fallbacks(p *profile.Profile, request []byte) []wire.Fallback {
	var out []wire.Fallback
	for _, name := range p.Policy.Fallback {
		fp, pin, err := r.profiles.Resolve(name)
		var a adapter.Adapter
		if err == nil {
			var ok bool
			if a, ok = r.adapters.ForWork(fp.Adapter, fp.Name); !ok {
				err = fmt.Errorf("adapter %s is not available", fp.Adapter)
			} else if a.Capabilities().Transport != fp.Transport {
				err = fmt.Errorf("transport %s contradicts adapter %s's %s", fp.Transport, fp.Adapter, a.Capabilities().Transport)
			}
		}
		if err == nil {
			_, err = a.Validate(request)
		}
		if err != nil {
			r.d.Log.Warn("fallback profile left out", "profile", p.Name, "fallback", name, "err", err)
			continue
		}
		out = append(out, wire.Fallback{Profile: fp.Name, Adapter: fp.Adapter, Transport: fp.Transport, Pin: pin,
			Policy: wire.AttemptPolicy{MaxAttempts: fp.MaxAttempts, StallAfterMS: fp.StallAfter().Milliseconds()}})
	}
	return out
}

// pinned applies a conversation's checkpoint pin (docs/contract.md §5): a run that
// continues a conversation runs on the pinned provider and model with the
// pinned pricing, never on a fresh alias resolution (held reports that
// the conversation has a checkpoint: its run never falls back). A pin whose model is
// gone from the profiles, or a request resolving to another provider,
// fails closed with PinMismatch.
func (r *Router) pinned(ctx context.Context, tenant, conversation string, p *profile.Profile, pin wire.Pin) (_ *profile.Profile, _ wire.Pin, held bool, err error) {
	e, err := r.checkpoints.Get(ctx, subject.ConversationKey(tenant, conversation))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return p, pin, false, nil // a new conversation: this run pins it
	}
	if err != nil {
		return p, pin, false, fmt.Errorf("read checkpoint of %s: %w", conversation, err)
	}
	cp, err := wire.Decode[wire.Checkpoint](e.Value())
	if err != nil {
		return p, pin, false, wire.Errorf(wire.PinMismatch, "checkpoint of conversation %s: %v", conversation, err)
	}
	if cp.Pin.Provider != p.Adapter {
		return p, pin, false, wire.Errorf(wire.PinMismatch, "conversation %s is pinned to %s/%s; %q resolves to provider %s",
			conversation, cp.Pin.Provider, cp.Pin.Model, p.Name, p.Adapter)
	}
	hp, ok := r.profiles.ByModel(cp.Pin.Provider, cp.Pin.Model)
	if !ok {
		return p, pin, false, wire.Errorf(wire.PinMismatch, "conversation %s is pinned to %s/%s, which no profile offers any more",
			conversation, cp.Pin.Provider, cp.Pin.Model)
	}
	return hp, cp.Pin, true, nil
}

// injectSession puts the conversation's stored session id into the
// adapter's resume field (docs/contract.md §6): only for a resumable adapter, only when the
// request is part of a conversation, and never over a caller's own value,
// which wins. It returns the request to validate and the session it resumes.
func (r *Router) injectSession(ctx context.Context, tenant string, rr *wire.RunRequest, caps wire.Capabilities) ([]byte, string, error) {
	if rr.Conversation == "" || !caps.Resumable || caps.ResumeField == "" {
		return rr.Request, "", nil
	}
	fields := map[string]any{}
	if len(rr.Request) > 0 {
		if err := wire.DecodeStrict(rr.Request, &fields); err != nil {
			return nil, "", wire.Errorf(wire.AgenticRequestValidationError, "request: %v", err)
		}
	}
	if v, ok := fields[caps.ResumeField].(string); ok && v != "" {
		return rr.Request, v, nil // the caller's explicit value wins
	}
	e, err := r.sessions.Get(ctx, subject.ConversationKey(tenant, rr.Conversation))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return rr.Request, "", nil // a fresh conversation
	}
	if err != nil {
		return nil, "", fmt.Errorf("read session of %s: %w", rr.Conversation, err)
	}
	id := string(e.Value())
	fields[caps.ResumeField] = id
	b, err := wire.Marshal(fields)
	if err != nil {
		return nil, "", wire.Errorf(wire.AgenticRequestValidationError, "request: %v", err)
	}
	return b, id, nil
}

// workContentType is every work item's Content-Type, one shared value.
var workContentType = wire.TypeWork.ContentType()

// dispatch publishes the work item. The tenant's own queue for the
// adapter full (the work stream's per-subject bound, exact) is
// AdmissionRejected.
func (r *Router) dispatch(ctx context.Context, p *profile.Profile, wk wire.Work) error {
	b, err := wire.Marshal(&wk)
	if err != nil {
		return wire.Errorf(wire.AgenticRequestValidationError, "%v", err)
	}
	msg := nats.NewMsg(r.d.Names.Work(string(p.Transport), p.Adapter, wk.Tenant))
	msg.Data = b
	msg.Header.Set(jetstream.MsgIDHeader, subject.RunMsgID(wk.Tenant, wk.RunID))
	workContentType.Set(msg.Header)
	telemetry.Dispatch(ctx, &wk, p.Transport, msg.Header) // the runners' attempts are the run span's children
	_, err = r.d.JS.PublishMsg(ctx, msg)
	if isQueueFull(err) {
		return wire.Errorf(wire.AdmissionRejected, "tenant %s's queue of adapter %s is full", wk.Tenant, p.Adapter)
	}
	if err != nil {
		return fmt.Errorf("dispatch %s: %w", wk.RunID, err)
	}
	r.depth.add(p.Adapter)
	return nil
}

// admit checks the adapter's queue over all tenants (AdapterQueueMax and
// the profile's max_waiting) against a count at most depthTTL old, so
// concurrent routers can pass it by a few; a full one is
// AdmissionRejected before anything of the run is written.
func (r *Router) admit(ctx context.Context, p *profile.Profile) error {
	bound := r.cfg.AdapterQueueMax
	if p.Policy.MaxWaiting > 0 {
		bound = min(bound, int64(p.Policy.MaxWaiting))
	}
	n, err := r.queued(ctx, string(p.Transport), p.Adapter)
	if err != nil {
		return err
	}
	if n >= uint64(bound) {
		return wire.Errorf(wire.AdmissionRejected, "queue of adapter %s is full (%d waiting over all tenants, bound %d)", p.Adapter, n, bound)
	}
	return nil
}

// depthTTL is how old the adapter queue count dispatch checks may be.
const depthTTL = 250 * time.Millisecond

// depthCache holds each adapter's queued work over all tenants, read from
// the work stream at most every depthTTL and counted up by this router's
// own dispatches in between.
type depthCache struct {
	mu sync.Mutex
	at map[string]time.Time
	n  map[string]uint64
}

func (c *depthCache) add(adapter string) {
	c.mu.Lock()
	c.n[adapter]++
	c.mu.Unlock()
}

// queued is the adapter's queued work over all tenants.
func (r *Router) queued(ctx context.Context, transport, adapter string) (uint64, error) {
	c := &r.depth
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at[adapter]) < depthTTL {
		return c.n[adapter], nil
	}
	ictx, cancel := context.WithTimeout(ctx, jsretry.AttemptTimeout)
	defer cancel()
	info, err := r.work.Info(ictx, jetstream.WithSubjectFilter(r.d.Names.WorkAdapter(transport, adapter)))
	if err != nil {
		// The bound is approximate anyway, and the tenant's own bound stays
		// exact (the stream's): through a leader election route on the last
		// count rather than hold every submission up.
		r.d.Log.Warn("count the queue of an adapter; using the last count", "adapter", adapter, "err", err)
		c.at[adapter] = time.Now()
		return c.n[adapter], nil
	}
	var n uint64
	for _, k := range info.State.Subjects {
		n += k
	}
	c.n[adapter], c.at[adapter] = n, time.Now()
	return n, nil
}

func isQueueFull(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrStreamStoreFailed &&
		strings.Contains(apiErr.Description, "maximum messages per subject")
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// jsErrStreamStoreFailed is the JetStream API error code for a message the
// stream refused to store (JSStreamStoreFailedF); nats.go names no constant.
const jsErrStreamStoreFailed jetstream.ErrorCode = 10077
