package openai_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// runPolicy is the runner's attempt policy (docs/contract.md §4.5), written out so the
// adapter's classification can be seen driving it: retry a retryable
// error before the first chunk, at most maxAttempts times; anything else
// ends the run. It returns the attempts made and the last outcome.
func runPolicy(t *testing.T, a adapter.Adapter, maxAttempts int) (int, []wire.Chunk, error) {
	t.Helper()
	for n := 1; ; n++ {
		c := conformance.Call(t, a, model, map[string]any{"prompt": conformance.Prompt})
		c.Attempt, c.MaxAttempts = n, maxAttempts
		chunks, err := collect(t, a, c)
		var we *wire.Error
		if len(chunks) == 0 && errors.As(err, &we) && we.Retryable && n < maxAttempts {
			continue
		}
		return n, chunks, err
	}
}

func remoteAdapter(t *testing.T, baseURL string, timeout time.Duration) adapter.Adapter {
	t.Helper()
	a, err := openai.New(remote.Config{BaseURL: baseURL, AllowLoopback: true, Credential: secret.New(credential), AttemptTimeout: timeout}, openai.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAttempts is acceptance 4 at the adapter: connect refusal and the
// attempt cap before any response, and an HTTP 500, are retryable and
// retried up to max_attempts; an HTTP 401 is not; a failure after the first
// chunk is not.
func TestAttempts(t *testing.T) {
	srv := conformance.ReplayServer(t, openai.Name)
	for _, tt := range conformance.FailedAttempts(t, srv, "/v1", 3) {
		t.Run(tt.Name, func(t *testing.T) {
			// A retryable failure before output is tried max_attempts
			// times, any other once.
			want := 1
			if tt.Retryable {
				want = 3
			}
			n, chunks, err := runPolicy(t, remoteAdapter(t, tt.BaseURL, tt.AttemptTimeout), 3)
			if n != want {
				t.Errorf("%d attempts, want %d (err %v)", n, want, err)
			}
			tt.Check(t, chunks, err)
		})
	}
	if n := len(requestsOf(srv, "cut")); n != 1 {
		t.Errorf("the cut stream was requested %d times: a failure after output must not be replayed", n)
	}
	if n := len(requestsOf(srv, "http-500")); n != 3 {
		t.Errorf("the 500 was requested %d times, want 3 (max_attempts)", n)
	}
	if n := len(requestsOf(srv, "http-401")); n != 1 {
		t.Errorf("the 401 was requested %d times, want 1", n)
	}
}

// TestUnavailable: without its credential the profile's adapter is the
// closed one, with the same declaration.
func TestUnavailable(t *testing.T) {
	a := openai.Unavailable("OPENAI_API_KEY")
	if a.Name() != openai.Name || a.Capabilities() != openai.Capabilities {
		t.Errorf("Unavailable declares %s %+v", a.Name(), a.Capabilities())
	}
	if _, err := a.Validate(conformance.Encode(t, map[string]any{"prompt": "hi"})); !errors.Is(err, wire.ProviderUnavailable) {
		t.Errorf("Validate: %v", err)
	}
}

// TestNewChecksBaseURL: an unsafe base URL fails before any client exists.
func TestNewChecksBaseURL(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8080/v1", "ftp://api.openai.com/v1", "http://169.254.169.254/v1", "http://[::1]/v1"} {
		if _, err := openai.New(remote.Config{BaseURL: u}, openai.Options{}); !errors.Is(err, wire.ProfileError) {
			t.Errorf("New(%q): err = %v, want ProfileError", u, err)
		}
	}
}
