package runner

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// canFallBack reports whether a failure before first output may be mended
// by another profile (docs/contract.md §4.13): the provider unavailable,
// refusing the credential or out of quota, or a retryable failure whose
// attempts are used up. A request the provider refused (a 400) fails on
// every profile alike, and is never moved.
func canFallBack(we *wire.Error) bool {
	return we.Retryable || we.Class.IsA(wire.ProviderUnavailable) ||
		we.Class.IsA(wire.ProviderAuthError) || we.Class.IsA(wire.ProviderQuotaError)
}

// fallBack moves a run that failed for good before its first output to
// the next profile of its work's fallback list, and reports whether it
// took the run over (then it has settled the work). It never moves a run
// with output, nor a conversation that has a checkpoint (or whose
// checkpoint this attempt did not read): its pin holds.
//
// The move's commit is a routed status naming the next profile and its
// pin, fenced after this attempt's last event: a cancel or the sweeper
// that ended the run first wins, and only one delivery of the work moves
// it. The record is then moved by compare-and-set (runs.Store.Move), the
// next profile's work published under its own Nats-Msg-Id
// (subject.FallbackMsgID, deduplicated) and this work acked last: a
// runner that dies part way leaves this work to come back, and its next
// delivery finishes the move (resumeMove).
func (r *run) fallBack(we *wire.Error) bool {
	pinned := r.work.Conversation != "" && !r.fresh
	if r.committed || pinned || len(r.work.Fallback) == 0 || !canFallBack(we) {
		return false
	}
	ctx, cancel := r.endContext()
	defer cancel()
	next := r.work.Fallback[0]
	pin := next.Pin
	// Written as the router writes a routed status (no runner headers): the
	// run is queued again, a cancel ends it as a queued run, and the next
	// profile's attempts are counted from one.
	w := r.h.store.Events().Resume(r.work.Tenant, r.work.RunID, r.w.Seq(), r.w.Last())
	err := w.StatusFenced(ctx, wire.Status{State: wire.StateRouted, Profile: next.Profile, Pin: &pin, Error: we})
	if errors.Is(err, events.ErrFenced) {
		if ended, eerr := r.h.store.Ended(ctx, r.work.Tenant, r.work.RunID); eerr == nil && ended {
			r.d.settle(settleAck, 0)
			return true
		}
		r.abandon("another writer moved on from the run's events before its fallback")
		return true
	}
	if err != nil {
		// Perhaps stored: the next delivery reads the events and finishes
		// the move, or tries this profile again.
		r.h.d.Log.Warn("publish the fallback's routed status", append(r.logger(), "err", err)...)
		r.d.settle(settleRetry, time.Second)
		return true
	}
	r.h.d.Metrics.Fallbacks.WithLabelValues(r.work.Profile, next.Profile).Inc()
	r.h.d.Log.Info("falling back before first output", append(r.logger(), "to", next.Profile, "err", we)...)
	r.finishMove(ctx, next)
	return true
}

// resumeMove finishes or drops, on a delivery's claim, the work of a run
// that is moving or moved to a fallback profile (cur and t: its record
// and its last event), and reports whether it settled the work. Work of
// a profile the run has moved away from is only acked, once the next
// profile's work is known to be published.
func (r *run) resumeMove(ctx context.Context, cur runs.Run, t events.Tail) bool {
	st := t.Event.Status
	routedTo := func(p wire.Pin) bool {
		return st != nil && st.State == wire.StateRouted && st.Pin != nil && runs.SamePin(*st.Pin, p)
	}
	var next *wire.Fallback
	if len(r.work.Fallback) > 0 {
		next = &r.work.Fallback[0]
	}
	switch {
	case cur.Record.Pin != nil && !runs.SamePin(*cur.Record.Pin, r.work.Pin):
		// The record moved on from this work's profile. While the move's
		// routed status is the last event and no runner took the next
		// work, that work may be unpublished (this runner's predecessor
		// died before it published it): it is published unless it is
		// queued (a publish again past the dedupe window would be a
		// second copy).
		if next != nil && runs.SamePin(*cur.Record.Pin, next.Pin) && routedTo(next.Pin) {
			queued, err := r.h.store.Queued(ctx, r.h.d.Names.Work(string(next.Transport), next.Adapter, r.work.Tenant),
				subject.FallbackMsgID(r.work.Tenant, r.work.RunID, next.Profile))
			if err != nil {
				r.h.d.Log.Warn("look for a fallback's work", append(r.logger(), "to", next.Profile, "err", err)...)
				r.d.settle(settleRetry, time.Second)
				return true
			}
			if !queued {
				r.finishMove(ctx, *next)
				return true
			}
		}
		r.d.settle(settleAck, 0)
		return true
	case next != nil && !routedTo(r.work.Pin) && routedTo(next.Pin):
		// The move committed (its routed status), the record not moved yet.
		r.finishMove(ctx, *next)
		return true
	}
	return false
}

// finishMove moves the record to next, publishes next's work and acks
// this work, in that order; a step that fails leaves the work to come
// back after a second (resumeMove takes it up again).
func (r *run) finishMove(ctx context.Context, next wire.Fallback) {
	_, moved, err := r.h.store.Move(ctx, r.work.Tenant, r.work.RunID, next)
	if err != nil {
		r.h.d.Log.Warn("move run record to its fallback", append(r.logger(), "to", next.Profile, "err", err)...)
		r.d.settle(settleRetry, time.Second)
		return
	}
	if !moved { // ended first (a cancel of the queued run)
		r.d.settle(settleAck, 0)
		return
	}
	if err := r.dispatchFallback(ctx, next); err != nil {
		// A full queue of the next adapter included: the move waits for
		// room until the run's deadline, when its next delivery ends it.
		r.h.d.Log.Warn("dispatch run to its fallback", append(r.logger(), "to", next.Profile, "err", err)...)
		r.d.settle(settleRetry, time.Second)
		return
	}
	r.d.settle(settleAck, 0)
}

// dispatchFallback publishes the run's work for next, with what is left
// of the fallback list, to next's adapter's subject (it may be another
// transport and another runner pool). It carries no handoff: its runner
// claims it from the record and the events.
func (r *run) dispatchFallback(ctx context.Context, next wire.Fallback) error {
	wk := r.work
	wk.Profile, wk.Adapter, wk.Pin, wk.Policy = next.Profile, next.Adapter, next.Pin, next.Policy
	wk.Fallback = slices.Clone(r.work.Fallback[1:])
	wk.SessionID, wk.Handoff = "", nil // a session is its own adapter's
	b, err := wire.Marshal(&wk)
	if err != nil {
		return err
	}
	msg := nats.NewMsg(r.h.d.Names.Work(string(next.Transport), next.Adapter, wk.Tenant))
	for k, v := range r.d.msg.Headers() { // the trace context and the content type
		msg.Header[k] = slices.Clone(v)
	}
	msg.Header.Set(jetstream.MsgIDHeader, subject.FallbackMsgID(wk.Tenant, wk.RunID, next.Profile))
	msg.Data = b
	_, err = r.h.d.JS.PublishMsg(ctx, msg)
	return err
}
