package openai

import (
	"bytes"
	"context"
	"errors"
	"io"
	"iter"
	"mime"
	"net/http"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/sse"
	"github.com/agentmesh/agentmesh/pkg/cost"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Name is the adapter key: the pin's provider and the work subject's last
// token.
const Name = "openai"

// ResponsesPath is the endpoint, relative to the profile's base_url.
const ResponsesPath = "responses"

// Capabilities is the adapter's immutable declaration. Remote adapters are
// not resumable: a conversation continues through the checkpoint, not a
// session id.
var Capabilities = wire.Capabilities{
	Transport:       wire.TransportRemote,
	Resumable:       false,
	EmitsToolEvents: true,
	ReportsUsage:    true,
}

// MaxPricedContext is the largest context window one price covers: the
// provider reprices a whole request of more than 272,000 input tokens at
// long-context rates, which a single rate per token class cannot express,
// so a profile may advertise no more (decision 11).
const MaxPricedContext = 272_000

// TokenClasses returns the token classes of a response's usage (see the
// package doc): uncached input, cached input, visible output and
// reasoning. The Responses API reports no cache writes.
func TokenClasses() []string {
	return []string{cost.Input, cost.Output, cost.CacheRead, cost.Reasoning}
}

// Declaration is the adapter's whole declaration, which Unavailable makes
// in its place.
func Declaration() remote.Declaration {
	return remote.Declaration{Capabilities: Capabilities, TokenClasses: TokenClasses(), MaxPricedContext: MaxPricedContext}
}

// Options are the adapter's knobs beyond remote.Config.
type Options struct {
	// NoTemperatureModels lists the models that reject the temperature
	// sampling parameter (decision 13: the configured GPT-5.x Responses
	// model does). For them a request's temperature is validated and then
	// left out of the provider request, not refused.
	NoTemperatureModels []string
}

// Adapter is the OpenAI Responses adapter. It is immutable and safe for
// concurrent use; each Stream call owns its own HTTP client.
type Adapter struct {
	cfg           remote.Config
	noTemperature map[string]bool
}

// New returns the adapter for cfg, whose base URL (the API root, e.g.
// https://api.openai.com/v1) is checked first; it starts nothing. An empty
// cfg.Credential sends no Authorization header (a proxy that adds its
// own); a profile whose credential variable is unset should be registered
// as Unavailable instead.
func New(cfg remote.Config, opts Options) (adapter.Adapter, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	a := &Adapter{cfg: cfg, noTemperature: map[string]bool{}}
	for _, m := range opts.NoTemperatureModels {
		a.noTemperature[m] = true
	}
	return a, nil
}

// Unavailable is the closed adapter an openai profile becomes when its
// credential variable credentialEnv is unset: choosing it fails with
// ProviderUnavailable.
func Unavailable(credentialEnv string) adapter.Adapter {
	return remote.Unavailable(Name, Declaration(), credentialEnv)
}

// Name returns Name.
func (a *Adapter) Name() string { return Name }

// Capabilities returns Capabilities.
func (a *Adapter) Capabilities() wire.Capabilities { return Capabilities }

// TokenClasses returns TokenClasses() (adapter.TokenClasses).
func (a *Adapter) TokenClasses() []string { return TokenClasses() }

// MaxPricedContext returns MaxPricedContext (adapter.PricedContext).
func (a *Adapter) MaxPricedContext() int { return MaxPricedContext }

// RuntimeKeys returns none: the adapter takes no runtime-only keys.
func (a *Adapter) RuntimeKeys() []string { return nil }

// Validate decodes a request strictly (see Decode) and returns a Request.
func (a *Adapter) Validate(b []byte) (any, error) { return Decode(b) }

// Stream runs one attempt: one POST {base_url}/responses with stream=true
// and store=false, its server-sent events mapped onto chunks. It does not
// retry: a connect failure or the attempt cap before the response is a
// retryable ProviderTransportError from remote.Do, an HTTP error status is
// typed and not retryable, and a failure after the response began (a cut
// connection, a malformed event) is a non-retryable
// ProviderTransportError or ProviderProtocolError. A provider-declared
// failure (error, response.failed) is the one error chunk, and the last.
//
// call.Checkpoint, when set, is the conversation this run continues; at
// the end of a successful response the new conversation is handed to
// call.SaveCheckpoint before the result chunk is yielded.
func (a *Adapter) Stream(ctx context.Context, call adapter.Call) iter.Seq2[wire.Chunk, error] {
	return func(yield func(wire.Chunk, error) bool) {
		st, req, err := a.prepare(call)
		if err != nil {
			yield(wire.Chunk{}, err)
			return
		}
		body, err := a.body(&st, req)
		if err != nil {
			yield(wire.Chunk{}, wire.Errorf(wire.AgenticRequestValidationError, "%s request: encode: %v", Name, err))
			return
		}
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.URL(ResponsesPath), bytes.NewReader(body))
		if err != nil {
			yield(wire.Chunk{}, wire.Errorf(wire.ProfileError, "%s: request: %v", Name, err))
			return
		}
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("Accept", "text/event-stream")
		if !a.cfg.Credential.Empty() {
			hreq.Header.Set("Authorization", "Bearer "+a.cfg.Credential.Reveal())
		}
		resp, err := remote.Do(ctx, a.cfg, Name, hreq)
		if err != nil {
			yield(wire.Chunk{}, statusClass(err))
			return
		}
		defer resp.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "" {
			if mt, _, _ := mime.ParseMediaType(ct); mt != "text/event-stream" {
				yield(wire.Chunk{}, protocolf("the response is %.64q, not an event stream", ct))
				return
			}
		}
		p := newParser(call.Model, aliases(st.toolNames()))
		p.run(ctx, resp.Body, func() error {
			if call.SaveCheckpoint == nil {
				return nil
			}
			saved, err := p.save(st)
			if err == nil {
				call.SaveCheckpoint(saved)
			}
			return err
		}, yield)
	}
}

// run reads the response's events from body and yields their chunks, then
// the final error if any. completed runs when a successful response ends,
// before its result chunk is yielded; its error ends the stream instead.
func (p *parser) run(ctx context.Context, body io.Reader, completed func() error, yield func(wire.Chunk, error) bool) {
	events := sse.NewReader(body)
	for {
		if ctx.Err() != nil {
			yield(wire.Chunk{}, context.Cause(ctx))
			return
		}
		ev, err := events.Next()
		if err != nil {
			yield(wire.Chunk{}, readError(ctx, err))
			return
		}
		chunks, end, err := p.feed(ev)
		if err != nil {
			yield(wire.Chunk{}, err)
			return
		}
		if end && p.completed {
			if err := completed(); err != nil {
				yield(wire.Chunk{}, err)
				return
			}
		}
		for _, c := range chunks {
			if !yield(c, nil) {
				return
			}
		}
		if end {
			return
		}
	}
}

// prepare checks the request against the pin and the conversation and
// returns the conversation with the request's turn appended.
func (a *Adapter) prepare(call adapter.Call) (state, Request, error) {
	var req Request
	switch r := call.Request.(type) {
	case Request:
		req = r
	case *Request:
		if r != nil {
			req = *r
		}
	default:
		return state{}, req, wire.Errorf(wire.AgenticHandlerError, "%s: call request is %T, want openai.Request", Name, call.Request)
	}
	if call.Model == "" {
		return state{}, req, wire.Errorf(wire.ProfileError, "%s: no pinned model", Name)
	}
	if req.Model != "" && req.Model != call.Model {
		return state{}, req, wire.Errorf(wire.AgenticRequestValidationError, "%s request: field \"model\": %.64q is not the pinned model %.64q", Name, req.Model, call.Model)
	}
	st := state{V: stateVersion, Model: call.Model}
	if len(call.Checkpoint) > 0 {
		var err error
		if st, err = decodeState(call.Checkpoint); err != nil {
			return state{}, req, err
		}
		if st.Model != call.Model {
			return state{}, req, wire.Errorf(wire.PinMismatch, "%s: the conversation ran on %.64q, the run is pinned to %.64q", Name, st.Model, call.Model)
		}
	}
	if err := st.continueWith(req); err != nil {
		return state{}, req, err
	}
	return st, req, nil
}

// statusClass retypes the HTTP 400 the Responses API answers an over-long
// input with ("Your input exceeds the context window of this model",
// code context_length_exceeded), which remote.StatusError leaves a plain
// ProviderError: its text matches none of remote's context-length phrases
// and the code is not part of the message. Everything else passes as is.
func statusClass(err error) error {
	var we *wire.Error
	if errors.As(err, &we) && we.Class == wire.ProviderError && strings.Contains(we.Message, "HTTP 400:") &&
		strings.Contains(strings.ToLower(we.Message), "context window") {
		return wire.Errorf(wire.ProviderContextError, "%s", we.Message)
	}
	return err
}

// readError types a failure to read the next event: the run's own end
// (cancellation, deadline) as itself, an oversized event as a protocol
// error, anything else (a cut connection, a stream that ends before its
// terminal event) as a ProviderTransportError — never retryable, for the
// response has begun.
func readError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.Is(err, sse.ErrTooLarge):
		return protocolf("%v", err)
	case errors.Is(err, io.EOF):
		return wire.Errorf(wire.ProviderTransportError, "%s: the stream ended before the response completed", Name)
	}
	return wire.Errorf(wire.ProviderTransportError, "%s: read stream: %v", Name, err)
}
