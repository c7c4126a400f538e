package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/cost"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/runs"
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
	lease     *runs.Lease // held from the claim
	committed bool
	// announced: claimFirst published the running status; runningErr: it
	// failed to, other than fenced.
	announced  bool
	runningErr error
	summary    wire.Summary
	started    time.Time
	session    string // the session id last stored for the conversation

	checkpoint []byte // continuation state the adapter saved during this attempt

	mu              sync.Mutex
	cancel          context.CancelCauseFunc
	cancelRequested bool

	done  chan struct{} // closed when the run has been handled
	final wire.State    // the terminal state this runner published, if any
}

func (r *run) requestCancel() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancelRequested = true
	if r.cancel != nil {
		r.cancel(errCancelled)
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
// deadline or its last attempt ends instead of running), opens the run's
// events, and records the claim. It settles the delivery and reports false
// when the run is not to be executed here. On the first delivery of work
// that carries the router's handoff it reads nothing (claimFirst).
func (r *run) claim(ctx context.Context) bool {
	if r.pastDeadline(ctx) {
		return false
	}
	if r.work.Handoff != nil && r.d.first {
		if ok, done := r.claimFirst(ctx); done {
			return ok
		}
	}
	for {
		if r.pastDeadline(ctx) {
			return false
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
		rec := cur.Record
		switch {
		case rec.State.Terminal():
			// Cancelled while queued, or ended by its last holder.
			r.d.settle(settleAck, 0)
			return false
		case rec.Committed:
			r.orphaned(ctx)
			return false
		case rec.State == wire.StateAccepted:
			// A router resuming a submission it stopped half way through
			// (a redelivery) dispatches before it records the run routed.
			r.d.settle(settleRetry, 50*time.Millisecond)
			return false
		case rec.Attempt >= r.work.Policy.MaxAttempts:
			// Every attempt the policy allows was claimed and none produced
			// output (their runners died or gave the work back).
			r.endUnowned(ctx, "is out of attempts", func(rec wire.RunRecord) wire.Status {
				return wire.Status{State: wire.StateFailed, Pin: rec.Pin, Attempt: rec.Attempt,
					Error: wire.Errorf(wire.ProviderTransportError, "run %s was attempted %d times without output; the attempt policy allows %d", rec.RunID, rec.Attempt, r.work.Policy.MaxAttempts)}
			})
			return false
		}
		// Open before claiming: a run that cannot be opened now (a leader
		// election) is handed back without spending an attempt.
		w, last, err := r.h.store.Events().OpenLast(ctx, r.work.Tenant, r.work.RunID)
		if errors.Is(err, events.ErrEnded) {
			if _, err := r.h.store.Ended(ctx, r.work.Tenant, r.work.RunID); err != nil {
				r.h.d.Log.Warn("repair run record", append(r.logger(), "err", err)...)
			}
			r.d.settle(settleAck, 0)
			return false
		}
		if err != nil {
			r.h.d.Log.Warn("open run events", append(r.logger(), "err", err)...)
			r.d.settle(settleRetry, time.Second)
			return false
		}
		if runs.HasOutput(last) {
			// An earlier attempt published output (and stopped before its
			// commit was stored): the run is never executed again.
			r.orphaned(ctx)
			return false
		}
		claimed, err := r.h.store.Claim(ctx, cur, r.h.cfg.ID)
		if errors.Is(err, runs.ErrChanged) {
			continue
		}
		if err != nil {
			r.h.d.Log.Warn("claim run record", append(r.logger(), "err", err)...)
			r.d.settle(settleRetry, time.Second)
			return false
		}
		lease, err := r.h.store.Hold(ctx, claimed, r.h.cfg.ID)
		if err != nil {
			r.h.d.Log.Warn("write lease", append(r.logger(), "err", err)...)
			r.d.settle(settleRetry, time.Second)
			return false
		}
		r.run, r.attempt, r.w, r.lease = claimed, claimed.Record.Attempt, w, lease
		return true
	}
}

// claimFirst claims the first delivery of work from the router's handoff,
// without reading: the record claim and the fenced running status are
// written at once. done is false when the handoff turned out stale (the
// record or the events moved on): claim then reads what they say.
func (r *run) claimFirst(ctx context.Context) (ok, done bool) {
	h := r.work.Handoff
	if h.Record.Attempt >= r.work.Policy.MaxAttempts || h.Record.State != wire.StateRouted {
		return false, false
	}
	w := r.h.store.Events().Resume(r.work.Tenant, r.work.RunID, h.Seq, h.StreamSeq)
	var (
		claimed  runs.Run
		claimErr error
		lease    *runs.Lease
		leaseErr error
		wg       sync.WaitGroup
	)
	routed := runs.Run{Record: h.Record, Rev: h.Rev}
	wg.Go(func() { claimed, claimErr = r.h.store.Claim(ctx, routed, r.h.cfg.ID) })
	wg.Go(func() { lease, leaseErr = r.h.store.Hold(ctx, routed, r.h.cfg.ID) })
	pub, stop := r.publishContext(ctx)
	defer stop()
	runErr := w.StatusFenced(pub, wire.Status{State: wire.StateRunning, Attempt: h.Record.Attempt + 1})
	wg.Wait()
	if lease != nil && (errors.Is(runErr, events.ErrFenced) || claimErr != nil) {
		// Not this attempt's to run (yet): hand the lease back first.
		r.h.store.Release(lease)
	}
	switch {
	case errors.Is(runErr, events.ErrFenced):
		// A cancel ended the queued run, or the handoff is stale.
		if ended, err := r.h.store.Ended(ctx, r.work.Tenant, r.work.RunID); err == nil && ended {
			r.h.d.Log.Debug("run ended before this attempt started", r.logger()...)
			r.d.settle(settleAck, 0)
			return false, true
		}
		return false, false
	case errors.Is(claimErr, runs.ErrChanged):
		return false, false
	case claimErr != nil:
		r.h.d.Log.Warn("claim run record", append(r.logger(), "err", claimErr)...)
		r.d.settle(settleRetry, time.Second)
		return false, true
	case leaseErr != nil:
		r.h.d.Log.Warn("write lease", append(r.logger(), "err", leaseErr)...)
		r.run = claimed
		r.d.settle(settleRetry, time.Second)
		return false, true
	}
	r.run, r.attempt, r.w, r.lease = claimed, claimed.Record.Attempt, w, lease
	if runErr != nil {
		r.runningErr = runErr
	} else {
		r.announced = true
	}
	return true, true
}

// orphaned handles work delivered again for a run that has published
// output and not ended: its work stays in the stream until the run's end
// is recorded. While its lease is held its runner is alive (its work came
// back only because a heartbeat was late): the work is handed back for
// another ack wait. Without one the runner is gone: the run ends failed
// here, as the sweeper ends it when it sees the lease expire.
func (r *run) orphaned(ctx context.Context) {
	held, err := r.h.store.LeaseHeld(ctx, subject.RunKey(r.work.Tenant, r.work.RunID))
	if err != nil {
		r.h.d.Log.Warn("read the lease of a run with output", append(r.logger(), "err", err)...)
		r.d.settle(settleRetry, time.Second)
		return
	}
	if held {
		r.d.settle(settleRetry, r.h.cfg.AckWait)
		return
	}
	ended, err := r.h.store.EndOrphaned(ctx, r.work.Tenant, r.work.RunID, func(rec wire.RunRecord) wire.Status {
		return wire.Status{State: wire.StateFailed, Pin: rec.Pin, Attempt: rec.Attempt,
			Error: wire.Errorf(wire.ProviderTransportError, "the runner of run %s stopped after its first output", rec.RunID)}
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
		return wire.Status{State: wire.StateTimedOut, Pin: rec.Pin, Attempt: rec.Attempt,
			Error: wire.Errorf(wire.DeadlineExceeded, "run %s passed its deadline before it could run", rec.RunID)}
	})
	return true
}

// endUnowned ends a run this delivery found unable to run (past its
// deadline, out of attempts) and done with, unless it has ended or is
// committed (then orphaned decides).
func (r *run) endUnowned(ctx context.Context, why string, status func(wire.RunRecord) wire.Status) {
	ended, err := r.h.store.EndUnowned(ctx, r.work.Tenant, r.work.RunID,
		func(rec wire.RunRecord) bool { return !rec.Committed }, status)
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
	// Ended already, or committed: then its work stays until its end.
	cur, err := r.h.store.Get(ctx, r.work.Tenant, r.work.RunID)
	switch {
	case err != nil && !errors.Is(err, runs.ErrNotFound):
		r.d.settle(settleRetry, time.Second)
	case err == nil && cur.Record.Committed && !cur.Record.State.Terminal():
		r.orphaned(ctx)
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
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	if dl := r.deadline(); !dl.IsZero() {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, dl, errDeadline)
		defer stop()
	}
	r.mu.Lock()
	r.cancel = cancel
	if r.cancelRequested {
		cancel(errCancelled)
	}
	r.mu.Unlock()
	r.lease.Keep(func(err error) {
		r.h.d.Log.Error("lease lost; abandoning run", append(r.logger(), "err", err)...)
		cancel(errLeaseLost)
	})

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
				r.releaseLease()
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
		state, err := r.loadCheckpoint(ctx)
		if err != nil {
			r.conclude(ctx, err, nil)
			return
		}
		call.Checkpoint = state
		call.SaveCheckpoint = func(b []byte) { r.checkpoint = bytes.Clone(b) }
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
func (r *run) stream(ctx, pub context.Context, cancel context.CancelCauseFunc, call adapter.Call) (streamErr error, failure *wire.Chunk) {
	defer r.recoverAdapter(&streamErr)
	// The stall watchdog looks at when the adapter last yielded, rather
	// than being reset at every chunk: one clock read a chunk.
	var last atomic.Int64 // unix ns of the adapter's last yield
	last.Store(time.Now().UnixNano())
	if stall := time.Duration(r.work.Policy.StallAfterMS) * time.Millisecond; stall > 0 {
		var watchdog *time.Timer
		watchdog = time.AfterFunc(stall, func() {
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
			if err := r.commit(ctx, pub, cancel, c); err != nil {
				return err, nil
			}
		} else if r.lease.StaleAt(now) {
			// A process paused past its lease (a long GC, SIGSTOP) must not
			// publish what it had in hand: the sweeper may have ended the run.
			r.h.d.Log.Error("lease not renewed in time; abandoning run", r.logger()...)
			cancel(errLeaseLost)
			return nil, nil
		} else if err := r.w.ChunkAsync(pub, c); err != nil {
			return wire.Errorf(wire.ProviderTransportError, "publish chunk %d: %v", r.w.Seq()+1, err), nil
		}
		r.account(&c)
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
// id under the run's conversation (D3). Only a published system chunk
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

// loadCheckpoint returns the conversation's continuation state, or nil for
// a fresh conversation. A checkpoint another adapter wrote fails closed
// with PinMismatch: its state means nothing to this adapter, and running
// without it would silently lose the conversation.
func (r *run) loadCheckpoint(ctx context.Context) ([]byte, error) {
	e, err := r.h.checkpoints.Get(ctx, subject.ConversationKey(r.work.Tenant, r.work.Conversation))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, wire.Errorf(wire.ProviderTransportError, "read checkpoint of %s: %v", r.work.Conversation, err).Retry()
	}
	cp, err := wire.Decode[wire.Checkpoint](e.Value())
	if err != nil {
		return nil, wire.Errorf(wire.ProviderProtocolError, "checkpoint of %s: %v", r.work.Conversation, err)
	}
	if cp.Adapter != r.a.Name() {
		return nil, wire.Errorf(wire.PinMismatch, "conversation %s was checkpointed by adapter %s; this run's adapter is %s", r.work.Conversation, cp.Adapter, r.a.Name())
	}
	return cp.State, nil
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
// replayed. The record's commit and the first chunk are written at once
// (the lease is held since the claim). The chunk is fenced after the
// running status, so it cannot land after another writer ended the run;
// a runner that stops before the commit is stored leaves output on the
// run's events, which the sweeper (once the lease expires) and the next
// delivery of its work find, so it is never re-executed either.
func (r *run) commit(ctx, pub context.Context, cancel context.CancelCauseFunc, first wire.Chunk) error {
	var (
		committed runs.Run
		commitErr error
		wg        sync.WaitGroup
	)
	wg.Go(func() { committed, commitErr = r.h.store.Commit(ctx, r.run) })
	chunkErr := r.w.ChunkFenced(pub, first)
	wg.Wait()
	if commitErr == nil {
		r.run = committed
	}
	switch {
	case errors.Is(chunkErr, events.ErrFenced):
		err := fmt.Errorf("%w: first chunk: %w", errNotOwner, chunkErr)
		cancel(err)
		return err
	case errors.Is(commitErr, runs.ErrChanged):
		err := fmt.Errorf("%w: commit: %w", errNotOwner, commitErr)
		cancel(err)
		return err
	case chunkErr == nil && commitErr != nil:
		// The output is out: the run can only end now, failed (fenced after
		// this runner's own events, so it still may).
		r.committed = true
		return wire.Errorf(wire.ProviderTransportError, "commit the run at its first output: %v", commitErr)
	case commitErr != nil:
		// The record is not committed, and the chunk may or may not be
		// stored: another delivery decides on what the events say.
		return wire.Errorf(wire.ProviderTransportError, "commit the run at its first output: %v", commitErr).Retry()
	case chunkErr != nil:
		r.committed = true
		return wire.Errorf(wire.ProviderTransportError, "publish first chunk: %v", chunkErr)
	}
	r.committed = true
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
			r.releaseLease()
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
		r.saveCheckpoint(ctx)
		r.end(wire.Status{State: wire.StateSucceeded})
	}
}

// retryOrFail hands a retryable failure before first output back for
// another attempt while the policy allows one, and fails the run otherwise.
func (r *run) retryOrFail(we *wire.Error) {
	if !r.committed && we.Retryable && r.attempt < r.work.Policy.MaxAttempts {
		r.h.d.Log.Info("retrying before first output", append(r.logger(), "err", we)...)
		r.releaseLease()
		r.d.settle(settleRetry, time.Duration(r.attempt)*r.h.cfg.RetryBackoff)
		return
	}
	r.end(wire.Status{State: wire.StateFailed, Error: we})
}

// releaseLease hands back the lease of an attempt that gives its work
// back before output, before the work is settled.
func (r *run) releaseLease() {
	if r.lease != nil {
		r.h.store.Release(r.lease)
	}
}

// abandon gives the run up without publishing: another writer holds it.
// The work is left unsettled: the heartbeat stops, and if the run is not
// over it comes back after the ack wait (a committed run's next delivery
// finds its output and leaves it to the sweeper or ends it, as the
// record says; an ended one's repairs the record and is acked).
func (r *run) abandon(why string) {
	r.h.d.Log.Warn("abandoned run", append(r.logger(), "cause", why)...)
	if r.lease != nil {
		r.lease.Stop()
	}
	r.d.release()
}

// end ends the run by the ending protocol (pkg/runs), then settles the
// work. The work's heartbeat and the lease are kept until the terminal
// status is published.
func (r *run) end(st wire.Status) {
	// Ending retries through a leader election until endTimeout past the
	// deadline, and for at least endRetry: a run that succeeded must not
	// be failed by the sweeper because one election outlasted a short
	// bound (the terminal status is fenced, so retrying is safe).
	dl := time.Now().Add(endRetry)
	if d := r.deadline(); !d.IsZero() && d.Add(endTimeout).After(dl) {
		dl = d.Add(endTimeout)
	}
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	st.Pin, st.Attempt = &r.work.Pin, r.attempt
	if !r.started.IsZero() {
		r.summary.DurationMS = time.Since(r.started).Milliseconds()
	}
	sum := r.summary
	st.Summary = &sum
	err := r.h.store.End(ctx, r.w, r.run, st, r.lease)
	if errors.Is(err, events.ErrFenced) {
		// Other writers only ever end a run, or claim an attempt after
		// taking the record from this one. If this attempt still holds the
		// record and the run has not ended, the event after our last
		// acknowledged one is our own (a publish whose acknowledgement was
		// lost): continue after it.
		if cur, gerr := r.h.store.Get(ctx, r.work.Tenant, r.work.RunID); gerr == nil && !cur.Record.State.Terminal() &&
			cur.Record.Owner == r.h.cfg.ID && cur.Record.Attempt == r.attempt {
			if w, oerr := r.h.store.Events().Open(ctx, r.work.Tenant, r.work.RunID); oerr == nil {
				r.w = w
				err = r.h.store.End(ctx, w, cur, st, r.lease)
			}
		}
	}
	if errors.Is(err, events.ErrFenced) {
		r.h.d.Log.Warn("run was ended by another writer", r.logger()...)
		if r.lease != nil {
			r.lease.Stop()
		}
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
		// The run stays unended: before output its work comes back for
		// another attempt; after output the lease stops and the sweeper
		// ends the run once it expires.
		r.h.d.Log.Error("publish terminal status", append(r.logger(), "state", st.State, "err", err)...)
		if r.lease != nil {
			r.lease.Stop()
		}
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
