package router

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// forwardTimeout bounds a cancel forwarded to the owning runner, which
// answers once the run's transport is torn down (5 s grace at most).
const forwardTimeout = 15 * time.Second

// cancelHandler answers agentmesh.control.<tenant>.<run_id>.cancel. One
// router of the queue group answers each request: it cancels a queued run
// itself, forwards a running run's cancel to the runner that owns it, and
// answers for a run that has ended. A request it can answer from the
// record alone (a bad subject, no such run, a run that ended) is answered
// before the handler returns, so micro's stats count its errors; the rest
// are handled each on its own goroutine, owned by wg.
func (r *Router) cancelHandler(ctx context.Context, wg *sync.WaitGroup) micro.HandlerFunc {
	return func(req micro.Request) {
		if reply, ok := r.settledCancel(ctx, req.Subject()); ok {
			r.replyCancel(req, &reply, service.Reply)
			return
		}
		wg.Go(func() {
			reply := r.cancel(context.WithoutCancel(ctx), req.Subject())
			r.replyCancel(req, &reply, service.ReplyLater)
		})
	}
}

func (r *Router) replyCancel(req micro.Request, reply *wire.CancelReply, send func(micro.Request, wire.ContentType, []byte, *wire.Error) error) {
	b, err := wire.Marshal(reply)
	if err != nil {
		r.d.Log.Error("encode cancel reply", "err", err)
		return
	}
	_ = send(req, wire.TypeCancelReply.ContentType(), b, reply.Error)
}

// settledCancel is the answer to a cancel on subj that needs no action:
// a subject naming no valid run, a run with neither record nor events,
// or a run whose record has ended. ok is false for any other, and when
// the record cannot be read: cancel then decides.
func (r *Router) settledCancel(ctx context.Context, subj string) (reply wire.CancelReply, ok bool) {
	tenant, runID := cancelTarget(subj)
	reply = wire.CancelReply{V: wire.Version, RunID: runID}
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("run_id", runID)); err != nil {
		reply.Error = wire.Errorf(wire.AgenticRequestValidationError, "%v", err)
		return reply, true
	}
	// One attempt's time at most: past it, or through a leader election,
	// the goroutine of cancel takes over.
	ctx, stop := context.WithTimeout(ctx, jsretry.AttemptTimeout)
	defer stop()
	run, err := r.store.Get(ctx, tenant, runID)
	switch {
	case errors.Is(err, runs.ErrNotFound):
		if _, _, lerr := r.store.Events().Last(ctx, tenant, runID); errors.Is(lerr, jetstream.ErrMsgNotFound) {
			reply.Error = noRun(tenant, runID)
			return reply, true
		}
	case err == nil && run.Record.State.Terminal():
		reply.State, reply.Ended = run.Record.State, true
		return reply, true
	}
	return reply, false
}

// cancelTarget is the tenant and run id of a cancel subject:
// [prefix.]agentmesh.control.<tenant>.<run_id>.cancel.
func cancelTarget(subj string) (tenant, runID string) {
	toks := strings.Split(subj, ".")
	return toks[len(toks)-3], toks[len(toks)-2]
}

func noRun(tenant, runID string) *wire.Error {
	return wire.Errorf(wire.AgenticRequestValidationError, "no run %s for tenant %s", runID, tenant)
}

func (r *Router) cancel(ctx context.Context, subj string) wire.CancelReply {
	tenant, runID := cancelTarget(subj)
	reply := wire.CancelReply{V: wire.Version, RunID: runID}
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("run_id", runID)); err != nil {
		reply.Error = wire.Errorf(wire.AgenticRequestValidationError, "%v", err)
		return reply
	}
	cancelled := func(rec wire.RunRecord) wire.Status {
		return wire.Status{State: wire.StateCancelled, Profile: rec.Profile, Pin: rec.Pin, Attempt: rec.Attempt}
	}
	for attempt := 0; attempt < 100; attempt++ {
		run, err := r.store.Get(ctx, tenant, runID)
		if errors.Is(err, runs.ErrNotFound) {
			// The router creates the record while it publishes the run's
			// first events: events without a record yet mean it is on its
			// way.
			if _, _, lerr := r.store.Events().Last(ctx, tenant, runID); lerr == nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			reply.Error = noRun(tenant, runID)
			return reply
		}
		if err != nil {
			reply.Error = wire.Errorf(wire.ProviderTransportError, "read run %s: %v", runID, err).Retry()
			return reply
		}
		reply.State = run.Record.State
		if run.Record.State.Terminal() {
			reply.Ended = true
			return reply
		}
		t, err := r.store.Events().Tail(ctx, tenant, runID)
		if err != nil {
			reply.Error = wire.Errorf(wire.ProviderTransportError, "read the events of run %s: %v", runID, err).Retry()
			return reply
		}
		if t.Ended() {
			if _, err := r.store.Ended(ctx, tenant, runID); err != nil { // repairs the record
				reply.Error = wire.Errorf(wire.ProviderTransportError, "repair run %s: %v", runID, err).Retry()
				return reply
			}
			reply.State, reply.Ended = t.Event.Status.State, true
			return reply
		}
		if t.Runner == "" {
			// Queued: no runner holds it. The fenced terminal decides
			// between this cancel and a runner's fenced running status.
			done, err := r.store.EndQueued(ctx, tenant, runID, cancelled)
			if errors.Is(err, runs.ErrInTransition) {
				// Its routed status is on its way.
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if err != nil && !done {
				reply.Error = wire.Errorf(wire.ProviderTransportError, "cancel queued run %s: %v", runID, err).Retry()
				return reply
			}
			if done { // (an unrecorded end is repaired by the work's next delivery)
				reply.State, reply.Cancelled = wire.StateCancelled, true
				return reply
			}
			continue
		}
		// Running: the runner its events name tears its transport down and
		// answers.
		reply.State = wire.StateRunning
		forward := &nats.Msg{Subject: r.d.Names.RunnerCancel(t.Runner), Header: wire.TextContentType.Header(), Data: []byte(run.Key())}
		msg, err := r.d.NC.RequestMsg(forward, forwardTimeout)
		if errors.Is(err, nats.ErrNoResponders) {
			// The runner is gone. Before output its work is redelivered,
			// after output the sweeper would fail it; a cancel ends it now.
			owner, epoch, attempt := t.Runner, t.Epoch, t.Attempt
			done, err := r.store.EndUnowned(ctx, tenant, runID, func(_ wire.RunRecord, t events.Tail) bool {
				return t.Runner == owner && t.Epoch == epoch && t.Attempt == attempt
			}, cancelled)
			if err != nil && !done {
				reply.Error = wire.Errorf(wire.ProviderTransportError, "cancel orphaned run %s: %v", runID, err).Retry()
				return reply
			}
			if done {
				reply.State, reply.Cancelled = wire.StateCancelled, true
				return reply
			}
			continue
		}
		if err != nil {
			reply.Error = wire.Errorf(wire.ProviderTransportError, "forward cancel of %s to runner %s: %v", runID, t.Runner, err).Retry()
			return reply
		}
		fwd, err := wire.Decode[wire.CancelReply](msg.Data)
		if err != nil {
			reply.Error = wire.Errorf(wire.ProviderProtocolError, "runner %s reply: %v", t.Runner, err)
			return reply
		}
		if fwd.Error != nil && fwd.State == "" {
			// The runner no longer holds it (it just ended or moved): look again.
			time.Sleep(20 * time.Millisecond)
			continue
		}
		return fwd
	}
	reply.Error = wire.Errorf(wire.ProviderTransportError, "run %s kept changing state; try again", runID).Retry()
	return reply
}
