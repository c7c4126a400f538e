package openai

import (
	"context"
	"errors"
	"io"
	"mime"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/sse"
	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
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
// so a profile may advertise no more (docs/contract.md §10.11).
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
	// sampling parameter (docs/contract.md §10.13: the configured GPT-5.x Responses
	// model does). For them a request's temperature is validated and then
	// left out of the provider request, not refused.
	NoTemperatureModels []string
}

// client sends one profile's attempts. It is immutable.
type client struct {
	cfg           remote.Config
	noTemperature map[string]bool
}

// New returns the adapter for cfg, built on the remote frame
// (remote.Spec): immutable and safe for concurrent use, each Stream call
// with its own HTTP client. The base URL (the API root, e.g.
// https://api.openai.com/v1) is checked first; it starts nothing. An empty
// cfg.Credential sends no Authorization header (a proxy that adds its
// own); a profile whose credential variable is unset should be registered
// as Unavailable instead.
func New(cfg remote.Config, opts Options) (adapter.Adapter, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	c := &client{cfg: cfg, noTemperature: map[string]bool{}}
	for _, m := range opts.NoTemperatureModels {
		c.noTemperature[m] = true
	}
	return remote.New(remote.Spec[Request]{Name: Name, Declaration: Declaration(), Decode: Decode, Attempt: c.attempt})
}

// Unavailable is the closed adapter an openai profile becomes when its
// credential variable credentialEnv is unset: choosing it fails with
// ProviderUnavailable.
func Unavailable(credentialEnv string) adapter.Adapter {
	return remote.Unavailable(Name, Declaration(), credentialEnv)
}

// attempt is the frame's Spec.Attempt: one POST {base_url}/responses with
// stream=true and store=false, its server-sent events mapped onto chunks.
// It does not retry: a connect failure or the attempt cap before the
// response is a retryable ProviderTransportError from remote.Do, an HTTP
// error status is a *remote.StatusError, typed (retryable for a 429, 529 or
// 5xx), and a failure after the response began (a cut connection, a
// malformed event) is a non-retryable ProviderTransportError or
// ProviderProtocolError. A provider-declared failure (error,
// response.failed) is the one error chunk, and the last.
//
// call.Checkpoint, when set, is the conversation this run continues; at
// the end of a successful response the new conversation is handed to
// call.SaveCheckpoint before the result chunk is emitted.
func (c *client) attempt(ctx context.Context, req Request, call adapter.Call, emit remote.Emit) error {
	st, err := prepare(req, call)
	if err != nil {
		return err
	}
	body, err := c.body(&st, req)
	if err != nil {
		return wire.Errorf(wire.AgenticRequestValidationError, "%s request: encode: %v", Name, err)
	}
	resp, err := remote.Post(ctx, c.cfg, Name, c.cfg.URL(ResponsesPath), "text/event-stream", body, c.cfg.Bearer())
	if err != nil {
		return err
	}
	defer resp.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt != "text/event-stream" {
			return protocolf("the response is %.64q, not an event stream", ct)
		}
	}
	p := newParser(call.Model, aliases(st.toolNames()))
	return p.read(ctx, resp.Body, func() error {
		if call.SaveCheckpoint == nil {
			return nil
		}
		saved, err := p.save(st)
		if err == nil {
			call.SaveCheckpoint(saved)
		}
		return err
	}, emit)
}

// read reads the response's events from body and emits their chunks. It
// returns nil once the response reached its terminal event, emit's error
// as soon as emit returns one, else the attempt's failure. completed runs
// when a successful response ends, before its result chunk is emitted;
// its error ends the stream instead.
func (p *parser) read(ctx context.Context, body io.Reader, completed func() error, emit remote.Emit) error {
	events := sse.NewReader(body)
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		ev, err := events.Next()
		if err != nil {
			return readError(ctx, err)
		}
		chunks, end, err := p.feed(ev)
		if err != nil {
			return err
		}
		if end && p.completed {
			if err := completed(); err != nil {
				return err
			}
		}
		if err := emit(chunks...); err != nil || end {
			return err
		}
	}
}

// prepare checks the request against the pin and the conversation and
// returns the conversation with the request's turn appended.
func prepare(req Request, call adapter.Call) (state, error) {
	if call.Model == "" {
		return state{}, wire.Errorf(wire.ProfileError, "%s: no pinned model", Name)
	}
	if _, err := call.RunModel(Name, req.Model); err != nil {
		return state{}, err
	}
	st := state{V: stateVersion, Model: call.Model}
	if len(call.Checkpoint) > 0 {
		var err error
		if st, err = decodeState(call.Checkpoint); err != nil {
			return state{}, err
		}
		if st.Model != call.Model {
			return state{}, wire.Errorf(wire.PinMismatch, "%s: the conversation ran on %.64q, the run is pinned to %.64q", Name, st.Model, call.Model)
		}
	}
	if err := st.continueWith(req); err != nil {
		return state{}, err
	}
	return st, nil
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
