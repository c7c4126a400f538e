package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/cost"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/jsretry"
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
)

// routingWaits are the pauses before reading again a record the router has
// not yet marked routed; after them the work is handed back for later.
var routingWaits = []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond, 16 * time.Millisecond}

// endTimeout bounds the publishing of a terminal status and the record
// update after the run's own context has ended.
const endTimeout = 10 * time.Second

// run is one delivery of one work item.
type run struct {
	h       *Host
	a       adapter.Adapter
	msg     jetstream.Msg
	work    wire.Work
	attempt int // set by claim
	key     string

	rec       wire.RunRecord
	rev       uint64
	w         *events.Writer
	committed bool
	summary   wire.Summary
	started   time.Time
	session   string // the session id last stored for the conversation

	checkpoint []byte // continuation state the adapter saved during this attempt

	mu              sync.Mutex
	cancel          context.CancelCauseFunc
	cancelRequested bool

	stopLease func()       // stops the lease heartbeat and waits for it
	renewed   atomic.Int64 // unix ns of the lease's last write, once committed

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

// claim takes the run record for this attempt. It settles the message and
// reports false when the run is not to be executed here.
func (r *run) claim(ctx context.Context) bool {
	routing := 0
	for {
		entry, err := r.h.runs.Get(ctx, r.key)
		if err != nil {
			r.h.d.Log.Warn("read run record", append(r.logger(), "err", err)...)
			_ = r.msg.NakWithDelay(time.Second)
			return false
		}
		rec, err := wire.Decode[wire.RunRecord](entry.Value())
		if err != nil {
			r.h.d.Log.Error("undecodable run record; dropping work", append(r.logger(), "err", err)...)
			_ = r.msg.Term()
			return false
		}
		if rec.State == wire.StateAccepted && routing < len(routingWaits) {
			// The router dispatches before it records the run as routed
			// (so a full queue is a rejection straight from accepted);
			// that record follows within a round trip or two.
			time.Sleep(routingWaits[routing])
			routing++
			continue
		}
		switch {
		case rec.State.Terminal() || rec.Committed:
			// Cancelled while queued, or held by the runner that produced output.
			_ = r.msg.Ack()
			return false
		case rec.State == wire.StateAccepted:
			// The router has not finished routing it yet.
			_ = r.msg.NakWithDelay(50 * time.Millisecond)
			return false
		}
		// Attempts are counted on the record, not from deliveries: a delivery
		// that finds the run still being routed is not an attempt.
		rec.State, rec.Owner, rec.Attempt, rec.Updated = wire.StateRunning, r.h.cfg.ID, rec.Attempt+1, time.Now().UnixMilli()
		rev, err := r.put(ctx, rec, entry.Revision())
		if isConflict(err) {
			continue
		}
		if err != nil {
			r.h.d.Log.Warn("claim run record", append(r.logger(), "err", err)...)
			_ = r.msg.NakWithDelay(time.Second)
			return false
		}
		r.rec, r.rev, r.attempt = rec, rev, rec.Attempt
		return true
	}
}

func (r *run) put(ctx context.Context, rec wire.RunRecord, rev uint64) (uint64, error) {
	b, err := wire.Marshal(&rec)
	if err != nil {
		return 0, err
	}
	return r.h.runs.Update(ctx, r.key, b, rev)
}

func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

func (r *run) exec(parent context.Context) {
	r.key = subject.RunKey(r.work.Tenant, r.work.RunID)
	if !r.claim(parent) {
		return
	}
	var hb sync.WaitGroup
	defer hb.Wait() // deferred first, so it runs after the run's context is cancelled
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	if r.work.Deadline > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, time.UnixMilli(r.work.Deadline), errDeadline)
		defer stop()
	}
	r.mu.Lock()
	r.cancel = cancel
	if r.cancelRequested {
		cancel(errCancelled)
	}
	r.mu.Unlock()

	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	hb.Go(func() { r.keepInProgress(hbCtx) })

	var err error
	r.w, err = r.h.log.Open(ctx, r.work.Tenant, r.work.RunID)
	if errors.Is(err, events.ErrEnded) {
		_ = r.msg.Ack()
		return
	}
	if err != nil {
		r.h.d.Log.Warn("open run events", append(r.logger(), "err", err)...)
		_ = r.msg.NakWithDelay(time.Second)
		return
	}
	if ctx.Err() != nil {
		r.conclude(ctx, nil, nil)
		return
	}
	if r.attempt > r.work.Policy.MaxAttempts {
		r.end(wire.Status{State: wire.StateFailed, Error: wire.Errorf(wire.ProviderTransportError,
			"run %s was attempted %d times; the attempt policy allows %d", r.work.RunID, r.attempt, r.work.Policy.MaxAttempts)})
		return
	}
	// Publishes are not cut short by a cancel or the deadline: a publish
	// abandoned mid-flight may still be stored, and the writer's seq would
	// no longer match the stream (the terminal status could then never be
	// published). JetStream's own publish timeout bounds them.
	pub := context.WithoutCancel(ctx)
	if err := r.w.Status(pub, wire.Status{State: wire.StateRunning, Attempt: r.attempt}); err != nil {
		r.conclude(ctx, err, nil)
		return
	}
	req, err := r.a.Validate(r.work.Request)
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
	var streamErr error
	var failure *wire.Chunk
	for c, err := range r.a.Stream(ctx, call) {
		if err != nil {
			streamErr = err
			break
		}
		if c.Type == wire.ChunkResult && c.Metadata.Usage != nil {
			c.Metadata.Cost = r.price(*c.Metadata.Usage)
		}
		if !r.committed {
			stopHB()
			if err := r.commit(ctx, pub, &hb, cancel, c); err != nil {
				streamErr = err
				break
			}
		} else if r.leaseStale() {
			// A process paused past its lease (a long GC, SIGSTOP) must not
			// publish what it had in hand: the sweeper may have ended the run.
			r.h.d.Log.Error("lease not renewed in time; abandoning run", r.logger()...)
			cancel(errLeaseLost)
			break
		} else if err := r.w.ChunkAsync(pub, c); err != nil {
			streamErr = wire.Errorf(wire.ProviderTransportError, "publish chunk: %v", err)
			break
		}
		r.account(c)
		if c.Type == wire.ChunkSystem {
			r.confirmSession(ctx, c.Metadata.SessionID)
		}
		if c.Type == wire.ChunkError {
			failure = &c
			break // nothing may follow a provider-declared failure
		}
	}
	r.conclude(ctx, streamErr, failure)
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

// loadCheckpoint returns the conversation's continuation state for this
// adapter, or nil for a fresh conversation. A checkpoint another adapter
// wrote is not handed over: its state means nothing to this one.
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
		return nil, nil
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

// keepInProgress stops the work from being redelivered while this attempt
// has not produced output yet.
func (r *run) keepInProgress(ctx context.Context) {
	t := time.NewTicker(r.h.cfg.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = r.msg.InProgress()
		}
	}
}

// commit crosses the first-output boundary: from here the run is never
// replayed. The record and the lease say so before the chunk is published,
// so a runner dying in between is failed by the sweeper, never re-executed.
func (r *run) commit(ctx, pub context.Context, hb *sync.WaitGroup, cancel context.CancelCauseFunc, first wire.Chunk) error {
	lease, err := wire.Marshal(&wire.Lease{V: wire.Version, RunID: r.work.RunID, Tenant: r.work.Tenant, Owner: r.h.cfg.ID})
	if err != nil {
		return err
	}
	leaseRev, err := r.h.leases.Put(ctx, r.key, lease)
	if err != nil {
		return fmt.Errorf("write lease: %w", err)
	}
	rec := r.rec
	rec.Committed, rec.Updated = true, time.Now().UnixMilli()
	rev, err := r.put(ctx, rec, r.rev)
	if isConflict(err) {
		_ = r.h.leases.Delete(ctx, r.key)
		cancel(errNotOwner)
		return errNotOwner
	}
	if err != nil {
		_ = r.h.leases.Delete(ctx, r.key)
		return fmt.Errorf("commit run record: %w", err)
	}
	r.rec, r.rev, r.committed = rec, rev, true
	r.renewed.Store(time.Now().UnixNano())
	leaseCtx, stop := context.WithCancel(ctx)
	leaseDone := make(chan struct{})
	r.stopLease = func() { stop(); <-leaseDone }
	hb.Go(func() { defer close(leaseDone); r.keepLease(leaseCtx, cancel, lease, leaseRev) })
	if err := r.w.Chunk(pub, first); err != nil {
		return err
	}
	// Bounded: during a failover the ack's reply may never come, and the
	// run must not wait for it.
	ackCtx, cancelAck := context.WithTimeout(ctx, jsretry.AttemptTimeout)
	err = r.msg.DoubleAck(ackCtx)
	cancelAck()
	if err != nil {
		// The record is committed, so a redelivery is dropped unexecuted.
		r.h.d.Log.Warn("ack work at first output", append(r.logger(), "err", err)...)
	}
	r.h.d.Metrics.TimeToFirstChunk.WithLabelValues(r.a.Name()).Observe(time.Since(time.UnixMilli(r.rec.Created)).Seconds())
	return nil
}

// leaseStale reports whether the lease has gone unrenewed for two thirds
// of its TTL (renewals come every third): the run may already be another
// writer's to end.
func (r *run) leaseStale() bool {
	return time.Since(time.Unix(0, r.renewed.Load())) > 2*r.h.leaseTTL/3
}

// keepLease renews the lease every TTL/3. If a renewal fails the run is
// cancelled with errLeaseLost: it stops publishing and tears down.
func (r *run) keepLease(ctx context.Context, cancel context.CancelCauseFunc, lease []byte, rev uint64) {
	t := time.NewTicker(r.h.leaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			next, err := r.h.leases.Update(ctx, r.key, lease, rev)
			if err != nil {
				if ctx.Err() == nil {
					r.h.d.Log.Error("lease lost; abandoning run", append(r.logger(), "err", err)...)
					cancel(errLeaseLost)
				}
				return
			}
			rev = next
			r.renewed.Store(time.Now().UnixNano())
		}
	}
}

func (r *run) account(c wire.Chunk) {
	r.summary.Chunks++
	r.h.d.Metrics.Chunks.WithLabelValues(r.a.Name()).Inc()
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
		// Another writer (the sweeper, or a cancel of an orphaned run) owns
		// the run's end now; this runner publishes nothing more.
		r.h.d.Log.Warn("abandoned run", append(r.logger(), "cause", cause)...)
		if !r.committed {
			_ = r.msg.Ack()
		}
	case errors.Is(cause, errCancelled):
		r.end(wire.Status{State: wire.StateCancelled})
	case errors.Is(cause, errDeadline):
		r.end(wire.Status{State: wire.StateTimedOut, Error: wire.Errorf(wire.DeadlineExceeded, "run %s passed its deadline", r.work.RunID)})
	case errors.Is(cause, errShutdown):
		if !r.committed {
			_ = r.msg.Nak() // another runner of the pool takes it
			return
		}
		r.end(wire.Status{State: wire.StateFailed, Error: wire.Errorf(wire.ProviderTransportError, "runner %s shut down during the run", r.h.cfg.ID)})
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
		we := wire.AsError(streamErr)
		if !r.committed && we.Retryable && r.attempt < r.work.Policy.MaxAttempts {
			r.h.d.Log.Info("retrying before first output", append(r.logger(), "err", we)...)
			_ = r.msg.NakWithDelay(time.Duration(r.attempt) * r.h.cfg.RetryBackoff)
			return
		}
		r.end(wire.Status{State: wire.StateFailed, Error: we})
	default:
		r.saveCheckpoint(ctx)
		r.end(wire.Status{State: wire.StateSucceeded})
	}
}

// end publishes the run's terminal status, fenced, then records it and
// releases the work and the lease.
func (r *run) end(st wire.Status) {
	if r.stopLease != nil {
		r.stopLease()
	}
	ctx, cancel := context.WithTimeout(context.Background(), endTimeout)
	defer cancel()
	st.Pin, st.Attempt = &r.work.Pin, r.attempt
	if !r.started.IsZero() {
		r.summary.DurationMS = time.Since(r.started).Milliseconds()
	}
	sum := r.summary
	st.Summary = &sum
	err := r.w.Terminal(ctx, st)
	if errors.Is(err, events.ErrFenced) {
		// Other writers only ever end a run. If the run has not ended, the
		// event after our last acknowledged one is our own (a publish whose
		// acknowledgement was lost): continue after it.
		if w, oerr := r.h.log.Open(ctx, r.work.Tenant, r.work.RunID); oerr == nil {
			r.w = w
			err = r.w.Terminal(ctx, st)
		}
	}
	if errors.Is(err, events.ErrFenced) {
		r.h.d.Log.Warn("run was ended by another writer", r.logger()...)
		if !r.committed {
			_ = r.msg.Ack()
		}
		return
	}
	if err != nil {
		r.h.d.Log.Error("publish terminal status", append(r.logger(), "err", err)...)
		if !r.committed {
			_ = r.msg.NakWithDelay(time.Second)
		}
		return
	}
	r.final = st.State
	r.h.d.Metrics.Runs.WithLabelValues(string(st.State), r.a.Name()).Inc()
	if st.Error != nil {
		r.h.d.Log.Info("run ended", append(r.logger(), "state", st.State, "error", st.Error.Error())...)
	} else {
		r.h.d.Log.Debug("run ended", append(r.logger(), "state", st.State, "chunks", sum.Chunks)...)
	}
	rec := r.rec
	rec.State, rec.Error, rec.Updated = st.State, st.Error, time.Now().UnixMilli()
	if _, err := r.put(ctx, rec, r.rev); isConflict(err) {
		// Someone touched the record since our last write: write the end on
		// top of what is there now, keeping its other fields.
		if entry, gerr := r.h.runs.Get(ctx, r.key); gerr == nil {
			if cur, derr := wire.Decode[wire.RunRecord](entry.Value()); derr == nil {
				cur.State, cur.Error, cur.Updated = st.State, st.Error, rec.Updated
				_, err = r.put(ctx, cur, entry.Revision())
			}
		}
		if err != nil && !isConflict(err) {
			r.h.d.Log.Error("record terminal state", append(r.logger(), "err", err)...)
		}
	} else if err != nil {
		r.h.d.Log.Error("record terminal state", append(r.logger(), "err", err)...)
	}
	if r.committed {
		_ = r.h.leases.Delete(ctx, r.key)
	} else {
		_ = r.msg.Ack()
	}
}
