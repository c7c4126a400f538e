package openai_test

import (
	"context"
	"encoding/json"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// update rewrites the expected chunk streams of testdata/remote/openai/want.
var update = flag.Bool("update", false, "rewrite the expected chunk streams")

// fixtureDir holds the recorded responses; wantDir the expected outcomes.
var (
	fixtureDir = filepath.Join("..", "..", "..", "..", "testdata", "remote", "openai")
	wantDir    = filepath.Join(fixtureDir, "want")
)

// The pinned model of every call, and the credential of every adapter:
// it must reach the Authorization header and nothing else.
const (
	model      = "gpt-5.5"
	credential = "sk-proj-TESTCREDENTIAL0123456789abcdef"
)

// startServer serves the recorded responses on loopback until the test ends.
func startServer(t *testing.T) *replay.Server {
	t.Helper()
	srv, err := replay.Start(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

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

// encode returns the msgpack request of fields.
func encode(t *testing.T, fields map[string]any) []byte {
	t.Helper()
	b, err := wire.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// call validates fields and returns an attempt's call on the pinned model.
func call(t *testing.T, a adapter.Adapter, fields map[string]any) adapter.Call {
	t.Helper()
	req, err := a.Validate(encode(t, fields))
	if err != nil {
		t.Fatalf("validate %v: %v", fields, err)
	}
	return adapter.Call{RunID: "run-1", Request: req, Attempt: 1, Model: model, MaxAttempts: 3}
}

// collect runs one stream to its end.
func collect(t *testing.T, a adapter.Adapter, c adapter.Call) ([]wire.Chunk, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var chunks []wire.Chunk
	var final error
	for ch, err := range a.Stream(ctx, c) {
		if final != nil {
			t.Fatalf("the stream yielded (%+v, %v) after its error %v", ch, err, final)
		}
		if err != nil {
			final = err
			continue
		}
		chunks = append(chunks, ch)
	}
	return chunks, final
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

// chunkJSON is every chunk's JSON, one a line.
func chunkJSON(t *testing.T, chunks []wire.Chunk) string {
	t.Helper()
	var b strings.Builder
	for _, c := range chunks {
		j, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
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
