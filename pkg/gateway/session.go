package gateway

import (
	"net/http"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// The session endpoints of the runs API. A run of an interactive adapter
// (acp) submitted at contract v3 is a live session (docs/contract.md §6):
// it takes follow-up prompts until it ends, and asks the caller before a
// tool runs. Its events (GET /v1/runs/{id}/events) carry the input,
// turn_end, plan, permission_requested and permission_resolved chunks as
// they carry every other.
//
//	POST /v1/runs/{id}/input                   {"prompt": "..."} or {"interrupt": true}
//	  200 {"run_id", "turn", "queued"}: the turn the prompt became (0 for
//	  an interrupt) and the prompts queued ahead of it
//	POST /v1/runs/{id}/permissions/{request}   {"decision": "allow"|"deny", "option_id": "..."}
//	  200 {"run_id", "request_id", "option_id"}: the option the agent got
//
// {request} is the tool_id of the permission_requested chunk; option_id,
// optional, names one of its tool_input.options and must agree with the
// decision (absent: the request's first allowing or rejecting option).
// Bodies are decoded strictly, as everywhere in the gateway. A run of
// another tenant is a 404 run_not_found; the mesh's refusals by class
// (Status): SessionEnded 409, SessionLost 410, PermissionTimeout 409,
// AdmissionRejected 429 with Retry-After (the run has not started, or 16
// prompts are queued), an unknown request id 400.

// inputRequest is the body of POST /v1/runs/{id}/input: exactly one of
// prompt and interrupt.
type inputRequest struct {
	Prompt    *string `json:"prompt"`
	Interrupt *bool   `json:"interrupt"`
}

// inputReply is the answer to POST /v1/runs/{id}/input.
type inputReply struct {
	RunID  string `json:"run_id"`
	Turn   int    `json:"turn"`
	Queued int    `json:"queued"`
}

// permissionRequest is the body of POST /v1/runs/{id}/permissions/{request}.
type permissionRequest struct {
	Decision string `json:"decision"`
	OptionID string `json:"option_id"`
}

// permissionReply is the answer to POST /v1/runs/{id}/permissions/{request}.
type permissionReply struct {
	RunID     string `json:"run_id"`
	RequestID string `json:"request_id"`
	OptionID  string `json:"option_id"`
}

// The decisions of a permissionRequest.
const (
	decisionAllow = "allow"
	decisionDeny  = "deny"
)

func (g *Gateway) sessionInput(w http.ResponseWriter, r *http.Request, who caller) {
	id := r.PathValue("id")
	var req inputRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	switch {
	case req.Prompt != nil && req.Interrupt != nil:
		writeError(w, invalid("interrupt", "give one of prompt and interrupt, not both"))
		return
	case req.Prompt == nil && req.Interrupt == nil:
		writeError(w, invalid("prompt", "prompt (a follow-up) or interrupt (true) is required"))
		return
	case req.Prompt != nil && *req.Prompt == "":
		writeError(w, invalid("prompt", "prompt must not be empty"))
		return
	case req.Interrupt != nil && !*req.Interrupt:
		writeError(w, invalid("interrupt", "interrupt must be true when given"))
		return
	}
	if e := g.ownRun(r, who, id); e != nil {
		writeError(w, e)
		return
	}
	var reply wire.InputReply
	var err error
	if req.Prompt != nil {
		reply, err = g.client.Send(r.Context(), who.Tenant, id, *req.Prompt)
	} else {
		reply, err = g.client.Interrupt(r.Context(), who.Tenant, id)
	}
	if err != nil {
		writeError(w, asAPIError(err))
		return
	}
	writeJSON(w, http.StatusOK, inputReply{RunID: id, Turn: reply.Turn, Queued: reply.Queued}, nil)
}

func (g *Gateway) answerPermission(w http.ResponseWriter, r *http.Request, who caller) {
	id, requestID := r.PathValue("id"), r.PathValue("request")
	var req permissionRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	var allow bool
	switch req.Decision {
	case decisionAllow:
		allow = true
	case decisionDeny:
	case "":
		writeError(w, invalid("decision", "decision is required: %q or %q", decisionAllow, decisionDeny))
		return
	default:
		writeError(w, invalid("decision", "decision must be %q or %q, got %q", decisionAllow, decisionDeny, req.Decision))
		return
	}
	if e := g.ownRun(r, who, id); e != nil {
		writeError(w, e)
		return
	}
	reply, err := g.client.Answer(r.Context(), who.Tenant, id, requestID, allow, req.OptionID)
	if err != nil {
		writeError(w, asAPIError(err))
		return
	}
	writeJSON(w, http.StatusOK, permissionReply{RunID: id, RequestID: requestID, OptionID: reply.OptionID}, nil)
}
