package remote

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// A StatusError is a provider's non-2xx answer to one attempt, as Do
// returns it. It wraps Err, the typed wire error the status maps to, so
// errors.As finds either: the *StatusError for the provider and the
// status, the *wire.Error for the class (and errors.Is matches the class).
// It is never retryable.
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
// API's server failure, the class every adapter gives it, README "Error
// classes"); for another 4xx, a message saying overloaded quota, a
// context-length message context, anything else ProviderError. It does not
// close the body.
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
	return &StatusError{Provider: provider, StatusCode: resp.StatusCode,
		Err: wire.Errorf(class, "%s: HTTP %d: %s", provider, resp.StatusCode, msg)}
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
