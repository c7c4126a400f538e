package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// sessionTimeout bounds a session control request without a deadline of
// its own.
const sessionTimeout = 15 * time.Second

// Send sends prompt to the session run runID as its next turn
// (docs/contract.md §6.1). The reply says which turn it became; the run's
// events carry it as an input chunk, then the turn. A run that has ended,
// or is not a session, refuses it with SessionEnded.
func (c *Client) Send(ctx context.Context, tenant, runID, prompt string) (wire.InputReply, error) {
	return sessionRequest[wire.InputReply](ctx, c, c.names.Input(tenant, runID), tenant, runID, &wire.Input{V: 3, RunID: runID, Prompt: prompt})
}

// Interrupt cancels the turn the session run runID is in; the session
// takes the next prompt.
func (c *Client) Interrupt(ctx context.Context, tenant, runID string) (wire.InputReply, error) {
	return sessionRequest[wire.InputReply](ctx, c, c.names.Input(tenant, runID), tenant, runID, &wire.Input{V: 3, RunID: runID, Interrupt: true})
}

// Answer answers the session's permission request requestID (the tool_id
// of its permission_requested chunk): allow or deny, with the request's
// first allowing or rejecting option unless optionID names one. The reply
// names the option the agent got.
func (c *Client) Answer(ctx context.Context, tenant, runID, requestID string, allow bool, optionID string) (wire.PermissionReply, error) {
	if requestID == "" {
		return wire.PermissionReply{}, wire.Errorf(wire.AgenticRequestValidationError, "permission: a request id is required")
	}
	return sessionRequest[wire.PermissionReply](ctx, c, c.names.Permission(tenant, runID), tenant, runID,
		&wire.PermissionAnswer{V: 3, RunID: runID, RequestID: requestID, Allow: allow, OptionID: optionID})
}

func sessionRequest[R wire.InputReply | wire.PermissionReply, Q wire.Input | wire.PermissionAnswer](ctx context.Context, c *Client, subj, tenant, runID string, q *Q) (R, error) {
	var zero R
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("run_id", runID)); err != nil {
		return zero, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, sessionTimeout)
		defer cancel()
	}
	b, err := wire.Marshal(q)
	if err != nil {
		return zero, err
	}
	msg, err := c.nc.RequestWithContext(ctx, subj, b)
	if err != nil {
		return zero, fmt.Errorf("session %s: %w", runID, err)
	}
	reply, err := wire.Decode[R](msg.Data)
	if err != nil {
		return zero, fmt.Errorf("session %s: reply: %w", runID, err)
	}
	var e *wire.Error
	switch r := any(&reply).(type) {
	case *wire.InputReply:
		e = r.Error
	case *wire.PermissionReply:
		e = r.Error
	}
	if e != nil {
		return reply, e
	}
	return reply, nil
}
