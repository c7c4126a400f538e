// Package router consumes run requests from AGENTMESH_SUBMIT through the
// shared durable consumer, validates them, writes the run record, publishes
// accepted and then routed or rejected, and dispatches work to
// AGENTMESH_WORK. It also answers cancel requests (control.go).
package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("invalid router config")

// Config configures a router.
type Config struct {
	// Workers is how many submissions one router handles at once (default 16).
	Workers int
	// AckWait is the submit consumer's ack wait (default 30s).
	AckWait time.Duration
	// DefaultDeadline applies when a request has no deadline_ms (default 30m).
	DefaultDeadline time.Duration
	// MaxDeadline caps deadline_ms (default 24h).
	MaxDeadline time.Duration
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
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("%w: workers must be > 0, got %d", ErrInvalidConfig, c.Workers)
	case c.AckWait < time.Second:
		return fmt.Errorf("%w: ack wait must be at least 1s, got %s", ErrInvalidConfig, c.AckWait)
	case c.DefaultDeadline <= 0 || c.DefaultDeadline > c.MaxDeadline:
		return fmt.Errorf("%w: default deadline %s must be in (0, max deadline %s]", ErrInvalidConfig, c.DefaultDeadline, c.MaxDeadline)
	}
	return nil
}

// Limits on a request's labels.
const (
	maxLabels     = 32
	maxLabelKey   = 64
	maxLabelValue = 256
)

// Router routes submissions. Build it with New and run it with Run.
type Router struct {
	d           service.Deps
	cfg         Config
	profiles    *profile.Registry
	adapters    *adapter.Registry
	runs        jetstream.KeyValue
	sessions    jetstream.KeyValue
	checkpoints jetstream.KeyValue
	log         *events.Log
	submit      jetstream.Consumer
	work        jetstream.Stream
}

// New binds a router to the topology, which must exist.
func New(ctx context.Context, d service.Deps, profiles *profile.Registry, adapters *adapter.Registry, cfg Config) (*Router, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	runs, err := d.JS.KeyValue(ctx, d.Names.RunsBucket())
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", d.Names.RunsBucket(), err)
	}
	sessions, err := d.JS.KeyValue(ctx, d.Names.SessionsBucket())
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", d.Names.SessionsBucket(), err)
	}
	checkpoints, err := d.JS.KeyValue(ctx, d.Names.CheckpointsBucket())
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", d.Names.CheckpointsBucket(), err)
	}
	log, err := events.NewLog(ctx, d.JS, d.Names)
	if err != nil {
		return nil, err
	}
	work, err := d.JS.Stream(ctx, d.Names.WorkStream())
	if err != nil {
		return nil, fmt.Errorf("open stream %s: %w", d.Names.WorkStream(), err)
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
	return &Router{d: d, cfg: cfg, profiles: profiles, adapters: adapters, runs: runs, sessions: sessions, checkpoints: checkpoints, log: log, submit: cons, work: work}, nil
}

// Run routes submissions until ctx ends, then finishes the ones in hand and
// returns. It also serves cancel requests.
func (r *Router) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	svc, err := service.Register(r.d.NC, "agentmesh-router", "routes run requests and answers cancel requests",
		map[string]string{"registry_version": r.profiles.Version()},
		service.Endpoint{Name: "cancel", Subject: r.d.Names.CancelAll(), QueueGroup: "agentmesh-control", Handler: r.cancelHandler(ctx, &wg)})
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	msgs, err := r.submit.Messages(jetstream.PullMaxMessages(2 * r.cfg.Workers))
	if err != nil {
		return fmt.Errorf("consume %s: %w", r.d.Names.RouterConsumer(), err)
	}
	r.d.Health.Add("router", service.ConnCheck(r.d.NC))
	work := make(chan jetstream.Msg)
	for range r.cfg.Workers {
		wg.Go(func() {
			for msg := range work {
				r.handle(context.WithoutCancel(ctx), msg)
			}
		})
	}
	wg.Go(func() {
		<-ctx.Done()
		msgs.Drain()
	})
	for {
		msg, err := msgs.Next()
		if errors.Is(err, jetstream.ErrNoHeartbeat) {
			// The consumer's server went away (a failover): the iterator
			// pulls again once a server answers.
			r.d.Log.Warn("submit consumer missed its heartbeat", "err", err)
			continue
		}
		if err != nil {
			close(work)
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("next submission: %w", err)
		}
		work <- msg
	}
}

func (r *Router) drop(msg jetstream.Msg, reason string, err error) {
	r.d.Metrics.Dropped.WithLabelValues("router", reason).Inc()
	r.d.Log.Warn("dropping submission", "subject", msg.Subject(), "reason", reason, "err", err)
	_ = msg.Term()
}

// handle routes one submission. Every path settles msg.
func (r *Router) handle(ctx context.Context, msg jetstream.Msg) {
	tenant := msg.Subject()[strings.LastIndexByte(msg.Subject(), '.')+1:]
	rr, err := wire.Decode[wire.RunRequest](msg.Data())
	if err != nil {
		r.drop(msg, "decode", err)
		return
	}
	if err := subject.ValidToken("run_id", rr.RunID); err != nil {
		// Without a valid run id there is no event subject to reject on.
		r.drop(msg, "run_id", err)
		return
	}
	if err := subject.ValidToken("tenant", tenant); err != nil {
		r.drop(msg, "tenant", err)
		return
	}
	key := subject.RunKey(tenant, rr.RunID)
	now := time.Now()
	rec := wire.RunRecord{
		V: wire.Version, RunID: rr.RunID, Tenant: tenant, Principal: rr.Principal, Profile: rr.Profile,
		Conversation: rr.Conversation, RequestDigest: digest(msg.Data()), State: wire.StateAccepted,
		Created: now.UnixMilli(), Updated: now.UnixMilli(),
	}
	recBytes, err := wire.Marshal(&rec)
	if err != nil {
		r.drop(msg, "encode", err)
		return
	}
	resume := false
	rev, err := r.runs.Create(ctx, key, recBytes)
	if errors.Is(err, jetstream.ErrKeyExists) {
		// Either a resubmission (one run already exists) or a redelivery of
		// a submission whose router stopped half way: resume only that.
		entry, gerr := r.runs.Get(ctx, key)
		if gerr != nil {
			r.retry(msg, gerr)
			return
		}
		prev, derr := wire.Decode[wire.RunRecord](entry.Value())
		md, _ := msg.Metadata()
		if derr != nil || prev.State != wire.StateAccepted || md == nil || md.NumDelivered < 2 || prev.RequestDigest != rec.RequestDigest {
			r.d.Log.Debug("duplicate submission", "run_id", rr.RunID, "tenant", tenant)
			_ = msg.Ack()
			return
		}
		rec, rev, resume = prev, entry.Revision(), true
	} else if err != nil {
		r.retry(msg, err)
		return
	}

	w := r.log.New(tenant, rr.RunID)
	if resume {
		// Resuming: continue after the events the earlier delivery stored
		// (publishing them again would collide with their own dedupe ids).
		// The record is still accepted, so no runner has written yet.
		w, err = r.log.Open(ctx, tenant, rr.RunID)
		if errors.Is(err, events.ErrEnded) {
			_ = msg.Ack()
			return
		}
		if err != nil {
			r.retry(msg, err)
			return
		}
	}
	if w.Seq() == 0 {
		if err := w.Status(ctx, wire.Status{State: wire.StateAccepted}); err != nil {
			r.retry(msg, err)
			return
		}
	}
	wk, p, verr := r.validate(ctx, tenant, &rr, now)
	if verr == nil {
		verr = r.dispatch(ctx, p, wk)
	}
	if verr != nil {
		var we *wire.Error
		if !errors.As(verr, &we) {
			r.retry(msg, verr) // infrastructure failure: try again later
			return
		}
		if we.Class == wire.AdmissionRejected {
			r.d.Metrics.AdmissionRejections.WithLabelValues(p.Adapter).Inc()
		}
		adapterName := "none"
		if p != nil {
			adapterName = p.Adapter
		}
		r.finish(ctx, msg, w, key, rec, rev, wire.Status{State: wire.StateRejected, Error: we}, adapterName)
		return
	}
	if w.Seq() < 2 {
		if err := w.Status(ctx, wire.Status{State: wire.StateRouted, Pin: &wk.Pin}); err != nil {
			r.retry(msg, err)
			return
		}
	}
	rec.State, rec.Pin, rec.Adapter, rec.Deadline, rec.Updated = wire.StateRouted, &wk.Pin, wk.Adapter, wk.Deadline, time.Now().UnixMilli()
	if err := r.update(ctx, key, rec, rev); err != nil {
		r.retry(msg, err)
		return
	}
	r.d.Metrics.Runs.WithLabelValues(string(wire.StateRouted), wk.Adapter).Inc()
	_ = msg.Ack()
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
	if err := checkLabels(rr.Labels); err != nil {
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
	if rr.Conversation != "" {
		if p, pin, err = r.pinned(ctx, tenant, rr.Conversation, p, pin); err != nil {
			return wk, p, err
		}
	}
	a, ok := r.adapters.Get(p.Adapter)
	if !ok {
		return wk, p, wire.Errorf(wire.ProviderUnavailable, "profile %s: adapter %s is not available", p.Name, p.Adapter)
	}
	if a.Capabilities().Transport != p.Transport {
		return wk, p, wire.Errorf(wire.ProfileError, "profile %s: transport %s contradicts adapter %s's %s", p.Name, p.Transport, p.Adapter, a.Capabilities().Transport)
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
		V: wire.Version, RunID: rr.RunID, Tenant: tenant, Principal: rr.Principal, Adapter: p.Adapter,
		Request: request, Runtime: rr.Runtime, Pin: pin, Conversation: rr.Conversation, SessionID: sessionID,
		Deadline: now.Add(deadline).UnixMilli(), Policy: wire.AttemptPolicy{MaxAttempts: p.MaxAttempts},
	}
	return wk, p, nil
}

// pinned applies a conversation's checkpoint pin (DESIGN §5): a run that
// continues a conversation runs on the pinned provider and model with the
// pinned pricing, never on a fresh alias resolution. A pin whose model is
// gone from the profiles, or a request resolving to another provider,
// fails closed with PinMismatch.
func (r *Router) pinned(ctx context.Context, tenant, conversation string, p *profile.Profile, pin wire.Pin) (*profile.Profile, wire.Pin, error) {
	e, err := r.checkpoints.Get(ctx, subject.ConversationKey(tenant, conversation))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return p, pin, nil // a new conversation: this run pins it
	}
	if err != nil {
		return p, pin, fmt.Errorf("read checkpoint of %s: %w", conversation, err)
	}
	cp, err := wire.Decode[wire.Checkpoint](e.Value())
	if err != nil {
		return p, pin, wire.Errorf(wire.PinMismatch, "checkpoint of conversation %s: %v", conversation, err)
	}
	if cp.Pin.Provider != p.Adapter {
		return p, pin, wire.Errorf(wire.PinMismatch, "conversation %s is pinned to %s/%s; %q resolves to provider %s",
			conversation, cp.Pin.Provider, cp.Pin.Model, p.Name, p.Adapter)
	}
	held, ok := r.profiles.ByModel(cp.Pin.Provider, cp.Pin.Model)
	if !ok {
		return p, pin, wire.Errorf(wire.PinMismatch, "conversation %s is pinned to %s/%s, which no profile offers any more",
			conversation, cp.Pin.Provider, cp.Pin.Model)
	}
	return held, cp.Pin, nil
}

// injectSession puts the conversation's stored session id into the
// adapter's resume field (D3): only for a resumable adapter, only when the
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

func checkLabels(labels map[string]string) error {
	if len(labels) > maxLabels {
		return wire.Errorf(wire.AgenticRequestValidationError, "labels: %d entries, at most %d", len(labels), maxLabels)
	}
	for k, v := range labels {
		if k == "" || len(k) > maxLabelKey || len(v) > maxLabelValue {
			return wire.Errorf(wire.AgenticRequestValidationError, "label %.64q: key must be 1 to %d bytes and value at most %d", k, maxLabelKey, maxLabelValue)
		}
	}
	return nil
}

// dispatch publishes the work item. A full adapter queue is AdmissionRejected.
func (r *Router) dispatch(ctx context.Context, p *profile.Profile, wk wire.Work) error {
	b, err := wire.Marshal(&wk)
	if err != nil {
		return wire.Errorf(wire.AgenticRequestValidationError, "%v", err)
	}
	subj := r.d.Names.Work(string(p.Transport), p.Adapter)
	if p.Policy.MaxWaiting > 0 {
		// The profile's own queue bound. Routers check it concurrently, so
		// it can be passed by a few; AGENTMESH_WORK_QUEUE_MAX is the hard
		// bound the stream enforces.
		info, err := r.work.Info(ctx, jetstream.WithSubjectFilter(subj))
		if err != nil {
			return fmt.Errorf("queue of %s: %w", p.Adapter, err)
		}
		if n := info.State.Subjects[subj]; n >= uint64(p.Policy.MaxWaiting) {
			return wire.Errorf(wire.AdmissionRejected, "queue of adapter %s is full (%d waiting, max_waiting %d)", p.Adapter, n, p.Policy.MaxWaiting)
		}
	}
	msg := nats.NewMsg(subj)
	msg.Data = b
	msg.Header.Set(jetstream.MsgIDHeader, wk.RunID)
	_, err = r.d.JS.PublishMsg(ctx, msg)
	if isQueueFull(err) {
		return wire.Errorf(wire.AdmissionRejected, "queue of adapter %s is full", p.Adapter)
	}
	if err != nil {
		return fmt.Errorf("dispatch %s: %w", wk.RunID, err)
	}
	return nil
}

func isQueueFull(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrStreamStoreFailed &&
		strings.Contains(apiErr.Description, "maximum messages per subject")
}

// finish ends a run the router owns with a terminal status.
func (r *Router) finish(ctx context.Context, msg jetstream.Msg, w *events.Writer, key string, rec wire.RunRecord, rev uint64, st wire.Status, adapterName string) {
	if err := w.Terminal(ctx, st); err != nil && !errors.Is(err, events.ErrFenced) {
		r.retry(msg, err)
		return
	}
	rec.State, rec.Error, rec.Updated = st.State, st.Error, time.Now().UnixMilli()
	if err := r.update(ctx, key, rec, rev); err != nil {
		r.retry(msg, err)
		return
	}
	r.d.Metrics.Runs.WithLabelValues(string(st.State), adapterName).Inc()
	_ = msg.Ack()
}

func (r *Router) update(ctx context.Context, key string, rec wire.RunRecord, rev uint64) error {
	b, err := wire.Marshal(&rec)
	if err != nil {
		return err
	}
	_, err = r.runs.Update(ctx, key, b, rev)
	return err
}

// retry leaves a submission for redelivery after an infrastructure failure.
func (r *Router) retry(msg jetstream.Msg, err error) {
	r.d.Log.Warn("submission will be retried", "subject", msg.Subject(), "err", err)
	_ = msg.NakWithDelay(time.Second)
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// jsErrStreamStoreFailed is the JetStream API error code for a message the
// stream refused to store (JSStreamStoreFailedF); nats.go names no constant.
const jsErrStreamStoreFailed jetstream.ErrorCode = 10077
