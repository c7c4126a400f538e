package codex

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestClassify: the texts Codex words failures with (testdata/cli/codex),
// and a 5xx other than 529 it quotes is ProviderError whatever else the
// text says.
func TestClassify(t *testing.T) {
	tests := []struct {
		name, in string
		want     wire.Class
	}{
		{name: "500, as Codex words it", in: "We’re currently experiencing high demand, which may cause temporary errors.", want: wire.ProviderError},
		{name: "502", in: "unexpected status 502 Bad Gateway: upstream connect error, url: http://127.0.0.1:1/v1/responses", want: wire.ProviderError},
		{name: "503 saying overloaded and quota", in: "exceeded retry limit, last status: 503 Service Unavailable (engine overloaded; quota unaffected)", want: wire.ProviderError},
		{name: "504 with a lost connection", in: "unexpected status 504 Gateway Timeout: connection reset", want: wire.ProviderError},
		{name: "529", in: "unexpected status 529: Overloaded", want: wire.ProviderQuotaError},
		{name: "429", in: "exceeded retry limit, last status: 429 Too Many Requests, request id: req_1", want: wire.ProviderQuotaError},
		{name: "401", in: "unexpected status 401 Unauthorized: Incorrect API key provided: fake-key.", want: wire.ProviderAuthError},
		{name: "context", in: "Your input exceeds the context window of this model.", want: wire.ProviderContextError},
		{name: "lost stream", in: "stream disconnected before completion: error sending request", want: wire.ProviderTransportError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.in); got != tt.want {
				t.Fatalf("classify(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}
