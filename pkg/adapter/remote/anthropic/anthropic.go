package anthropic

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/sse"
	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Name is the adapter key: the pin's provider and the work subject's last
// token.
const Name = "anthropic"

// The provider's API as this adapter speaks it.
const (
	// DefaultBaseURL is the provider's API root; a profile's base_url
	// replaces it (a proxy, a gateway, the fixture server).
	DefaultBaseURL = "https://api.anthropic.com"
	// CredentialEnv is the credential variable the shipped profile names
	// in credential_env.
	CredentialEnv = "ANTHROPIC_API_KEY"
	// APIVersion is sent as the anthropic-version header.
	APIVersion = "2023-06-01"
	// MessagesPath is the streaming endpoint, under the base URL.
	MessagesPath = "/v1/messages"
)

// Capabilities is the adapter's immutable declaration: remote, not
// resumable (a conversation continues through its checkpoint, not a
// session id), emitting tool events (client tool calls as tool_use; the
// web search server tool as a tool_use and its tool_result in one
// stream) and reporting usage.
var Capabilities = wire.Capabilities{Transport: wire.TransportRemote, EmitsToolEvents: true, ReportsUsage: true}

// MaxPricedContext is the largest context window one price covers: a
// request of more than 200,000 input tokens (the 1M-context beta of Claude
// Sonnet 4 and 4.5) is billed at Anthropic's long-context rates, which a
// single rate per token class cannot express, so a profile may advertise
// no more (docs/contract.md §10.11).
const MaxPricedContext = 200_000

// TokenClasses returns the token classes of the result's usage (see the
// package doc's Usage): input, output, cache_read, cache_write and
// reasoning (thinking tokens, when the provider itemizes them).
func TokenClasses() []string {
	return []string{cost.Input, cost.Output, cost.CacheRead, cost.CacheWrite, cost.Reasoning}
}

// Declaration is the adapter's whole declaration, which remote.Unavailable
// makes in its place when the profile's credential is unset.
func Declaration() remote.Declaration {
	return remote.Declaration{Capabilities: Capabilities, TokenClasses: TokenClasses(), MaxPricedContext: MaxPricedContext}
}

// New returns the adapter for cfg, built on the remote frame
// (remote.Spec): safe for concurrent use, each Stream call with its own
// HTTP client. It checks the base URL first (scheme and SSRF policy); an
// empty cfg.BaseURL means DefaultBaseURL. An empty cfg.Credential sends no
// x-api-key header (a gateway that adds it); a profile whose credential
// variable is unset is remote.Unavailable instead, chosen by the registry,
// not here.
func New(cfg remote.Config) (adapter.Adapter, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	c := &client{cfg: cfg}
	return remote.New(remote.Spec[Request]{Name: Name, Declaration: Declaration(), Decode: Decode, Attempt: c.attempt})
}

// client sends one profile's attempts.
type client struct {
	cfg remote.Config
}

// attempt is the frame's Spec.Attempt: it joins the request to the
// conversation's checkpoint, sends one streaming request and maps the
// provider's events onto chunks (see the package documentation). It never
// retries: a failure before any response is remote.Do's typed error,
// retryable only for a connect failure or the attempt cap; every later
// failure is not retryable. At message_stop it calls call.SaveCheckpoint
// with the conversation including this turn, then emits the result chunk.
func (c *client) attempt(ctx context.Context, req Request, call adapter.Call, emit remote.Emit) error {
	model, err := call.RunModel(Name, req.Model)
	if err != nil {
		return err
	}
	if model == "" {
		return validationf("no model: the run is not pinned to one and the request names none")
	}
	pl, err := newPlan(req, model, call.Checkpoint)
	if err != nil {
		return err
	}
	header := http.Header{"Anthropic-Version": {APIVersion}}
	if !c.cfg.Credential.Empty() {
		header.Set("x-api-key", c.cfg.Credential.Reveal())
	}
	resp, err := remote.Post(ctx, c.cfg, Name, c.cfg.URL(MessagesPath), "text/event-stream", pl.body, header)
	if err != nil {
		return reclassify(err)
	}
	defer resp.Close()
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "text/event-stream" {
		return protocolf("the response is %q, not an event stream", resp.Header.Get("Content-Type"))
	}

	p := newParser(pl.tools, pl.webSearch, model)
	return readStream(ctx, resp.Body, p, func() error { return save(call, pl, p) }, emit)
}

// readStream reads the event stream body into p and emits the chunks in
// order. onStop runs at message_stop, before the result chunk is emitted.
// It returns nil at the end of the message or after an error event's
// chunk, emit's error as soon as emit returns one, ctx's error when ctx
// ends during a read, otherwise the attempt's typed, non-retryable error.
func readStream(ctx context.Context, body io.Reader, p *parser, onStop func() error, emit remote.Emit) error {
	events := sse.NewReader(body)
	for {
		ev, err := events.Next()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case err == io.EOF:
			return p.end()
		case errors.Is(err, sse.ErrTooLarge):
			return protocolf("%v", err)
		default:
			// The response had begun: a broken stream is never retried.
			return wire.Errorf(wire.ProviderTransportError, "%s: the stream broke off: %v", Name, err)
		}
		chunks, err := p.event(ev.Event, ev.Data)
		if err != nil {
			return err
		}
		if p.stopped {
			if err := onStop(); err != nil {
				return err
			}
		}
		if err := emit(chunks...); err != nil {
			return err
		}
		if p.done() {
			return nil
		}
	}
}

// save records the conversation with this turn's assistant message.
func save(call adapter.Call, pl *plan, p *parser) error {
	if call.SaveCheckpoint == nil {
		return nil
	}
	next := pl.next
	if content := p.assistantTurn(); content != nil {
		next.Messages = append(next.Messages, turn{Role: "assistant", Content: content})
	}
	next.MessageID, next.StopReason = p.messageID, p.stopReason
	b, err := wire.Marshal(next)
	if err != nil {
		return wire.Errorf(wire.ProviderError, "%s: the conversation's state cannot be checkpointed: %v", Name, err)
	}
	call.SaveCheckpoint(b)
	return nil
}

// reclassify refines remote.Do's status errors with what only this
// provider's bodies say: its context-window wordings beyond the shared
// ones, and billing_error (HTTP 402, credit exhausted) as a quota error.
// A 5xx stays ProviderError whatever its body says (remote.NewStatusError).
func reclassify(err error) error {
	var se *remote.StatusError
	if !errors.As(err, &se) || se.Err.Class != wire.ProviderError || se.StatusCode >= 500 {
		return err
	}
	switch {
	case contextText(se.Err.Message):
		return se.WithClass(wire.ProviderContextError)
	case strings.Contains(se.Err.Message, "billing_error"):
		return se.WithClass(wire.ProviderQuotaError)
	}
	return err
}
