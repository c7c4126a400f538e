package anthropic

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestReclassify: the provider's own wordings refine a 4xx; a 5xx stays
// ProviderError whatever its body says.
func TestReclassify(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   wire.Class
	}{
		{name: "400 context limit", status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"input length and max_tokens exceed context limit"}}`, want: wire.ProviderContextError},
		{name: "402 billing", status: 402, body: `{"type":"error","error":{"type":"billing_error","message":"credit balance too low"}}`, want: wire.ProviderQuotaError},
		{name: "500", status: 500, body: `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, want: wire.ProviderError},
		{name: "500 quoting the context limit", status: 500, body: `{"type":"error","error":{"type":"api_error","message":"failed to exceed context limit check"}}`, want: wire.ProviderError},
		{name: "503 billing backend", status: 503, body: `{"type":"error","error":{"type":"billing_error","message":"billing backend down"}}`, want: wire.ProviderError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := reclassify(remote.NewStatusError(Name, &http.Response{StatusCode: tt.status, Body: io.NopCloser(strings.NewReader(tt.body))}))
			if got := wire.AsError(err); got.Class != tt.want {
				t.Fatalf("reclassify = %v, want %s", got, tt.want)
			}
		})
	}
}
