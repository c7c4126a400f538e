package remote_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestStatusError: the status decides first; a 5xx other than 529 is the
// model API's server failure, ProviderError, whatever its text says.
func TestStatusError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   wire.Class
	}{
		{name: "500", status: 500, body: `{"error":{"message":"The server had an error","type":"server_error"}}`, want: wire.ProviderError},
		{name: "502", status: 502, body: "Bad Gateway", want: wire.ProviderError},
		{name: "503", status: 503, body: `{"error":"service unavailable"}`, want: wire.ProviderError},
		{name: "503 saying overloaded", status: 503, body: `{"error":{"message":"The engine is currently overloaded, please try again later"}}`, want: wire.ProviderError},
		{name: "504", status: 504, body: "Gateway Timeout", want: wire.ProviderError},
		{name: "500 quoting a context length", status: 500, body: `{"error":"context length bookkeeping failed"}`, want: wire.ProviderError},
		{name: "529", status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, want: wire.ProviderQuotaError},
		{name: "429", status: 429, body: `{"error":"rate limited"}`, want: wire.ProviderQuotaError},
		{name: "401", status: 401, body: `{"error":"bad key"}`, want: wire.ProviderAuthError},
		{name: "403", status: 403, body: `{"error":"forbidden"}`, want: wire.ProviderAuthError},
		{name: "413", status: 413, body: "too large", want: wire.ProviderContextError},
		{name: "400 context length", status: 400, body: `{"error":{"message":"maximum context length is 8192 tokens"}}`, want: wire.ProviderContextError},
		{name: "400 overloaded", status: 400, body: `{"error":"model overloaded"}`, want: wire.ProviderQuotaError},
		{name: "404", status: 404, body: `{"error":"model not found"}`, want: wire.ProviderError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.status, Body: io.NopCloser(strings.NewReader(tt.body))}
			got := remote.NewStatusError("api", resp).Err
			if got.Class != tt.want || got.Retryable {
				t.Fatalf("StatusError(%d %s) = %v (retryable %t), want %s, not retryable", tt.status, tt.body, got, got.Retryable, tt.want)
			}
		})
	}
}
