package ollama_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/ollama"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestAttemptFailures is acceptance 4 at the adapter level: a failure
// before any output that the mesh may retry (connect refused, no response
// within the attempt cap) is a retryable ProviderTransportError and yields
// no chunk; a status error is not retryable; a failure after the first
// chunk is not retryable.
func TestAttemptFailures(t *testing.T) {
	srv := conformance.ReplayServer(t, ollama.Name)
	closed, stall := conformance.RefusedURL(t), conformance.SilentURL(t)

	tests := []struct {
		name      string
		cfg       remote.Config
		class     wire.Class
		retryable bool
		chunks    int
	}{
		{name: "connect refused", cfg: remote.Config{BaseURL: closed, AllowLoopback: true},
			class: wire.ProviderTransportError, retryable: true},
		{name: "attempt cap", cfg: remote.Config{BaseURL: stall, AllowLoopback: true, AttemptTimeout: 50 * time.Millisecond},
			class: wire.ProviderTransportError, retryable: true},
		{name: "HTTP 500", cfg: remote.Config{BaseURL: srv.URL() + "/http-500", AllowLoopback: true},
			class: wire.ProviderError},
		{name: "HTTP 401", cfg: remote.Config{BaseURL: srv.URL() + "/http-401", AllowLoopback: true},
			class: wire.ProviderAuthError},
		{name: "cut after output", cfg: remote.Config{BaseURL: srv.URL() + "/cut", AllowLoopback: true},
			class: wire.ProviderTransportError, chunks: 3},
		{name: "loopback not allowed", cfg: remote.Config{BaseURL: srv.URL() + "/plain-text"},
			class: wire.ProfileError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ollama.New(tt.cfg)
			if err != nil {
				var we *wire.Error
				if errors.As(err, &we) && we.Class == tt.class {
					return // refused before any client exists
				}
				t.Fatal(err)
			}
			o := run(t, a, map[string]any{"prompt": "hi"}, nil)
			var we *wire.Error
			if !errors.As(o.Err, &we) {
				t.Fatalf("err = %v (%T), want a *wire.Error", o.Err, o.Err)
			}
			if we.Class != tt.class || we.Retryable != tt.retryable {
				t.Errorf("err = %v (retryable %t), want class %s retryable %t", we, we.Retryable, tt.class, tt.retryable)
			}
			if len(o.Chunks) != tt.chunks {
				t.Errorf("%d chunks, want %d:\n%s", len(o.Chunks), tt.chunks, conformance.ChunksJSON(o.Chunks))
			}
		})
	}
}

func TestNewRefusesACredential(t *testing.T) {
	_, err := ollama.New(remote.Config{BaseURL: ollama.DefaultBaseURL, AllowLoopback: true, Credential: secretFor("sk-x")})
	if !errors.Is(err, wire.ProfileError) {
		t.Errorf("err = %v, want ProfileError", err)
	}
	if _, err := ollama.New(remote.Config{BaseURL: ""}); !errors.Is(err, wire.ProfileError) {
		t.Errorf("empty base URL: err = %v, want ProfileError", err)
	}
	if _, err := ollama.New(remote.Config{BaseURL: "http://169.254.169.254"}); !errors.Is(err, wire.ProfileError) {
		t.Errorf("metadata address: err = %v, want ProfileError", err)
	}
}
