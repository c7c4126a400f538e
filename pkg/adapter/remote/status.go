package remote

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// A StatusError is a provider's non-2xx answer to one attempt, as Do
// returns it. It wraps Err, the typed wire error the status maps to, so
// errors.As finds either: the *StatusError for the provider and the
// status, the *wire.Error for the class (and errors.Is matches the class).
// Its wire error is retryable for a 429, a 529 or a 5xx, the provider's
// passing failures (it comes before any output, so the runner may try
// again, docs/contract.md §4.5), and carries the answer's Retry-After.
type StatusError struct {
	// Provider is the adapter that sent the request.
	Provider string
	// StatusCode is the HTTP status of the answer.
	StatusCode int
	// Err has the status's class and a message carrying the provider's own
	// error text, bounded and redacted.
	Err *wire.Error
}

func (e *StatusError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *StatusError) Unwrap() error { return e.Err }

// WithClass returns a copy of e whose wire error has class c, for an
// adapter that refines the class by what only its provider's bodies say.
// e is not changed.
func (e *StatusError) WithClass(c wire.Class) *StatusError {
	we := *e.Err
	we.Class = c
	return &StatusError{Provider: e.Provider, StatusCode: e.StatusCode, Err: &we}
}

// NewStatusError reads resp's body (at most 64 KiB) and types the answer
// by its status first: 401/403 auth; 429 and 529 (overloaded) quota; 413
// context; any other 5xx ProviderError whatever its text says (the model
// API's server failure, the class every adapter gives it, docs/contract-notes.md, "Error
// classes"); for another 4xx, a message saying overloaded quota, a
// context-length message context, anything else ProviderError. A 429, 529
// or 5xx is retryable, with the Retry-After of resp (RetryAfter) as the
// wire error's RetryAfterMS; any other status is not. It does not close
// the body.
func NewStatusError(provider string, resp *http.Response) *StatusError {
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
	we := wire.Errorf(class, "%s: HTTP %d: %s", provider, resp.StatusCode, msg)
	if retryableStatus(resp.StatusCode) {
		we.Retry()
		we.RetryAfterMS = RetryAfter(resp.Header.Get("Retry-After"), time.Now()).Milliseconds()
	}
	return &StatusError{Provider: provider, StatusCode: resp.StatusCode, Err: we}
}

// retryableStatus reports whether an answer with status code may succeed
// when asked again: a rate limit (429), an overload (529, Anthropic's) or
// any server failure (5xx). A 400, 401, 403 or any other 4xx will not.
func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == 529 || code >= 500
}

// maxRetryAfter bounds what a Retry-After is read as, far above any run's
// deadline, so the milliseconds never overflow.
const maxRetryAfter = 7 * 24 * time.Hour

// RetryAfter reads a Retry-After header value (RFC 9110 §10.2.3), either
// delay-seconds ("120") or an HTTP-date, as the wait it asks for from now:
// 0 for an empty or unreadable value and for a date not after now, at
// most a week.
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil || !at.After(now) {
		return 0
	}
	return min(at.Sub(now), maxRetryAfter)
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
