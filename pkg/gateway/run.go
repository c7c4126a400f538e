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
	"slices"
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
			// An output_text part sent back as the caller got it.
			Annotations []json.RawMessage `json:"annotations"`
			Logprobs    []json.RawMessage `json:"logprobs"`
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

// ask is one request's work for the mesh, read from either OpenAI shape.
type ask struct {
	model string
	// atoms is the request's conversation in order: its system text, the
	// turns the mesh already holds (sent back by a stateless caller) and
	// the new tail (tool results, a user message).
	atoms []atom
	// param names the conversation in errors: messages or input.
	param string
	// previous is the run of previous_response_id: atoms then hold only
	// the tail, and system the instructions (if any).
	previous string
	system   string
	tools    []any
	// extra is the request's agentmesh_request (absent: nil): a JSON
	// object of the adapter's own request fields (the fixture's script, a
	// model API's reasoning_effort, ...), added to what the messages say;
	// the adapter validates them strictly, and they may not set what the
	// messages set.
	extra json.RawMessage
	// workspace is the request's agentmesh_workspace: where the workspace
	// of an agent CLI's run comes from, as the runs API's workspace. A
	// conversation's is its first request's; a continuation carries on
	// from what its last run left (the conversation's head).
	workspace *wire.WorkspaceSource
	// sampling are the request's generation settings, as the mesh's
	// request fields, each with the parameter that set it.
	sampling []setting
}

// setting is one generation setting: the mesh request field, its value,
// and the OpenAI parameter it came from.
type setting struct {
	field, param string
	value        any
}

// sampling gathers the settings a request set: temperature, the output
// token limit (maxParam names it) and the reasoning effort (effortParam).
// The adapter validates them: one whose model API takes no such setting
// (or the fixture) refuses it with a 400.
func sampling(temperature *float64, maxTokens *int64, maxParam, effort, effortParam string) []setting {
	var out []setting
	if temperature != nil {
		out = append(out, setting{"temperature", "temperature", *temperature})
	}
	if maxTokens != nil {
		out = append(out, setting{"max_tokens", maxParam, *maxTokens})
	}
	if effort != "" {
		out = append(out, setting{"reasoning_effort", effortParam, effort})
	}
	return out
}

// run is one run the gateway started and follows.
type run struct {
	id      string
	tenant  string
	model   string // the resolved pin's model
	created int64  // unix seconds
	events  iter.Seq2[wire.Event, error]
	// remote: the profile calls a model API, so a tool_use chunk is a
	// call for the caller to answer (an agent CLI runs its own tools).
	remote bool
	// conversation is the mesh conversation the run continues or starts
	// ("" for a profile that keeps none); parent the run whose point it
	// claimed; sum the hash of the conversation before it, and tail what
	// the request added. Once the run succeeds they become its turn.
	conversation, parent, sum string
	tail                      []atom
	// endpoint and arrived are the request's, for the first token's metric.
	endpoint string
	arrived  time.Time
}

// call is a tool call of a run's reply.
type call struct {
	id, name, args string
}

// outcome is how a run ended.
type outcome struct {
	text  string // the reply's whole text
	calls []call // its tool calls, in order
	usage *wire.Usage
	cost  string
	stop  string      // the result chunk's stop reason
	err   *APIError   // nil when the run succeeded
	werr  *wire.Error // the typed error behind err, if any
}

// begin resolves a's model, finds the mesh conversation its history
// belongs to (or starts one), and starts the run.
func (g *Gateway) begin(ctx context.Context, who caller, a ask) (*run, *APIError) {
	if a.model == "" {
		return nil, invalid("model", "model is required")
	}
	p, pin, err := g.profiles.Resolve(a.model)
	if errors.Is(err, profile.ErrUnknown) {
		return nil, apiErr(http.StatusNotFound, typeInvalidRequest, "model_not_found", "model",
			"the model %q does not exist: name a profile, an alias or provider/model (GET /v1/models lists the profiles)", a.model)
	}
	if err != nil {
		return nil, asAPIError(err)
	}
	extra, e := jsonValue(a.extra, "agentmesh_request")
	if e != nil {
		return nil, e
	}
	for _, k := range []string{"prompt", "system", "tools", "tool_results"} {
		if _, ok := extra[k]; ok {
			return nil, invalid("agentmesh_request."+k, "agentmesh_request may not set %s: it comes from the request", k)
		}
	}
	r := &run{id: client.NewRunID(), tenant: who.Tenant, model: pin.Model, created: time.Now().Unix(),
		remote: p.Transport == wire.TransportRemote, endpoint: who.endpoint, arrived: who.arrived}
	keeps := r.remote || (p.Capabilities != nil && p.Capabilities.Resumable)
	if len(a.tools) > 0 && !r.remote {
		return nil, invalid("tools", "profile %q (adapter %s) runs an agent that uses its own tools: declared tools are for model API profiles", p.Name, p.Adapter)
	}
	history, t, system, e := split(a.atoms, a.param)
	if e != nil {
		return nil, e
	}
	if a.previous == "" && onlySystem(history) && len(t.results) > 0 {
		return nil, invalid(t.atoms[0].param, "%s: tool results without the assistant turn whose tool calls they answer", t.atoms[0].param)
	}
	// candidates are the runs whose turn this request continues: the
	// previous response's, or every run a history ends with.
	var candidates []string
	switch {
	case a.previous != "":
		if len(history) > 0 {
			return nil, invalid(history[0].param, "%s: with previous_response_id, input holds only what follows the response: tool outputs and a user message", history[0].param)
		}
		if !keeps {
			return nil, noConversation(p, "previous_response_id")
		}
		pt, _, err := g.turns.point(ctx, who.Tenant, a.previous)
		if errors.Is(err, errNoTurn) {
			return nil, apiErr(http.StatusNotFound, typeInvalidRequest, "previous_response_not_found", "previous_response_id",
				"previous response resp_%s not found: it is not a completed response of this tenant that the gateway answered", a.previous)
		}
		if err != nil {
			return nil, turnsUnavailable(g, err)
		}
		candidates, r.sum, system = []string{a.previous}, pt.Sum, a.system
	case !onlySystem(history):
		if !keeps {
			return nil, noConversation(p, a.param)
		}
		r.sum = chainHash("", history)
		candidates, _, err = g.turns.history(ctx, who.Tenant, r.sum)
		if errors.Is(err, errNoTurn) {
			return nil, conversationNotFound(a.param)
		}
		if err != nil {
			return nil, turnsUnavailable(g, err)
		}
	case keeps:
		r.conversation = newConversation()
	}
	if a.workspace != nil && len(candidates) > 0 {
		return nil, invalid("agentmesh_workspace", "agentmesh_workspace: a conversation's workspace is its first request's; a continuation carries on from what its last run left")
	}
	if e := g.checkWorkspace(ctx, who.Tenant, p, a.workspace, "agentmesh_workspace"); e != nil {
		return nil, e
	}
	r.tail = t.atoms
	if len(candidates) == 0 {
		r.tail = append(slices.Clone(history), t.atoms...) // the system text, in a new conversation
	}
	fields := map[string]any{}
	for k, v := range extra {
		fields[k] = v
	}
	for _, st := range a.sampling {
		if _, ok := fields[st.field]; ok {
			return nil, invalid("agentmesh_request."+st.field, "agentmesh_request.%s and %s set one thing: send one of them", st.field, st.param)
		}
		fields[st.field] = st.value
	}
	if t.prompt != "" {
		fields["prompt"] = t.prompt
	}
	if system != "" {
		fields["system"] = system
	}
	if len(a.tools) > 0 {
		fields["tools"] = a.tools
	}
	if len(t.results) > 0 {
		fields["tool_results"] = t.results
	}
	body, err := wire.Marshal(fields)
	if err != nil {
		return nil, invalid("", "encode request: %v", err)
	}
	if len(candidates) > 0 {
		if e := g.claimOne(ctx, r, candidates, a.param); e != nil {
			return nil, e
		}
	}
	req := wire.RunRequest{RunID: r.id, Tenant: who.Tenant, Principal: who.Principal, Profile: a.model, Request: body, Conversation: r.conversation, Workspace: a.workspace}
	// A claim whose run failed to start is not given back: the run may be
	// stored all the same (a publish whose acknowledgement was lost), so
	// it holds until the mesh knows the run, or for claimFresh.
	if _, r.events, err = g.client.Start(ctx, req); err != nil {
		return nil, asAPIError(err)
	}
	return r, nil
}

func conversationNotFound(param string) *APIError {
	return apiErr(http.StatusBadRequest, typeInvalidRequest, "conversation_not_found", param,
		"the earlier turns of %s match no conversation the gateway answered for this tenant: send them back as they were answered, or start with the system and one user message", param)
}

// claimOne claims the turn of the first of candidates that is free for r
// and makes it r's parent. None free, it gives the first one's refusal.
func (g *Gateway) claimOne(ctx context.Context, r *run, candidates []string, param string) *APIError {
	var first *APIError
	for _, c := range candidates {
		pt, rev, err := g.turns.point(ctx, r.tenant, c)
		if errors.Is(err, errNoTurn) {
			continue
		}
		if err != nil {
			return turnsUnavailable(g, err)
		}
		e := g.claim(ctx, r.tenant, c, pt, rev, r.id)
		if e == nil {
			r.parent, r.conversation = c, pt.Conversation
			return nil
		}
		if first == nil {
			first = e
		}
	}
	if first == nil {
		return conversationNotFound(param)
	}
	return first
}

func noConversation(p *profile.Profile, param string) *APIError {
	return invalid(param, "profile %q (adapter %s) keeps no conversation: send the system messages and one user message", p.Name, p.Adapter)
}

func turnsUnavailable(g *Gateway, err error) *APIError {
	g.log.Warn("gateway: read turns", "err", err)
	return apiErr(http.StatusServiceUnavailable, typeUnavailable, "mesh_unavailable", "", "the conversation's turns could not be read; try again")
}

// claimFresh is how long a claim whose run the mesh does not know yet
// holds: the run is being submitted. Past it, an unknown run was never
// submitted (its gateway died) or has long expired.
const claimFresh = 2 * time.Minute

// claim marks the point of run parent continued by run next, unless
// another run has continued it (409 conversation_moved_on: branching from
// an earlier turn is not built) or is continuing it (409
// conversation_busy).
func (g *Gateway) claim(ctx context.Context, tenant, parent string, pt point, rev uint64, next string) *APIError {
	moved := apiErr(http.StatusConflict, typeInvalidRequest, "conversation_moved_on", "",
		"the conversation has moved on from response resp_%s: continue from its latest response (branching from an earlier turn is not built)", parent)
	busy := apiErr(http.StatusConflict, typeInvalidRequest, "conversation_busy", "",
		"another request is continuing the conversation from response resp_%s; wait for it, then continue from its response", parent)
	if pt.Done {
		return moved
	}
	if pt.Next != "" {
		rec, err := g.client.Status(ctx, tenant, pt.Next)
		switch {
		case errors.Is(err, client.ErrNotFound):
			if time.Since(time.UnixMilli(pt.Claimed)) < claimFresh {
				return busy
			}
		case err != nil:
			return asAPIError(err)
		case rec.State == wire.StateSucceeded:
			return moved
		case !rec.State.Terminal():
			return busy
		}
	}
	switch err := g.turns.claim(ctx, tenant, parent, pt, rev, next); {
	case errors.Is(err, errClaimed):
		return busy
	case err != nil:
		return turnsUnavailable(g, err)
	}
	return nil
}

// collect follows r to its end.
func (g *Gateway) collect(ctx context.Context, r *run) outcome {
	return g.follow(ctx, r, nil, nil)
}

// follow reads the run to its end, calling text with each piece of text
// and onCall with each tool call, in order (nil: not called; either
// returns false to stop: the caller went away). A run the caller left is
// cancelled. A run that succeeded is recorded as its conversation's turn
// before follow returns, so the caller's next request finds it.
func (g *Gateway) follow(ctx context.Context, r *run, text func(string) bool, onCall func(call) bool) outcome {
	var o outcome
	var b strings.Builder
	ended, first := false, true
	token := func() {
		if first && !r.arrived.IsZero() {
			g.metrics.GatewayFirstToken.WithLabelValues(r.endpoint).Observe(time.Since(r.arrived).Seconds())
		}
		first = false
	}
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
			o.text = b.String()
			if st.Summary != nil {
				o.usage, o.cost = st.Summary.Usage, st.Summary.Cost
			}
			if st.State != wire.StateSucceeded {
				o.werr = st.Error
				if o.werr == nil {
					o.werr = wire.Errorf(wire.ProviderError, "the run ended %s", st.State)
				}
				o.err = Status(o.werr)
				return o
			}
			g.remember(ctx, r, o)
			return o
		}
		c := ev.Chunk
		if c == nil {
			continue
		}
		switch c.Type {
		case wire.ChunkText:
			if c.Content == "" {
				continue
			}
			token()
			b.WriteString(c.Content)
			if text != nil && !text(c.Content) {
				return o
			}
		case wire.ChunkToolUse:
			if !r.remote {
				continue
			}
			args, err := json.Marshal(c.ToolInput)
			if err != nil || c.ToolInput == nil {
				args = []byte("{}")
			}
			token()
			cl := call{id: c.ToolID, name: c.ToolName, args: string(args)}
			o.calls = append(o.calls, cl)
			if onCall != nil && !onCall(cl) {
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

// remember records a succeeded run as its conversation's latest turn.
// A failure is logged: the reply stands, and the caller's next request
// in the conversation is refused as not found.
func (g *Gateway) remember(ctx context.Context, r *run, o outcome) {
	if r.conversation == "" {
		return
	}
	reply := []atom{{K: "assistant", T: o.text}}
	for _, c := range o.calls {
		reply = append(reply, atom{K: "call", I: c.id, N: c.name, A: canonicalArgs(c.args)})
	}
	sum := chainHash(r.sum, append(slices.Clone(r.tail), reply...))
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer stop()
	if err := g.turns.record(ctx, r.tenant, r.id, r.conversation, sum, r.parent); err != nil {
		g.log.Warn("gateway: record a turn", "run_id", r.id, "tenant", r.tenant, "err", err)
	}
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
