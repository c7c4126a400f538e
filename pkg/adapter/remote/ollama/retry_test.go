package ollama_test

import (
	"errors"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/ollama"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestAttemptFailures is acceptance 4 at the adapter level: a failure
// before any output that the mesh may retry (connect refused, no response
// within the attempt cap) is a retryable ProviderTransportError and yields
// no chunk; a 500 is retryable, a 401 is not; a failure after the first
// chunk is not retryable.
func TestAttemptFailures(t *testing.T) {
	srv := conformance.ReplayServer(t, ollama.Name)
	for _, tt := range conformance.FailedAttempts(t, srv, "", 3) {
		t.Run(tt.Name, func(t *testing.T) {
			a, err := ollama.New(remote.Config{BaseURL: tt.BaseURL, AllowLoopback: true, AttemptTimeout: tt.AttemptTimeout})
			if err != nil {
				t.Fatal(err)
			}
			o := run(t, a, map[string]any{"prompt": "hi"}, nil)
			tt.Check(t, o.Chunks, o.Err)
		})
	}
	// A loopback server the profile does not allow is refused before any
	// client exists.
	if _, err := ollama.New(remote.Config{BaseURL: srv.URL() + "/plain-text"}); !errors.Is(err, wire.ProfileError) {
		t.Errorf("loopback not allowed: err = %v, want ProfileError", err)
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
