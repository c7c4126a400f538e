package router

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// sessionForwardTimeout bounds a follow-up prompt or a permission answer
// forwarded to the session's runner, which answers at once.
const sessionForwardTimeout = 5 * time.Second

// A session control request (docs/contract.md §6.1): a follow-up prompt
// on agentmesh.control.<tenant>.<run_id>.input or a permission answer on
// .permission. One router of the queue group reads the run's record and
// events, refuses what cannot reach a live session with a typed error,
// and forwards the rest, with the run's key, to the runner its events
// name; the runner's reply is the answer.
type sessionRequest struct {
	verb    string
	decode  func([]byte) (runID string, err error)
	stamp   func(b []byte, key string) ([]byte, error) // the body with RunKey set
	refuse  func(runID string, e *wire.Error) []byte
	errorOf func(reply []byte) *wire.Error // the runner's reply's error
	reply   wire.MessageType
	forward func(n subject.Names, runner string) string
}

var inputRequest = sessionRequest{
	verb: "input",
	decode: func(b []byte) (string, error) {
		in, err := wire.Decode[wire.Input](b)
		return in.RunID, err
	},
	stamp: func(b []byte, key string) ([]byte, error) {
		in, err := wire.Decode[wire.Input](b)
		if err != nil {
			return nil, err
		}
		in.RunKey = key
		return wire.Marshal(&in)
	},
	refuse: func(runID string, e *wire.Error) []byte {
		b, _ := wire.Marshal(&wire.InputReply{V: 3, RunID: runID, Error: e})
		return b
	},
	errorOf: func(b []byte) *wire.Error {
		rep, err := wire.Decode[wire.InputReply](b)
		if err != nil {
			return wire.Errorf(wire.ProviderProtocolError, "the runner's input reply: %v", err)
		}
		return rep.Error
	},
	reply:   wire.TypeInputReply,
	forward: subject.Names.RunnerInput,
}

var permissionRequest = sessionRequest{
	verb: "permission",
	decode: func(b []byte) (string, error) {
		a, err := wire.Decode[wire.PermissionAnswer](b)
		return a.RunID, err
	},
	stamp: func(b []byte, key string) ([]byte, error) {
		a, err := wire.Decode[wire.PermissionAnswer](b)
		if err != nil {
			return nil, err
		}
		a.RunKey = key
		return wire.Marshal(&a)
	},
	refuse: func(runID string, e *wire.Error) []byte {
		b, _ := wire.Marshal(&wire.PermissionReply{V: 3, RunID: runID, Error: e})
		return b
	},
	errorOf: func(b []byte) *wire.Error {
		rep, err := wire.Decode[wire.PermissionReply](b)
		if err != nil {
			return wire.Errorf(wire.ProviderProtocolError, "the runner's permission reply: %v", err)
		}
		return rep.Error
	},
	reply:   wire.TypePermissionReply,
	forward: subject.Names.RunnerPermission,
}

// sessionHandler answers one kind of session control request, each on its
// own goroutine owned by wg.
func (r *Router) sessionHandler(ctx context.Context, wg *sync.WaitGroup, kind sessionRequest) micro.HandlerFunc {
	return func(req micro.Request) {
		wg.Go(func() {
			body, e := r.session(context.WithoutCancel(ctx), kind, req.Subject(), req.Data())
			if body == nil {
				body = kind.refuse(cancelTargetRun(req.Subject()), e)
			}
			_ = service.ReplyLater(req, kind.reply.ContentType(), body, e)
		})
	}
}

func cancelTargetRun(subj string) string { _, runID := cancelTarget(subj); return runID }

// session forwards one request; a nil body is a refusal with e.
func (r *Router) session(ctx context.Context, kind sessionRequest, subj string, data []byte) ([]byte, *wire.Error) {
	tenant, runID := cancelTarget(subj)
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("run_id", runID)); err != nil {
		return nil, wire.Errorf(wire.AgenticRequestValidationError, "%s: %v", kind.verb, err)
	}
	bodyRun, err := kind.decode(data)
	if err != nil {
		return nil, wire.Errorf(wire.AgenticRequestValidationError, "%s: %v", kind.verb, err)
	}
	if bodyRun != "" && bodyRun != runID {
		return nil, wire.Errorf(wire.AgenticRequestValidationError, "%s: run_id %.64q is not the subject's run %s", kind.verb, bodyRun, runID)
	}
	rctx, stop := context.WithTimeout(ctx, 4*jsretry.AttemptTimeout)
	defer stop()
	run, err := r.store.Get(rctx, tenant, runID)
	switch {
	case errors.Is(err, runs.ErrNotFound):
		return nil, noRun(tenant, runID)
	case err != nil:
		return nil, wire.Errorf(wire.ProviderTransportError, "read run %s: %v", runID, err).Retry()
	case run.Record.State.Terminal():
		return nil, wire.Errorf(wire.SessionEnded, "%s: run %s has ended (%s)", kind.verb, runID, run.Record.State)
	}
	t, err := r.store.Events().Tail(rctx, tenant, runID)
	switch {
	case err != nil:
		return nil, wire.Errorf(wire.ProviderTransportError, "read the events of run %s: %v", runID, err).Retry()
	case t.Ended():
		return nil, wire.Errorf(wire.SessionEnded, "%s: run %s has ended (%s)", kind.verb, runID, t.Event.Status.State)
	case t.Runner == "":
		return nil, wire.Errorf(wire.AdmissionRejected, "%s: run %s has not started on a runner yet; send it again once it runs", kind.verb, runID).Retry()
	}
	body, err := kind.stamp(data, subject.RunKey(tenant, runID))
	if err != nil {
		return nil, wire.Errorf(wire.AgenticRequestValidationError, "%s: %v", kind.verb, err)
	}
	forward := &nats.Msg{Subject: kind.forward(r.d.Names, t.Runner), Data: body}
	msg, err := r.d.NC.RequestMsg(forward, sessionForwardTimeout)
	if errors.Is(err, nats.ErrTimeout) {
		// A runner killed a moment ago may still have had its
		// subscription when the request went out, and the request died
		// with it: once more, by when the server knows it is gone.
		msg, err = r.d.NC.RequestMsg(forward, sessionForwardTimeout)
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, wire.Errorf(wire.SessionLost, "%s: the runner of session %s is gone; a run on its conversation resumes it through session/load where the agent supports it", kind.verb, runID)
	case err != nil:
		return nil, wire.Errorf(wire.ProviderTransportError, "forward %s of %s to runner %s: %v", kind.verb, runID, t.Runner, err).Retry()
	}
	return msg.Data, kind.errorOf(msg.Data)
}
