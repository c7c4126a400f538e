package openai_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The pinned model of every call, and the credential of every adapter:
// it must reach the Authorization header and nothing else.
const (
	model      = "gpt-5.5"
	credential = "sk-proj-TESTCREDENTIAL0123456789abcdef"
)

// newAdapter returns an adapter whose base URL is the fixture case name
// (the provider's /v1 root under it).
func newAdapter(t *testing.T, srv *replay.Server, name string, opts openai.Options) adapter.Adapter {
	t.Helper()
	a, err := openai.New(remote.Config{
		BaseURL:        srv.URL() + "/" + name + "/v1",
		AllowLoopback:  true,
		Credential:     secret.New(credential),
		AttemptTimeout: 10 * time.Second,
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// collect runs one stream to its end (conformance.Collect).
func collect(t *testing.T, a adapter.Adapter, c adapter.Call) ([]wire.Chunk, error) {
	t.Helper()
	o := conformance.Collect(t, a, c)
	return o.Chunks, o.Err
}

// fsRead is the dotted platform tool of the tool fixtures.
func fsRead(maxBytes int) map[string]any {
	return map[string]any{
		"name":        "fs.read",
		"description": "Read a file of the workspace",
		"input_schema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path":      map[string]any{"type": "string"},
				"max_bytes": map[string]any{"type": "integer", "minimum": 1, "maximum": maxBytes},
			},
			"required":             []any{"path"},
			"additionalProperties": false,
		},
	}
}

// class returns err's wire class and retryability.
func class(err error) (wire.Class, bool) {
	we := wire.AsError(err)
	if we == nil {
		return "", false
	}
	return we.Class, we.Retryable
}

// requestsOf returns the requests the server received for case name.
func requestsOf(srv *replay.Server, name string) []replay.Request {
	var out []replay.Request
	for _, r := range srv.Requests() {
		if r.Case == name {
			out = append(out, r)
		}
	}
	return out
}
