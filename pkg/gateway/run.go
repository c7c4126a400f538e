package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// decodeBody strictly decodes the request body into v: one JSON object,
// no unknown field. A field the gateway does not support is refused
// rather than ignored, so nothing a caller sends is silently dropped.
func decodeBody(r *http.Request, v any) *APIError {
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return apiErr(http.StatusRequestEntityTooLarge, typeInvalidRequest, "request_too_large", "",
			"request body is larger than %d bytes", tooBig.Limit)
	}
	if err != nil {
		return invalid("", "read request body: %v", err)
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			field = strings.Trim(field, `"`)
			return apiErr(http.StatusBadRequest, typeInvalidRequest, "unknown_parameter", field,
				"unsupported parameter: %q is not supported by this gateway", field)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return apiErr(http.StatusBadRequest, typeInvalidRequest, "invalid_type", te.Field,
				"invalid type for %q: want %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return apiErr(http.StatusBadRequest, typeInvalidRequest, "invalid_json", "",
			"the request body is not valid JSON: %v", err)
	}
	if d.More() {
		return apiErr(http.StatusBadRequest, typeInvalidRequest, "invalid_json", "", "the request body holds more than one JSON value")
	}
	return nil
}

// textOf reads a message's content: a string, or a list of text parts
// whose type is one of types. param names the content in errors.
func textOf(raw json.RawMessage, param string, types ...string) (string, *APIError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", invalid(param, "%s is required", param)
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", invalid(param, "%s: %v", param, err)
		}
		return s, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalid(param, "%s must be a string or a list of text parts", param)
	}
	var b strings.Builder
	for i, p := range parts {
		var part struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		d := json.NewDecoder(bytes.NewReader(p))
		d.DisallowUnknownFields()
		pp := fmt.Sprintf("%s[%d]", param, i)
		if err := d.Decode(&part); err != nil {
			return "", invalid(pp, "%s: only text parts {type, text} are supported: %v", pp, err)
		}
		ok := false
		for _, t := range types {
			ok = ok || part.Type == t
		}
		if !ok {
			return "", invalid(pp+".type", "%s.type %q is not supported (want %s)", pp, part.Type, strings.Join(types, " or "))
		}
		b.WriteString(part.Text)
	}
	return b.String(), nil
}

// turn is one request's work for the mesh: a prompt and an optional
// system text, from the caller's messages.
type turn struct {
	model, prompt, system string
	// extra are the adapter's own request fields (agentmesh_request).
	extra map[string]any
}

// message is a chat message, or a Responses input item, already read.
type message struct {
	role, text, param string
}

// fold reduces messages to a turn: system (and developer) messages are
// the system text, and the one user message, which must come last, the
// prompt. Earlier assistant or tool turns are refused: the mesh keeps a
// conversation's history itself.
func fold(model string, msgs []message, param string) (turn, *APIError) {
	t := turn{model: model}
	var system []string
	for i, m := range msgs {
		switch m.role {
		case "system", "developer":
			system = append(system, m.text)
		case "user":
			if i != len(msgs)-1 {
				return t, invalid(m.param, "only one user message, the last, is supported: earlier turns are not sent back to the model (history across requests is not built yet)")
			}
			t.prompt = m.text
		case "assistant", "tool", "function":
			return t, invalid(m.param+".role", "a %q message is not supported yet: send the system messages and one user message", m.role)
		default:
			return t, invalid(m.param+".role", "role %q is not system, developer, user or assistant", m.role)
		}
	}
	if t.prompt == "" {
		return t, invalid(param, "%s must end with a non-empty user message", param)
	}
	t.system = strings.Join(system, "\n\n")
	return t, nil
}

// run is one run the gateway started and follows.
type run struct {
	id      string
	tenant  string
	model   string // the resolved pin's model
	created int64  // unix seconds
	events  iter.Seq2[wire.Event, error]
}

// outcome is how a run ended.
type outcome struct {
	usage *wire.Usage
	cost  string
	stop  string      // the result chunk's stop reason
	err   *APIError   // nil when the run succeeded
	werr  *wire.Error // the typed error behind err, if any
}

// begin folds msgs (param names them in errors) into a turn for model
// and starts its run (start).
//
// extra, the request's agentmesh_request (absent: nil), is a JSON object
// of the adapter's own request fields (the fixture's script, a model
// API's reasoning_effort, ...), added to the prompt and system; the
// adapter validates them strictly, and they may not set prompt or
// system.
func (g *Gateway) begin(ctx context.Context, who caller, model string, msgs []message, param string, extra json.RawMessage) (*run, *APIError) {
	t, e := fold(model, msgs, param)
	if e != nil {
		return nil, e
	}
	if t.extra, e = jsonValue(extra, "agentmesh_request"); e != nil {
		return nil, e
	}
	for _, k := range []string{"prompt", "system"} {
		if _, ok := t.extra[k]; ok {
			return nil, invalid("agentmesh_request."+k, "agentmesh_request may not set %s: it comes from the messages", k)
		}
	}
	return g.start(ctx, who, t)
}

// collect follows r to its end and returns its whole text.
func (g *Gateway) collect(ctx context.Context, r *run) (string, outcome) {
	var text strings.Builder
	o := g.follow(ctx, r, func(s string) bool { text.WriteString(s); return true })
	return text.String(), o
}

// start resolves t's model and submits the run as who, with its events
// followed from the start.
func (g *Gateway) start(ctx context.Context, who caller, t turn) (*run, *APIError) {
	if t.model == "" {
		return nil, invalid("model", "model is required")
	}
	_, pin, err := g.profiles.Resolve(t.model)
	if errors.Is(err, profile.ErrUnknown) {
		return nil, apiErr(http.StatusNotFound, typeInvalidRequest, "model_not_found", "model",
			"the model %q does not exist: name a profile, an alias or provider/model (GET /v1/models lists the profiles)", t.model)
	}
	if err != nil {
		return nil, asAPIError(err)
	}
	fields := map[string]any{"prompt": t.prompt}
	for k, v := range t.extra {
		fields[k] = v
	}
	if t.system != "" {
		fields["system"] = t.system
	}
	body, err := wire.Marshal(fields)
	if err != nil {
		return nil, invalid("", "encode request: %v", err)
	}
	req := wire.RunRequest{Tenant: who.Tenant, Principal: who.Principal, Profile: t.model, Request: body}
	id, events, err := g.client.Start(ctx, req)
	if err != nil {
		return nil, asAPIError(err)
	}
	return &run{id: id, tenant: who.Tenant, model: pin.Model, created: time.Now().Unix(), events: events}, nil
}

// follow reads the run to its end, calling text with each piece of text
// in order (it returns false to stop: the caller went away). A run the
// caller left is cancelled.
func (g *Gateway) follow(ctx context.Context, r *run, text func(string) bool) outcome {
	var o outcome
	ended := false
	defer func() {
		if !ended {
			g.cancel(ctx, r)
		}
	}()
	for ev, err := range r.events {
		if err != nil {
			o.err = asAPIError(err)
			if ctx.Err() != nil {
				o.err = apiErr(499, typeInvalidRequest, "client_closed", "", "the caller went away")
			}
			return o
		}
		if ev.Status != nil {
			st := ev.Status
			if st.Pin != nil && st.Pin.Model != "" {
				r.model = st.Pin.Model
			}
			if !st.State.Terminal() {
				continue
			}
			ended = true
			if st.Summary != nil {
				o.usage, o.cost = st.Summary.Usage, st.Summary.Cost
			}
			if st.State != wire.StateSucceeded {
				o.werr = st.Error
				if o.werr == nil {
					o.werr = wire.Errorf(wire.ProviderError, "the run ended %s", st.State)
				}
				o.err = Status(o.werr)
			}
			return o
		}
		c := ev.Chunk
		if c == nil {
			continue
		}
		switch c.Type {
		case wire.ChunkText:
			if c.Content != "" && !text(c.Content) {
				return o
			}
		case wire.ChunkResult:
			o.stop = c.Metadata.StopReason
			if o.usage == nil {
				o.usage = c.Metadata.Usage
			}
			if o.cost == "" {
				o.cost = c.Metadata.Cost
			}
		}
	}
	o.err = apiErr(http.StatusBadGateway, typeServer, "mesh_error", "", "the run's events ended without a terminal status")
	return o
}

// cancel asks the mesh to cancel a run whose caller left before its end,
// so no model keeps working for nobody. It blocks until a router
// answered, for at most 10s.
func (g *Gateway) cancel(ctx context.Context, r *run) {
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer stop()
	if _, err := g.client.Cancel(ctx, r.tenant, r.id); err != nil && !errors.Is(err, client.ErrNotFound) {
		g.log.Warn("gateway: cancel a run its caller left", "run_id", r.id, "tenant", r.tenant, "err", err)
	}
}

// usageTokens are a run's tokens in OpenAI's classes: the prompt counts
// cached reads and writes, the completion counts reasoning.
func usageTokens(u *wire.Usage) (prompt, completion, cached, reasoning int64) {
	if u == nil {
		return 0, 0, 0, 0
	}
	return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens, u.OutputTokens + u.ReasoningTokens, u.CacheReadTokens, u.ReasoningTokens
}

// writeJSON answers with v, and the run's cost header when cost is set.
func writeJSON(w http.ResponseWriter, status int, v any, hdr map[string]string) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, apiErr(http.StatusInternalServerError, typeServer, "encode", "", "encode the response: %v", err))
		return
	}
	for k, v := range hdr {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
