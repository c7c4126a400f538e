package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service/telemetry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Causes with which a run's context is cancelled.
var (
	errCancelled = errors.New("cancelled by request")
	errDeadline  = errors.New("run deadline passed")
	errShutdown  = errors.New("runner shutting down")
	errLeaseLost = errors.New("lease lost")
	errNotOwner  = errors.New("run is no longer held by this runner")
	errStalled   = errors.New("transport stalled")
)

// endTimeout bounds the ending of a run (terminal status, record, lease)
// after the run's own context has ended; publishes inside it retry through
// a leader election.
const endTimeout = 10 * time.Second

// endRetry is the least time ending a run retries through a leader
// election: longer than the elections measured on a loaded 3-node cluster
// (up to 10 s).
const endRetry = 30 * time.Second

// run is one delivery of one work item.
type run struct {
	h    *Host
	a    adapter.Adapter
	d    *delivery
	work wire.Work
	key  string // <tenant>.<run_id>

	run       runs.Run // the record as this attempt last wrote it
	attempt   int
	w         *events.Writer
	lease     *runs.Lease // the runner's lease the attempt was claimed under
	committed bool
	// announced: claimFirst published the running status; runningErr: it
	// failed to, other than fenced.
	announced  bool
	runningErr error
	summary    wire.Summary
	started    time.Time
	session    string // the session id last stored for the conversation

	checkpoint []byte     // continuation state the adapter saved during this attempt
	ws         *Workspace // the attempt's materialized workspace, if any
	wsFinished bool       // Workspace.Finish was tried (finishWorkspace)
	// fresh: this attempt found no checkpoint of its conversation; a
	// conversation run that did not (one was found, or not read) never
	// falls back, its pin holds.
	fresh bool

	span *telemetry.Attempt // nil unless tracing

	mu        sync.Mutex
	cancel    context.CancelCauseFunc
	stopCause error // requested before the run had a context (stop)

	sess *adapter.Session // a session run's live side (session.go), under mu

	done  chan struct{} // closed when the run has been handled
	final wire.State    // the terminal state this runner published, if any
}

func (r *run) requestCancel() { r.stop(errCancelled) }

// stop ends the run's context with cause, now or as soon as it has one.
func (r *run) stop(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopCause == nil {
		r.stopCause = cause
	}
	if r.cancel != nil {
		r.cancel(cause)
	}
}

func (r *run) logger() []any {
	return []any{"run_id", r.work.RunID, "tenant", r.work.Tenant, "adapter", r.a.Name(), "attempt", r.attempt}
}

func (r *run) deadline() time.Time {
	if r.work.Deadline <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(r.work.Deadline)
}

// claim takes the run for this attempt: it checks the deadline and the
// attempt policy first (at every delivery, so a run redelivered after its
// deadline or its last attempt ends instead of running) and opens the
// run's events for the attempt, stamped with this runner, its lease's
// epoch and the attempt's number; the fenced running status (exec) is
// the claim. It settles the delivery and reports false when the run is
// not to be executed here. On the first delivery of work that carries
// the router's handoff it reads nothing and publishes the running status
// itself (claimFirst).
func (r *run) claim(ctx context.Context) bool {
	if r.pastDeadline(ctx) {
		return false
	}
	lease := r.h.currentLease()
	if lease == nil {
		// The runner's lease is being taken anew: hand the work back.
		r.d.settle(settleRetry, time.Second)
		return false
	}
	r.lease = lease
	if r.work.Handoff != nil && r.d.first {
		if ok, done := r.claimFirst(ctx); done {
			return ok
		}
	}
	cur, err := r.h.store.Get(ctx, r.work.Tenant, r.work.RunID)
	if errors.Is(err, runs.ErrNotFound) {
		r.h.d.Log.Error("work for a run without a record; dropping it", r.logger()...)
		r.d.settle(settleTerm, 0)
		return false
	}
	if err != nil {
		r.h.d.Log.Warn("read run record", append(r.logger(), "err", err)...)
		r.d.settle(settleRetry, time.Second)
		return false
	}
	if cur.Record.State.Terminal() {
		// Cancelled while queued, or ended by its last holder.
		r.d.settle(settleAck, 0)
		return false
	}
	// Open before claiming: a run that cannot be opened now (a leader
	// election) is handed back without spending an attempt.
	w, t, err := r.h.store.Events().OpenTail(ctx, r.work.Tenant, r.work.RunID)
	if errors.Is(err, events.ErrEnded) {
		if _, err := r.h.store.Ended(ctx, r.work.Tenant, r.work.RunID); err != nil {
			r.h.d.Log.Warn("repair run record", append(r.logger(), "err", err)...)
			r.d.settle(settleRetry, time.Second)
			return false
		}
		r.d.settle(settleAck, 0)
		return false
	}
	if err != nil {
		r.h.d.Log.Warn("open run events", append(r.logger(), "err", err)...)
		r.d.settle(settleRetry, time.Second)
		return false
	}
	if r.resumeMove(ctx, cur, t) {
		return false
	}
	rec := runs.WithTail(cur.Record, t)
	switch {
	case rec.Committed:
		// An earlier attempt published output: the run is never
		// executed again.
		r.orphaned(ctx, t)
		return false
	case t.Event.Seq < 2:
		// A router resuming a submission it stopped half way through
		// (a redelivery) dispatches before it stores routed.
		r.d.settle(settleRetry, 50*time.Millisecond)
		return false
	case rec.Attempt >= r.work.Policy.MaxAttempts:
		// Every attempt the policy allows was claimed and none produced
		// output (their runners died or gave the work back).
		r.endUnowned(ctx, "is out of attempts", func(rec wire.RunRecord) wire.Status {
			return wire.Status{State: wire.StateFailed, Profile: rec.Profile, Pin: rec.Pin, Attempt: rec.Attempt,
				Error: wire.Errorf(wire.ProviderTransportError, "run %s was attempted %d times without output; the attempt policy allows %d", rec.RunID, rec.Attempt, r.work.Policy.MaxAttempts)}
		})
		return false
	}
	r.run, r.attempt, r.w = cur, rec.Attempt+1, w
	r.author(w, lease.Epoch(), r.attempt)
	return true
}

// claimFirst claims the first delivery of work from the router's
// handoff, without reading: its fenced running status is the claim. done
// is false when the handoff turned out stale (the events moved on): claim
// then reads what they say.
func (r *run) claimFirst(ctx context.Context) (ok, done bool) {
	h := r.work.Handoff
	if h.Record.State != wire.StateRouted || r.work.Policy.MaxAttempts < 1 {
		return false, false
	}
	w := r.h.store.Events().Resume(r.work.Tenant, r.work.RunID, h.Seq, h.StreamSeq)
	r.author(w, r.lease.Epoch(), 1)
	pub, stop := r.publishContext(ctx)
	defer stop()
	err := w.StatusFenced(pub, wire.Status{State: wire.StateRunning, Attempt: 1})
	if errors.Is(err, events.ErrFenced) {
		// A cancel ended the queued run, or the handoff is stale.
		if ended, err := r.h.store.Ended(ctx, r.work.Tenant, r.work.RunID); err == nil && ended {
			r.h.d.Log.Debug("run ended before this attempt started", r.logger()...)
			r.d.settle(settleAck, 0)
			return false, true
		}
		return false, false
	}
	r.run, r.attempt, r.w = runs.Run{Record: h.Record, Rev: h.Rev}, 1, w
	if err != nil {
		r.runningErr = err
	} else {
		r.announced = true
	}
	return true, true
}

// orphaned handles work delivered again for a run that has published
// output and not ended (t is its tail): its work stays in the stream
// until the run's end is recorded. While the runner its events name
// still holds its lease under the same epoch it is alive (the work came
// back only because a heartbeat was late): the work is handed back for
// another ack wait (when that runner is this one, only while it still
// executes the run). Otherwise that runner is gone, or gave the run up:
// the run ends failed here, as the sweeper ends it when it sees the
// lease expire.
func (r *run) orphaned(ctx context.Context, t events.Tail) {
	if t.Runner != "" {
		held, err := r.h.store.RunnerHeld(ctx, t.Runner, t.Epoch)
		if err != nil {
			r.h.d.Log.Warn("read the lease of a run's runner", append(r.logger(), "runner", t.Runner, "err", err)...)
			r.d.settle(settleRetry, time.Second)
			return
		}
		if held && (t.Runner != r.h.cfg.ID || r.h.holdsOther(r.key, r)) {
			r.d.settle(settleRetry, r.h.cfg.AckWait)
			return
		}
	}
	ended, err := r.h.store.EndOrphaned(ctx, r.work.Tenant, r.work.RunID, func(rec wire.RunRecord) wire.Status {
		we := wire.Errorf(wire.ProviderTransportError, "the runner of run %s stopped after its first output", rec.RunID)
		if r.isSession() {
			// The live agent is gone with its runner; a run on the
			// conversation loads the session where its agent can.
			we = wire.Errorf(wire.SessionLost, "the runner of session %s stopped; a run on its conversation resumes it through session/load where the agent supports it", rec.RunID)
		}
		return wire.Status{State: wire.StateFailed, Profile: rec.Profile, Pin: rec.Pin, Attempt: rec.Attempt, Error: we}
	})
	if err != nil {
		r.h.d.Log.Warn("end run whose runner stopped after its first output", append(r.logger(), "err", err)...)
		r.d.settle(settleRetry, time.Second)
		return
	}
	if ended {
		r.h.d.Log.Info("ended run whose runner stopped after its first output", r.logger()...)
	}
	r.d.settle(settleAck, 0)
}

// pastDeadline ends a run redelivered after its deadline, timed out, and
// reports whether it did.
func (r *run) pastDeadline(ctx context.Context) bool {
	if dl := r.deadline(); dl.IsZero() || !time.Now().After(dl) {
		return false
	}
	r.endUnowned(ctx, "passed its deadline before it could run", func(rec wire.RunRecord) wire.Status {
		return wire.Status{State: wire.StateTimedOut, Profile: rec.Profile, Pin: rec.Pin, Attempt: rec.Attempt,
			Error: wire.Errorf(wire.DeadlineExceeded, "run %s passed its deadline before it could run", rec.RunID)}
	})
	return true
}

// endUnowned ends a run this delivery found unable to run (past its
// deadline, out of attempts) and done with, unless it has ended or has
// output (then orphaned decides).
func (r *run) endUnowned(ctx context.Context, why string, status func(wire.RunRecord) wire.Status) {
	ended, err := r.h.store.EndUnowned(ctx, r.work.Tenant, r.work.RunID,
		func(rec wire.RunRecord, _ events.Tail) bool { return !rec.Committed }, status)
	if err != nil {
		r.h.d.Log.Warn("end run that "+why, append(r.logger(), "err", err)...)
		r.d.settle(settleRetry, time.Second)
		return
	}
	if ended {
		r.h.d.Log.Info("ended run that "+why, r.logger()...)
		r.d.settle(settleAck, 0)
		return
	}
	// Ended already, or with output: then its work stays until its end.
	t, err := r.h.store.Events().Tail(ctx, r.work.Tenant, r.work.RunID)
	switch {
	case err != nil:
		r.d.settle(settleRetry, time.Second)
	case t.HasOutput():
		r.orphaned(ctx, t)
	default:
		r.d.settle(settleAck, 0)
	}
}

// publishContext bounds the run's publishes: not cut short by a cancel or
// the deadline (a publish abandoned mid-flight may still be stored, and the
// writer's seq would no longer match the stream), but retried through a
// leader election only until endTimeout past the deadline.
func (r *run) publishContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl := r.deadline()
	if dl.IsZero() || dl.Before(time.Now()) {
		dl = time.Now()
	}
	return context.WithDeadline(context.WithoutCancel(ctx), dl.Add(endTimeout))
}

func (r *run) exec(parent context.Context) {
	r.key = subject.RunKey(r.work.Tenant, r.work.RunID)
	if !r.claim(parent) {
		return
	}
	if r.h.d.Tracing.Enabled() {
		// The attempt's span, the child of the run's (the work carries it).
		r.span = r.h.d.Tracing.StartAttempt(parent, r.d.msg.Headers(), &r.work, r.a.Capabilities().Transport, r.attempt)
		defer r.span.End()
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	if dl := r.deadline(); !dl.IsZero() {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, dl, errDeadline)
		defer stop()
	}
	r.mu.Lock()
	r.cancel = cancel
	if r.stopCause != nil {
		cancel(r.stopCause)
	}
	r.mu.Unlock()
	pub, stopPub := r.publishContext(ctx)
	defer stopPub()
	// The running status is this attempt's claim on the run's events:
	// fenced, so it cannot land after a cancel or the sweeper ended the run.
	// claimFirst published it already, or tried to.
	err := r.runningErr
	if !r.announced && err == nil {
		err = r.w.StatusFenced(pub, wire.Status{State: wire.StateRunning, Attempt: r.attempt})
	}
	if err != nil {
		if errors.Is(err, events.ErrFenced) {
			// A cancel ended the queued run, or another delivery's attempt
			// claimed it since this one read its events.
			if ended, eerr := r.h.store.Ended(pub, r.work.Tenant, r.work.RunID); eerr == nil && ended {
				r.h.d.Log.Debug("run ended before this attempt started", r.logger()...)
				r.d.settle(settleAck, 0)
				return
			}
			r.abandon("another attempt claimed the run")
			return
		}
		r.conclude(ctx, wire.Errorf(wire.ProviderTransportError, "publish running status: %v", err).Retry(), nil)
		return
	}
	if ctx.Err() != nil {
		r.conclude(ctx, nil, nil)
		return
	}
	req, err := r.validate()
	if err != nil {
		r.end(wire.Status{State: wire.StateFailed, Error: wire.AsError(err)})
		return
	}
	call := adapter.Call{RunID: r.work.RunID, Request: req, Runtime: r.work.Runtime, SessionID: r.work.SessionID, Attempt: r.attempt, Model: r.work.Pin.Model, MaxAttempts: r.work.Policy.MaxAttempts}
	if r.work.Conversation != "" {
		state, at, err := r.loadCheckpoint(ctx)
		if err != nil {
			r.conclude(ctx, err, nil)
			return
		}
		call.Checkpoint, call.CheckpointAt = state, at
		call.SaveCheckpoint = func(b []byte) { r.checkpoint = bytes.Clone(b) }
	}
	r.openSession(ctx, &call)
	defer r.closeSession()
	defer r.closeWorkspace()
	if err := r.prepareWorkspace(ctx, &call); err != nil {
		r.conclude(ctx, err, nil)
		return
	}
	r.started = time.Now()
	streamErr, failure := r.stream(ctx, pub, cancel, call)
	r.conclude(ctx, streamErr, failure)
}

// validate decodes the work's request; an adapter that panics on it fails
// the run with ProviderProtocolError.
func (r *run) validate() (req any, err error) {
	defer r.recoverAdapter(&err)
	return r.a.Validate(r.work.Request)
}

// recoverAdapter turns an adapter's panic into the run's
// ProviderProtocolError: the stack goes to the log, never to an event, and
// the runner and its other runs go on.
func (r *run) recoverAdapter(err *error) {
	p := recover()
	if p == nil {
		return
	}
	r.h.d.Log.Error("adapter panicked", append(r.logger(), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))...)
	*err = wire.Errorf(wire.ProviderProtocolError, "adapter %s failed while handling the run (panic: %v)", r.a.Name(), p)
}

// stream drives the adapter, publishing what it yields. It returns the
// attempt's failure, or the provider's error chunk.
//
//lint:ignore ST1008 failure is a second outcome (the provider's error chunk), not a value qualified by streamErr
func (r *run) stream(ctx, pub context.Context, cancel context.CancelCauseFunc, call adapter.Call) (streamErr error, failure *wire.Chunk) {
	defer r.recoverAdapter(&streamErr)
	// The stall watchdog looks at when the adapter last yielded, rather
	// than being reset at every chunk: one clock read a chunk.
	var last atomic.Int64 // unix ns of the adapter's last yield
	last.Store(time.Now().UnixNano())
	if stall := time.Duration(r.work.Policy.StallAfterMS) * time.Millisecond; stall > 0 {
		var watchdog *time.Timer
		watchdog = time.AfterFunc(stall, func() {
			if s := r.liveSession(); s != nil && s.Waiting() {
				// A session between turns waits for its client, not its
				// transport.
				last.Store(time.Now().UnixNano())
			}
			if idle := time.Since(time.Unix(0, last.Load())); idle < stall {
				watchdog.Reset(stall - idle)
				return
			}
			cancel(errStalled)
		})
		defer watchdog.Stop()
	}
	chunks := r.h.d.Metrics.Chunks.WithLabelValues(r.a.Name())
	for c, err := range r.a.Stream(ctx, call) {
		now := time.Now()
		last.Store(now.UnixNano())
		if err != nil {
			return err, nil
		}
		if c.Type == wire.ChunkResult && c.Metadata.Usage != nil {
			c.Metadata.Cost = r.price(*c.Metadata.Usage)
		}
		if !r.committed {
			if err := r.commit(pub, cancel, c); err != nil {
				return err, nil
			}
		} else if r.lease.StaleAt(now) && !r.awaitLease(ctx, cancel) {
			return nil, nil
		} else if err := r.w.ChunkAsync(pub, c); err != nil {
			return wire.Errorf(wire.ProviderTransportError, "publish chunk %d: %v", r.w.Seq()+1, err), nil
		}
		r.account(&c)
		r.span.Chunk(&c)
		chunks.Inc()
		if c.Type == wire.ChunkSystem {
			r.confirmSession(ctx, c.Metadata.SessionID)
		}
		if c.Type == wire.ChunkError {
			f := c         // (a copy: c itself stays off the heap)
			return nil, &f // nothing may follow a provider-declared failure
		}
	}
	return nil, nil
}

// awaitLease holds the run's output while its runner's lease is stale: a
// loss of quorum or an election (the lease's renewal is failing) or a
// process paused (SIGSTOP, a long GC) may have let the lease expire, and
// the sweeper end the run. It reports true once a renewal kept the lease
// (the bucket never expired it, so no one else ended the run), false
// when the lease is lost (the run is abandoned: its end is another
// writer's) or ctx ended (cancel, deadline: conclude ends it).
func (r *run) awaitLease(ctx context.Context, cancel context.CancelCauseFunc) bool {
	held := time.Now()
	r.h.d.Log.Warn("lease renewal late; holding the run's output until it is renewed", r.logger()...)
	err := r.lease.AwaitFresh(ctx)
	switch {
	case err == nil:
		r.h.d.Log.Info("lease renewed; the run goes on", append(r.logger(), "held", time.Since(held).Round(time.Millisecond))...)
		return true
	case errors.Is(err, runs.ErrLeaseLost):
		r.h.d.Log.Error("lease not renewed in time; abandoning run", r.logger()...)
		cancel(errLeaseLost)
	}
	return false
}

// price is the exact cost of usage under the pin's pricing; empty when
// the pricing does not price a class the usage has (logged).
func (r *run) price(u wire.Usage) string {
	c, err := cost.Of(r.work.Pin.Pricing, u)
	if err != nil {
		r.h.d.Log.Warn("price usage", append(r.logger(), "err", err)...)
		return ""
	}
	return c
}

// confirmSession stores a resumable adapter's confirmed, non-empty session
// id under the run's conversation (docs/contract.md §6). Only a published system chunk
// confirms an id, and nothing here ever erases one.
func (r *run) confirmSession(ctx context.Context, id string) {
	if id == "" || r.work.Conversation == "" || !r.a.Capabilities().Resumable || id == r.session {
		return
	}
	key := subject.ConversationKey(r.work.Tenant, r.work.Conversation)
	if _, err := r.h.sessions.Put(ctx, key, []byte(id)); err != nil {
		r.h.d.Log.Warn("store session", append(r.logger(), "conversation", r.work.Conversation, "err", err)...)
		return
	}
	r.session = id
}

// loadCheckpoint returns the conversation's continuation state and when
// it was stored, or nil for a fresh conversation. A checkpoint another
// adapter wrote fails closed with PinMismatch: its state means nothing to
// this adapter, and running without it would silently lose the
// conversation.
func (r *run) loadCheckpoint(ctx context.Context) ([]byte, time.Time, error) {
	e, err := r.h.checkpoints.Get(ctx, subject.ConversationKey(r.work.Tenant, r.work.Conversation))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		r.fresh = true
		return nil, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, wire.Errorf(wire.ProviderTransportError, "read checkpoint of %s: %v", r.work.Conversation, err).Retry()
	}
	cp, err := wire.Decode[wire.Checkpoint](e.Value())
	if err != nil {
		return nil, time.Time{}, wire.Errorf(wire.ProviderProtocolError, "checkpoint of %s: %v", r.work.Conversation, err)
	}
	if cp.Adapter != r.a.Name() {
		return nil, time.Time{}, wire.Errorf(wire.PinMismatch, "conversation %s was checkpointed by adapter %s; this run's adapter is %s", r.work.Conversation, cp.Adapter, r.a.Name())
	}
	var at time.Time
	if cp.Updated > 0 {
		at = time.UnixMilli(cp.Updated)
	}
	return cp.State, at, nil
}

// saveCheckpoint stores the run's pin and what the adapter saved once the
// run has succeeded.
func (r *run) saveCheckpoint(ctx context.Context) {
	if r.work.Conversation == "" {
		return
	}
	// Every conversation run's success pins the conversation, with the
	// adapter's continuation state when it has one.
	b, err := wire.Marshal(&wire.Checkpoint{V: wire.Version, Adapter: r.a.Name(), Pin: r.work.Pin, State: r.checkpoint, Updated: time.Now().UnixMilli()})
	if err == nil {
		_, err = r.h.checkpoints.Put(ctx, subject.ConversationKey(r.work.Tenant, r.work.Conversation), b)
	}
	if err != nil {
		r.h.d.Log.Error("store checkpoint", append(r.logger(), "conversation", r.work.Conversation, "err", err)...)
	}
}

// commit crosses the first-output boundary: from here the run is never
// replayed. The first chunk is fenced after the running status, so it
// cannot land after another writer ended the run; once it is stored the
// run's events say it has output, which the sweeper (once the runner's
// lease expires) and the next delivery of its work find, so it is never
// re-executed.
func (r *run) commit(pub context.Context, cancel context.CancelCauseFunc, first wire.Chunk) error {
	err := r.w.ChunkFenced(pub, first)
	if errors.Is(err, events.ErrFenced) {
		err := fmt.Errorf("%w: first chunk: %w", errNotOwner, err)
		cancel(err)
		return err
	}
	// Stored, or perhaps stored: the run can only end now, failed if it
	// was not (fenced after this runner's own events, so it still may).
	r.committed = true
	if err != nil {
		return wire.Errorf(wire.ProviderTransportError, "publish first chunk: %v", err)
	}
	r.h.d.Metrics.TimeToFirstChunk.WithLabelValues(r.a.Name()).Observe(time.Since(time.UnixMilli(r.run.Record.Created)).Seconds())
	return nil
}

func (r *run) account(c *wire.Chunk) {
	r.summary.Chunks++
	if c.Type == wire.ChunkResult {
		if u := c.Metadata.Usage; u != nil {
			r.summary.Usage = u
			r.summary.Cost = c.Metadata.Cost
		}
		if c.Metadata.TotalCostUSD != nil {
			r.summary.TotalCostUSD = c.Metadata.TotalCostUSD
		}
	}
}

// conclude decides how an attempt that has stopped ends.
func (r *run) conclude(ctx context.Context, streamErr error, failure *wire.Chunk) {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errLeaseLost), errors.Is(cause, errNotOwner):
		// Another writer (the sweeper, a cancel of an orphaned run, another
		// runner) owns the run's end now; this runner publishes nothing more.
		r.abandon(cause.Error())
	case errors.Is(cause, errCancelled):
		r.end(wire.Status{State: wire.StateCancelled})
	case errors.Is(cause, errDeadline):
		r.end(wire.Status{State: wire.StateTimedOut, Error: wire.Errorf(wire.DeadlineExceeded, "run %s passed its deadline", r.work.RunID)})
	case errors.Is(cause, errShutdown):
		if !r.committed {
			r.d.settle(settleRelease, 0) // another runner of the pool takes it
			return
		}
		r.end(wire.Status{State: wire.StateFailed, Error: wire.Errorf(wire.ProviderTransportError, "runner %s shut down during the run", r.h.cfg.ID)})
	case errors.Is(cause, errStalled):
		r.retryOrFail(wire.Errorf(wire.ProviderStallError, "adapter %s produced nothing for %s (policy.stall_after); its transport was torn down",
			r.a.Name(), time.Duration(r.work.Policy.StallAfterMS)*time.Millisecond).Retry())
	case failure != nil:
		msg := failure.Content
		if msg == "" {
			msg = "provider reported an error"
		}
		// The terminal error keeps the class the provider's failure was
		// typed with (auth, quota, context...); an untyped one is a
		// ProviderStreamError, raised after the error-chunk boundary.
		class := wire.ProviderStreamError
		if c := failure.Metadata.ErrorClass; c.Known() && c.IsA(wire.ProviderError) {
			class = c
		}
		r.end(wire.Status{State: wire.StateFailed, Error: wire.Errorf(class, "%s", msg)})
	case streamErr != nil:
		r.retryOrFail(wire.AsError(streamErr))
	default:
		st := wire.Status{State: wire.StateSucceeded}
		if err := r.finishWorkspace(&st); err != nil {
			r.end(wire.Status{State: wire.StateFailed, Error: wire.AsError(err)})
			return
		}
		r.saveCheckpoint(ctx)
		r.end(st)
	}
}

// retryOrFail hands a retryable failure before first output back for
// another attempt, after retryDelay (exponential backoff with jitter, or
// the provider's Retry-After), while the policy allows one and that wait
// ends before the run's deadline. Otherwise it moves the run to its next
// fallback profile when it may (fallback.go), and fails it with we when
// not (a Retry-After past the deadline fails the run now with the
// provider's error rather than sleeping past it).
func (r *run) retryOrFail(we *wire.Error) {
	if !r.committed && we.Retryable && r.attempt < r.work.Policy.MaxAttempts {
		delay := retryDelay(we, r.attempt, r.h.cfg.RetryBackoff, rand.Int64N)
		if dl := r.deadline(); dl.IsZero() || time.Now().Add(delay).Before(dl) {
			r.h.d.Log.Info("retrying before first output", append(r.logger(), "err", we, "delay", delay)...)
			r.span.Retried(we)
			r.d.settle(settleRetry, delay)
			return
		}
		r.h.d.Log.Info("not retrying: the wait would pass the deadline", append(r.logger(), "err", we, "delay", delay)...)
	}
	if r.fallBack(we) {
		return
	}
	r.end(wire.Status{State: wire.StateFailed, Error: we})
}

// abandon gives the run up without publishing: another writer holds it,
// or this runner's lease was lost. The work is left unsettled: the
// heartbeat stops, and if the run is not over it comes back after the ack
// wait (a run with output is then ended failed, unless its events name a
// runner still holding it; an ended one's record is repaired and its work
// acked).
func (r *run) abandon(why string) {
	r.h.d.Log.Warn("abandoned run", append(r.logger(), "cause", why)...)
	r.d.release()
}

// endContext bounds ending a run, or moving it to a fallback: retried
// through a leader election until endTimeout past the deadline, and for
// at least endRetry, so that a run that succeeded is not failed by the
// sweeper because one election outlasted a short bound (the terminal
// status is fenced, so retrying is safe).
func (r *run) endContext() (context.Context, context.CancelFunc) {
	dl := time.Now().Add(endRetry)
	if d := r.deadline(); !d.IsZero() && d.Add(endTimeout).After(dl) {
		dl = d.Add(endTimeout)
	}
	return context.WithDeadline(context.Background(), dl)
}

// end ends the run by the ending protocol (pkg/runs), then settles the
// work. The work's heartbeat is kept until the end is recorded; the
// record is written with this runner, the attempt and whether it had
// output.
func (r *run) end(st wire.Status) {
	if st.State != wire.StateSucceeded && r.ws != nil && !r.wsFinished {
		// What the agent did before it failed, was cancelled or ran out
		// of time is what its user most needs to see or continue from.
		if err := r.finishWorkspace(&st); err != nil {
			r.h.d.Log.Warn("store the workspace of a run that did not succeed", append(r.logger(), "state", st.State, "err", err)...)
		}
	}
	r.closeWorkspace() // before the end is told: nothing of the run is left
	ctx, cancel := r.endContext()
	defer cancel()
	st.Profile, st.Pin, st.Attempt = r.work.Profile, &r.work.Pin, r.attempt
	if !r.started.IsZero() {
		r.summary.DurationMS = time.Since(r.started).Milliseconds()
	}
	sum := r.summary
	st.Summary = &sum
	r.span.Ended(st)
	r.run.Record.Owner, r.run.Record.Attempt, r.run.Record.Committed = r.h.cfg.ID, r.attempt, r.committed
	err := r.h.store.End(ctx, r.w, r.run, st)
	if errors.Is(err, events.ErrFenced) {
		// Other writers only ever end a run, or claim an attempt after
		// it. If the run's last event is still this attempt's own (this
		// runner, this lease's epoch, this attempt) and not terminal, it
		// is a publish of ours whose acknowledgement was lost: continue
		// after it.
		if w, t, oerr := r.h.store.Events().OpenTail(ctx, r.work.Tenant, r.work.RunID); oerr == nil &&
			t.Runner == r.h.cfg.ID && t.Epoch == r.lease.Epoch() && t.Attempt == r.attempt {
			r.author(w, r.lease.Epoch(), r.attempt)
			r.w = w
			err = r.h.store.End(ctx, w, r.run, st)
		}
	}
	if errors.Is(err, events.ErrFenced) {
		r.h.d.Log.Warn("run was ended by another writer", r.logger()...)
		r.d.settle(settleAck, 0)
		return
	}
	if errors.Is(err, runs.ErrUnrecorded) {
		// Ended, but the record does not say so yet: the work comes back
		// after a second and its next delivery repairs the record.
		r.final = st.State
		r.d.settle(settleRetry, time.Second)
		return
	}
	if err != nil {
		// The run stays unended: its work comes back after a second;
		// before output for another attempt, after output to be ended
		// failed (this runner no longer holds it, orphaned).
		r.h.d.Log.Error("publish terminal status", append(r.logger(), "state", st.State, "err", err)...)
		r.d.settle(settleRetry, time.Second)
		return
	}
	r.final = st.State
	if st.Error != nil {
		r.h.d.Log.Info("run ended", append(r.logger(), "state", st.State, "error", st.Error.Error())...)
	} else {
		r.h.d.Log.Debug("run ended", append(r.logger(), "state", st.State, "chunks", sum.Chunks)...)
	}
	r.d.settle(settleAck, 0)
}

// author makes w the writer of this attempt (events.Writer.Author) and,
// when the operator turned the sandbox off, has each status it publishes
// of a CLI run say so to a follower that reads contract v2.
func (r *run) author(w *events.Writer, epoch string, attempt int) {
	w.Author(r.h.cfg.ID, epoch, attempt)
	w.ReaderVersion(r.work.V) // a v1 submitter's chunks go one event each
	if r.h.cfg.Unsandboxed && r.work.V >= 2 && r.a.Capabilities().Transport == wire.TransportSubprocess {
		w.StampSandbox(wire.SandboxOff)
	}
}
