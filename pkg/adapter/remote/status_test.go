package remote_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestStatusError: the status decides first; a 5xx other than 529 is the
// model API's server failure, ProviderError, whatever its text says; the
// status alone decides whether it is retryable.
func TestStatusError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   wire.Class
		// retryable: a 429, 529 or 5xx may pass; a 400, 401, 403 or any
		// other 4xx will not.
		retryable bool
		// retryAfter is the answer's Retry-After header, wantAfterMS the
		// RetryAfterMS it gives (only a retryable answer carries one).
		retryAfter  string
		wantAfterMS int64
	}{
		{name: "500", status: 500, body: `{"error":{"message":"The server had an error","type":"server_error"}}`, want: wire.ProviderError, retryable: true},
		{name: "502", status: 502, body: "Bad Gateway", want: wire.ProviderError, retryable: true},
		{name: "503", status: 503, body: `{"error":"service unavailable"}`, want: wire.ProviderError, retryable: true},
		{name: "503 saying overloaded", status: 503, body: `{"error":{"message":"The engine is currently overloaded, please try again later"}}`, want: wire.ProviderError, retryable: true},
		{name: "504", status: 504, body: "Gateway Timeout", want: wire.ProviderError, retryable: true},
		{name: "500 quoting a context length", status: 500, body: `{"error":"context length bookkeeping failed"}`, want: wire.ProviderError, retryable: true},
		{name: "529", status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, want: wire.ProviderQuotaError, retryable: true},
		{name: "429", status: 429, body: `{"error":"rate limited"}`, want: wire.ProviderQuotaError, retryable: true},
		{name: "401", status: 401, body: `{"error":"bad key"}`, want: wire.ProviderAuthError, retryable: false},
		{name: "403", status: 403, body: `{"error":"forbidden"}`, want: wire.ProviderAuthError, retryable: false},
		{name: "413", status: 413, body: "too large", want: wire.ProviderContextError, retryable: false},
		{name: "400 context length", status: 400, body: `{"error":{"message":"maximum context length is 8192 tokens"}}`, want: wire.ProviderContextError, retryable: false},
		{name: "400 overloaded", status: 400, body: `{"error":"model overloaded"}`, want: wire.ProviderQuotaError, retryable: false},
		{name: "404", status: 404, body: `{"error":"model not found"}`, want: wire.ProviderError, retryable: false},
		{name: "429 Retry-After seconds", status: 429, body: `{"error":"x"}`, want: wire.ProviderQuotaError, retryable: true, retryAfter: "2", wantAfterMS: 2000},
		{name: "503 Retry-After spaced", status: 503, body: `{"error":"x"}`, want: wire.ProviderError, retryable: true, retryAfter: " 1 ", wantAfterMS: 1000},
		{name: "529 Retry-After unreadable", status: 529, body: `{"error":"x"}`, want: wire.ProviderQuotaError, retryable: true, retryAfter: "soon"},
		{name: "401 ignores Retry-After", status: 401, body: `{"error":"x"}`, want: wire.ProviderAuthError, retryable: false, retryAfter: "5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tt.body))}
			if tt.retryAfter != "" {
				resp.Header.Set("Retry-After", tt.retryAfter)
			}
			got := remote.NewStatusError("api", resp).Err
			if got.Class != tt.want || got.Retryable != tt.retryable {
				t.Fatalf("StatusError(%d %s) = %v (retryable %t), want %s, retryable %t", tt.status, tt.body, got, got.Retryable, tt.want, tt.retryable)
			}
			if got.RetryAfterMS != tt.wantAfterMS {
				t.Errorf("RetryAfterMS = %d (Retry-After %q), want %d", got.RetryAfterMS, tt.retryAfter, tt.wantAfterMS)
			}
		})
	}
}

// TestRetryAfter reads both forms of RFC 9110's Retry-After against a
// fixed now.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	tests := []struct {
		name, in string
		want     time.Duration
	}{
		{name: "empty", in: "", want: 0},
		{name: "seconds", in: "120", want: 120 * time.Second},
		{name: "zero", in: "0", want: 0},
		{name: "negative", in: "-3", want: 0},
		{name: "huge seconds", in: "99999999999999999", want: 7 * 24 * time.Hour},
		{name: "fraction", in: "1.5", want: 0},
		{name: "http-date", in: "Wed, 02 Dec 2026 16:00:30 GMT", want: 30 * time.Second},
		{name: "rfc850 date", in: "Wednesday, 02-Dec-26 16:01:00 GMT", want: time.Minute},
		{name: "asctime date", in: "Wed Dec  2 16:00:05 2026", want: 5 * time.Second},
		{name: "date past", in: "Wed, 02 Dec 2026 15:59:00 GMT", want: 0},
		{name: "date far", in: "Wed, 02 Dec 2027 16:00:00 GMT", want: 7 * 24 * time.Hour},
		{name: "garbage", in: "later", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := remote.RetryAfter(tt.in, now); got != tt.want {
				t.Errorf("RetryAfter(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}
