package gemini

import (
	"fmt"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestClassifyAPIErrorByStatus: the API's HTTP code decides first; a 5xx
// other than 529 is ProviderError whatever its message says.
func TestClassifyAPIErrorByStatus(t *testing.T) {
	apiError := func(code int, status, msg string) string {
		return fmt.Sprintf(`[API Error: {"error":{"code":%d,"message":%q,"status":%q}}]`, code, msg, status)
	}
	tests := []struct {
		name string
		in   string
		want wire.Class
	}{
		{name: "500", in: apiError(500, "INTERNAL", "An internal error has occurred."), want: wire.ProviderError},
		{name: "502", in: apiError(502, "", "Bad Gateway"), want: wire.ProviderError},
		{name: "503 overloaded", in: apiError(503, "UNAVAILABLE", "The model is overloaded. Please try again later."), want: wire.ProviderError},
		{name: "504", in: apiError(504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete."), want: wire.ProviderError},
		{name: "500 quoting too many tokens", in: apiError(500, "INTERNAL", "too many tokens in flight"), want: wire.ProviderError},
		{name: "529", in: apiError(529, "", "Overloaded"), want: wire.ProviderQuotaError},
		{name: "429", in: apiError(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted"), want: wire.ProviderQuotaError},
		{name: "401", in: apiError(401, "UNAUTHENTICATED", "API key not valid"), want: wire.ProviderAuthError},
		{name: "400 context", in: apiError(400, "INVALID_ARGUMENT", "The input token count exceeds the maximum number of tokens allowed"), want: wire.ProviderContextError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, got := classifyAPIError(tt.in); got != tt.want {
				t.Fatalf("classifyAPIError(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}
