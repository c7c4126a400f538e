// Package remote is what every remote adapter shares (docs/contract.md
// §4.9 "Remote safety" and §9.5): the frame each API adapter is built on
// (Spec, whose streams pass the stream rules at one boundary), the
// operator's configuration from the profile, one SSRF-safe client per
// logical request, the per-attempt cap, the one classification of
// transport failures (retryable only before any response) and of HTTP
// status errors (*StatusError: retryable for a 429, 529 or 5xx), and the
// closed adapter a remote profile without its credential becomes.
package remote

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/safehttp"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// DefaultAttemptTimeout is the record's per-attempt cap.
const DefaultAttemptTimeout = 60 * time.Second

// Config is a remote adapter's operator configuration, from its profile.
type Config struct {
	// BaseURL is the provider's API root (http or https).
	BaseURL string
	// AllowLoopback permits a loopback BaseURL (a local Ollama, a fixture server).
	AllowLoopback bool
	// Credential is sent as the provider's auth header; empty for none.
	Credential secret.String
	// AttemptTimeout caps one attempt from dialing until the response's
	// headers arrive: the window in which a failure may still be retried.
	// After that the run's deadline governs the stream (default 60s).
	AttemptTimeout time.Duration
	// Resolver resolves names at dial time (tests inject one).
	Resolver *net.Resolver
}

// Check validates the base URL before any client exists.
func (c Config) Check() error {
	if _, err := safehttp.CheckURL(c.BaseURL, c.policy()); err != nil {
		return wire.Errorf(wire.ProfileError, "base_url %q: %v", c.BaseURL, err)
	}
	return nil
}

func (c Config) policy() safehttp.Policy {
	return safehttp.Policy{AllowLoopback: c.AllowLoopback, Resolver: c.Resolver}
}

// URL joins the base URL and path.
func (c Config) URL(path string) string {
	return strings.TrimSuffix(c.BaseURL, "/") + "/" + strings.TrimPrefix(path, "/")
}

// Response is an open 2xx response of one attempt. Close it (it closes
// the attempt's client too).
type Response struct {
	*http.Response
	client *http.Client
	stop   func() bool
}

// Close closes the body and the attempt's client.
func (r *Response) Close() error {
	r.stop()
	err := r.Body.Close()
	r.client.CloseIdleConnections()
	return err
}

// Do sends req, a request for c.URL(...), on a fresh SSRF-safe client. It
// returns the open response for a 2xx status. A failure before the
// response arrives (connect refused, DNS, timeout of the attempt cap) is a
// retryable ProviderTransportError; a refused destination is a
// non-retryable ProviderTransportError; any other status is a
// *StatusError, typed (retryable for a 429, 529 or 5xx, with the
// answer's Retry-After). ctx bounds the whole exchange,
// body included.
func Do(ctx context.Context, c Config, provider string, req *http.Request) (*Response, error) {
	if _, err := safehttp.CheckURL(req.URL.String(), c.policy()); err != nil {
		return nil, wire.Errorf(wire.ProviderTransportError, "%s: %v", provider, err)
	}
	timeout := c.AttemptTimeout
	if timeout <= 0 {
		timeout = DefaultAttemptTimeout
	}
	client := safehttp.NewClient(c.policy(), 0)
	actx, cancel := context.WithCancelCause(ctx)
	capTimer := time.AfterFunc(timeout, func() { cancel(errAttemptCap) })
	resp, err := client.Do(req.WithContext(actx))
	if !capTimer.Stop() && err == nil {
		// The cap fired as the headers arrived: treat it as the timeout.
		resp.Body.Close()
		err = errAttemptCap
	}
	if err != nil {
		cancel(nil)
		client.CloseIdleConnections()
		return nil, transportError(ctx, provider, err, context.Cause(actx))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer func() { cancel(nil); client.CloseIdleConnections() }()
		defer resp.Body.Close()
		return nil, NewStatusError(provider, resp)
	}
	return &Response{Response: resp, client: client, stop: func() bool { cancel(nil); return true }}, nil
}

// Post sends body, a JSON request, to url (c.URL of the endpoint) as one
// attempt's POST through Do, asking for the media type accept; header
// holds the provider's own headers (its credential, an API version). It
// returns what Do returns; a url that makes no request is a ProfileError.
func Post(ctx context.Context, c Config, provider, url, accept string, body []byte, header http.Header) (*Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, wire.Errorf(wire.ProfileError, "%s: request: %v", provider, err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	return Do(ctx, c, provider, req)
}

// Bearer is the header that sends c's credential as a bearer token, for
// Post; nil when c has no credential.
func (c Config) Bearer() http.Header {
	if c.Credential.Empty() {
		return nil
	}
	return http.Header{"Authorization": {"Bearer " + c.Credential.Reveal()}}
}

var errAttemptCap = errors.New("attempt cap reached before a response")

// transportError classifies a failure before any response.
func transportError(ctx context.Context, provider string, err, cause error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx) // the run was cancelled or passed its deadline
	}
	if errors.Is(err, safehttp.ErrRefused) {
		return wire.Errorf(wire.ProviderTransportError, "%s: %v", provider, err)
	}
	if errors.Is(cause, errAttemptCap) {
		return wire.Errorf(wire.ProviderTransportError, "%s: no response within the attempt cap", provider).Retry()
	}
	return wire.Errorf(wire.ProviderTransportError, "%s: %v", provider, err).Retry()
}

// Declaration is what a remote adapter declares about itself, and what
// the Unavailable adapter standing in for it declares in its place, so a
// profile is checked against the real adapter's declaration whether or not
// its credential is set.
type Declaration struct {
	// Capabilities is the adapter's capability declaration.
	Capabilities wire.Capabilities
	// RuntimeKeys are the runtime-only keys it accepts.
	RuntimeKeys []string
	// TokenClasses are the token classes its usage can carry
	// (adapter.TokenClasses); empty when it reports no usage.
	TokenClasses []string
	// MaxPricedContext is the largest context window one price covers
	// (adapter.PricedContext); 0 for no bound.
	MaxPricedContext int
}

// Unavailable is the closed adapter a remote profile becomes when its
// credential variable is unset: it makes the real adapter's declaration d
// (capabilities, runtime keys, token classes, priced context) so nothing
// else breaks, and choosing it fails with ProviderUnavailable before
// anything starts. It is safe for concurrent use.
func Unavailable(name string, d Declaration, credentialEnv string) adapter.Adapter {
	return &unavailable{declared: declare(name, d), env: credentialEnv}
}

type unavailable struct {
	declared
	env string
}

var (
	_ adapter.TokenClasses  = (*unavailable)(nil)
	_ adapter.PricedContext = (*unavailable)(nil)
)

func (u *unavailable) err() *wire.Error {
	return wire.Errorf(wire.ProviderUnavailable, "%s is unavailable: its credential variable %s is not set", u.name, u.env)
}
func (u *unavailable) Validate([]byte) (any, error) { return nil, u.err() }
func (u *unavailable) Stream(context.Context, adapter.Call) iter.Seq2[wire.Chunk, error] {
	return func(yield func(wire.Chunk, error) bool) { yield(wire.Chunk{}, u.err()) }
}
