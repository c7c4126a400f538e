package runner

import (
	"bytes"
	"context"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/micro"
)

// A session run (docs/contract.md §6.1) is a run of an Interactive
// adapter whose submitter reads contract v3: its agent stays live between
// turns, follow-up prompts and permission answers reach it on this
// runner's input and permission endpoints, forwarded by the control
// responder, and its ACP session id is checkpointed as soon as the agent
// names it, so that a run on its conversation after this runner dies
// loads it (session/load) rather than starting afresh.

// openSession gives the call its session when the run is one.
func (r *run) openSession(ctx context.Context, call *adapter.Call) {
	if !adapter.IsInteractive(r.a) || r.work.V < 3 {
		return
	}
	s := adapter.NewSession()
	r.mu.Lock()
	r.sess = s
	r.mu.Unlock()
	call.Session = s
	if r.work.Conversation != "" {
		// The agent's session id is durable from the start: store it now.
		call.SaveCheckpoint = func(b []byte) {
			r.checkpoint = bytes.Clone(b)
			r.saveCheckpoint(ctx)
		}
	}
}

// closeSession ends the run's session, if it has one: later prompts and
// answers are refused with SessionEnded.
func (r *run) closeSession() {
	if s := r.liveSession(); s != nil {
		s.Close(nil)
	}
}

func (r *run) liveSession() *adapter.Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sess
}

// isSession reports whether the run is a session run.
func (r *run) isSession() bool { return adapter.IsInteractive(r.a) && r.work.V >= 3 }

// heldSession is the session of the run key names on this runner, or the
// typed error saying why there is none.
func (h *Host) heldSession(key string) (*adapter.Session, *wire.Error) {
	if _, _, err := subject.SplitRunKey(key); err != nil {
		return nil, wire.Errorf(wire.AgenticRequestValidationError, "%v", err)
	}
	h.mu.Lock()
	r := h.active[key]
	h.mu.Unlock()
	if r == nil {
		return nil, wire.Errorf(wire.SessionEnded, "runner %s does not hold run %s", h.cfg.ID, key)
	}
	s := r.liveSession()
	if s == nil {
		return nil, wire.Errorf(wire.SessionEnded, "run %s is not a session (adapter %s is not interactive, or its submitter reads contract v%d)", key, r.a.Name(), r.work.V)
	}
	return s, nil
}

// inputHandler takes a forwarded follow-up prompt, or an interrupt, for
// a session this runner holds.
func (h *Host) inputHandler() micro.HandlerFunc {
	return func(req micro.Request) {
		in, err := wire.Decode[wire.Input](req.Data())
		reply := wire.InputReply{V: 3, RunID: in.RunID}
		var werr *wire.Error
		switch s, e := h.heldSession(in.RunKey); {
		case err != nil:
			werr = wire.Errorf(wire.AgenticRequestValidationError, "input: %v", err)
		case e != nil:
			werr = e
		case in.Interrupt:
			werr = wire.AsError(s.Interrupt())
		default:
			var err error
			reply.Turn, reply.Queued, err = s.Send(in.Prompt)
			werr = wire.AsError(err)
		}
		reply.Error = werr
		if b, err := wire.Marshal(&reply); err == nil {
			_ = service.Reply(req, wire.TypeInputReply.ContentType(), b, reply.Error)
		}
	}
}

// permissionHandler takes a forwarded answer to a permission request of
// a session this runner holds.
func (h *Host) permissionHandler() micro.HandlerFunc {
	return func(req micro.Request) {
		ans, err := wire.Decode[wire.PermissionAnswer](req.Data())
		reply := wire.PermissionReply{V: 3, RunID: ans.RunID, RequestID: ans.RequestID}
		switch s, e := h.heldSession(ans.RunKey); {
		case err != nil:
			reply.Error = wire.Errorf(wire.AgenticRequestValidationError, "permission: %v", err)
		case e != nil:
			reply.Error = e
		default:
			var err error
			reply.OptionID, err = s.Answer(ans.RequestID, ans.Allow, ans.OptionID)
			reply.Error = wire.AsError(err)
		}
		if b, err := wire.Marshal(&reply); err == nil {
			_ = service.Reply(req, wire.TypePermissionReply.ContentType(), b, reply.Error)
		}
	}
}
