package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// The native runs API: a wire.RunRequest as JSON in, the run's record,
// its events as server-sent events (id = seq, resumable with
// Last-Event-ID) and cancel. Every call is the key's tenant's: a run id
// of another tenant is, for the caller, a run that does not exist.

// runRequest is the body of POST /v1/runs: wire.RunRequest with its
// request as a JSON object. tenant and principal, when given, must be
// the key's.
type runRequest struct {
	RunID        string            `json:"run_id"`
	Tenant       string            `json:"tenant"`
	Principal    string            `json:"principal"`
	Profile      string            `json:"profile"`
	Request      json.RawMessage   `json:"request"`
	Runtime      json.RawMessage   `json:"runtime"`
	Conversation string            `json:"conversation"`
	DeadlineMS   int64             `json:"deadline_ms"`
	Labels       map[string]string `json:"labels"`
	// Workspace is where a CLI run's workspace comes from: {"snapshot":
	// "sha256:…"} or {"git": {"url", "ref"}} (checkWorkspace).
	Workspace *wire.WorkspaceSource `json:"workspace"`
}

// jsonValue decodes raw (a JSON object, or absent) for msgpack: integers
// stay integers, so an adapter's strict decoder sees the types it wants.
func jsonValue(raw json.RawMessage, param string) (map[string]any, *APIError) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, invalid(param, "%s must be a JSON object: %v", param, err)
	}
	return numbers(m).(map[string]any), nil
}

// numbers turns every json.Number in v into an int64 when it is one,
// else a float64.
func numbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = numbers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = numbers(x)
		}
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		if math.IsInf(f, 0) {
			return v.String()
		}
		return f
	}
	return v
}

func (g *Gateway) submitRun(w http.ResponseWriter, r *http.Request, who caller) {
	var req runRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	for _, f := range []struct{ param, got, want string }{{"tenant", req.Tenant, who.Tenant}, {"principal", req.Principal, who.Principal}} {
		if f.got != "" && f.got != f.want {
			writeError(w, apiErr(http.StatusForbidden, "permission_error", "wrong_"+f.param, f.param,
				"this key submits as %s %q only", f.param, f.want))
			return
		}
	}
	if req.Profile == "" {
		writeError(w, invalid("profile", "profile is required"))
		return
	}
	p, _, err := g.profiles.Resolve(req.Profile)
	if err != nil {
		writeError(w, apiErr(http.StatusNotFound, typeInvalidRequest, "model_not_found", "profile", "%v", err))
		return
	}
	if e := g.checkWorkspace(r.Context(), who.Tenant, p, req.Workspace, "workspace"); e != nil {
		writeError(w, e)
		return
	}
	fields, e := jsonValue(req.Request, "request")
	if e != nil {
		writeError(w, e)
		return
	}
	runtime, e := jsonValue(req.Runtime, "runtime")
	if e != nil {
		writeError(w, e)
		return
	}
	body, err := wire.Marshal(fields)
	if err != nil {
		writeError(w, invalid("request", "encode request: %v", err))
		return
	}
	id, err := g.client.Submit(r.Context(), wire.RunRequest{
		RunID: req.RunID, Tenant: who.Tenant, Principal: who.Principal, Profile: req.Profile, Request: body,
		Runtime: runtime, Conversation: req.Conversation, DeadlineMS: req.DeadlineMS, Labels: req.Labels,
		Workspace: req.Workspace,
	})
	if err != nil {
		if errors.Is(err, subject.ErrInvalidToken) {
			writeError(w, invalid("", "%v", err))
			return
		}
		writeError(w, asAPIError(err))
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": id, "tenant": who.Tenant, "principal": who.Principal}, nil)
}

// notFound is the answer for a run the caller's tenant has no record or
// events of.
func notFound(id string) *APIError {
	return apiErr(http.StatusNotFound, typeNotFound, "run_not_found", "", "no run %q for this key's tenant", id)
}

// ownRun reports whether the caller's tenant has the run: a record or,
// just after its submission, its first events.
func (g *Gateway) ownRun(r *http.Request, who caller, id string) *APIError {
	if err := subject.ValidToken("run_id", id); err != nil {
		return invalid("run_id", "%v", err)
	}
	_, err := g.client.Status(r.Context(), who.Tenant, id)
	if errors.Is(err, client.ErrNotFound) {
		_, err = g.client.LastEvent(r.Context(), who.Tenant, id)
	}
	switch {
	case errors.Is(err, client.ErrNotFound):
		return notFound(id)
	case err != nil:
		return asAPIError(err)
	}
	return nil
}

func (g *Gateway) getRun(w http.ResponseWriter, r *http.Request, who caller) {
	id := r.PathValue("id")
	if err := subject.ValidToken("run_id", id); err != nil {
		writeError(w, invalid("run_id", "%v", err))
		return
	}
	rec, err := g.client.Status(r.Context(), who.Tenant, id)
	switch {
	case errors.Is(err, client.ErrNotFound):
		writeError(w, notFound(id))
	case err != nil:
		writeError(w, asAPIError(err))
	default:
		writeJSON(w, http.StatusOK, rec, nil)
	}
}

func (g *Gateway) cancelRun(w http.ResponseWriter, r *http.Request, who caller) {
	id := r.PathValue("id")
	if e := g.ownRun(r, who, id); e != nil {
		writeError(w, e)
		return
	}
	reply, err := g.client.Cancel(r.Context(), who.Tenant, id)
	if err != nil {
		writeError(w, asAPIError(err))
		return
	}
	writeJSON(w, http.StatusOK, reply, nil)
}

// runEvents streams a run's events from the start, or from after the
// seq in Last-Event-ID, as server-sent events: "id: <seq>", "event:
// <kind>" (status or chunk), the event as JSON; the stream ends after the
// terminal status. A batch of chunks goes out one chunk a seq.
func (g *Gateway) runEvents(w http.ResponseWriter, r *http.Request, who caller) {
	id := r.PathValue("id")
	from := uint64(1)
	if last := strings.TrimSpace(r.Header.Get("Last-Event-ID")); last != "" {
		n, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			writeError(w, invalid("Last-Event-ID", "Last-Event-ID %q is not a seq", last))
			return
		}
		from = n + 1
	}
	if e := g.ownRun(r, who, id); e != nil {
		writeError(w, e)
		return
	}
	s := newSSE(w, id)
	s.open() // a follower waiting for the run's next event has its headers
	for ev, err := range g.client.Events(r.Context(), who.Tenant, id, from) {
		if err != nil {
			if r.Context().Err() == nil {
				s.send("error", map[string]any{"error": asAPIError(err)})
			}
			return
		}
		if !s.sendID(strconv.FormatUint(ev.Seq, 10), string(ev.Kind), ev) {
			return
		}
	}
}
