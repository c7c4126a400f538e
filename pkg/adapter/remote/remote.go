// Package remote is what every remote adapter shares (DESIGN §4 "Remote
// safety", D5 "Remote adapter"): the operator's configuration from the
// profile, one SSRF-safe client per logical request, the per-attempt cap,
// the one classification of transport failures (retryable only before any
// response) and of HTTP status errors (never retryable here), and the
// closed adapter a remote profile without its credential becomes.
package remote

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/safehttp"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// DefaultAttemptTimeout is the record's per-attempt cap.
const DefaultAttemptTimeout = 60 * time.Second

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

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
// non-retryable ProviderTransportError; any other status is StatusError's
// typed, non-retryable error. ctx bounds the whole exchange, body included.
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
		return nil, StatusError(provider, resp)
	}
	return &Response{Response: resp, client: client, stop: func() bool { cancel(nil); return true }}, nil
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

// StatusError types a non-2xx response by its status first: 401/403
// auth; 429 and 529 (overloaded) quota; 413 context; any other 5xx
// ProviderError whatever its text says (the model API's server failure,
// the class every adapter gives it, README "Error classes"); for another
// 4xx, a message saying overloaded quota, a context-length message
// context, anything else ProviderError. Never retryable. The message
// carries the provider's own error text, bounded and redacted.
func StatusError(provider string, resp *http.Response) *wire.Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := errorText(body)
	class := wire.ProviderError
	low := strings.ToLower(msg)
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		class = wire.ProviderAuthError
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == 529:
		class = wire.ProviderQuotaError
	case resp.StatusCode >= 500:
		class = wire.ProviderError
	case strings.Contains(low, "overloaded"):
		class = wire.ProviderQuotaError
	case resp.StatusCode == http.StatusRequestEntityTooLarge || strings.Contains(low, "context length") ||
		strings.Contains(low, "context_length") || strings.Contains(low, "prompt is too long") || strings.Contains(low, "maximum context") ||
		strings.Contains(low, "context window") || strings.Contains(low, "context limit"):
		class = wire.ProviderContextError
	}
	return wire.Errorf(class, "%s: HTTP %d: %s", provider, resp.StatusCode, msg)
}

// errorText finds the provider's message in an error body ({"error":
// {"message"}}, {"error": "..."}, {"message": "..."}), else the raw text.
func errorText(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"` // FastAPI servers (the NLIP reference)
	}
	if json.Unmarshal(body, &v) == nil {
		var inner struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		}
		if json.Unmarshal(v.Error, &inner) == nil && inner.Message != "" {
			if inner.Type != "" {
				return inner.Type + ": " + inner.Message
			}
			return inner.Message
		}
		var s string
		if json.Unmarshal(v.Error, &s) == nil && s != "" {
			return s
		}
		if v.Message != "" {
			return v.Message
		}
		if json.Unmarshal(v.Detail, &s) == nil && s != "" {
			return s
		}
	}
	s := strings.TrimSpace(string(body))
	if s == "" {
		return "(empty body)"
	}
	return s
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
	d.RuntimeKeys = slices.Clone(d.RuntimeKeys)
	d.TokenClasses = slices.Clone(d.TokenClasses)
	return &unavailable{name: name, decl: d, env: credentialEnv}
}

type unavailable struct {
	name string
	decl Declaration
	env  string
}

var (
	_ adapter.TokenClasses  = (*unavailable)(nil)
	_ adapter.PricedContext = (*unavailable)(nil)
)

func (u *unavailable) Name() string                    { return u.name }
func (u *unavailable) Capabilities() wire.Capabilities { return u.decl.Capabilities }
func (u *unavailable) RuntimeKeys() []string           { return slices.Clone(u.decl.RuntimeKeys) }
func (u *unavailable) TokenClasses() []string          { return slices.Clone(u.decl.TokenClasses) }
func (u *unavailable) MaxPricedContext() int           { return u.decl.MaxPricedContext }
func (u *unavailable) err() *wire.Error {
	return wire.Errorf(wire.ProviderUnavailable, "%s is unavailable: its credential variable %s is not set", u.name, u.env)
}
func (u *unavailable) Validate([]byte) (any, error) { return nil, u.err() }
func (u *unavailable) Stream(context.Context, adapter.Call) iter.Seq2[wire.Chunk, error] {
	return func(yield func(wire.Chunk, error) bool) { yield(wire.Chunk{}, u.err()) }
}
