package nlip_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/nlip"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const model = "travel-agent"

// agentURL is the agent URL of case name: the reference server's /nlip/.
func agentURL(srv *replay.Server, name string) string {
	return srv.URL() + "/" + name + "/nlip/"
}

func newAdapter(t *testing.T, srv *replay.Server, name string) adapter.Adapter {
	t.Helper()
	a, err := nlip.New(remote.Config{BaseURL: agentURL(srv, name), AllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// runCall ranges over one attempt to its end, recording what it saves.
func runCall(t *testing.T, a adapter.Adapter, call adapter.Call) conformance.Outcome {
	t.Helper()
	return conformance.CollectSaving(t, a, call)
}

// call validates fields as the router does and returns the first
// attempt's call on checkpoint.
func call(t *testing.T, a adapter.Adapter, fields map[string]any, checkpoint []byte) adapter.Call {
	t.Helper()
	c := conformance.Call(t, a, model, fields)
	c.Checkpoint = checkpoint
	return c
}

func run(t *testing.T, a adapter.Adapter, prompt string, checkpoint []byte) conformance.Outcome {
	t.Helper()
	return runCall(t, a, call(t, a, map[string]any{"prompt": prompt}, checkpoint))
}

var caps = nlip.Capabilities

func sys() wire.Chunk {
	return wire.Chunk{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: "nlip", Model: model, Capabilities: &caps}}
}
func text(s string) wire.Chunk { return wire.Chunk{Type: wire.ChunkText, Content: s} }
func result(stop string) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkResult, Metadata: wire.Metadata{StopReason: stop}}
}
func errChunk(class wire.Class, msg string) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkError, Content: msg, IsError: true, Metadata: wire.Metadata{ErrorClass: class}}
}

// TestConformance runs the conformance suite over the nlip adapter, the
// agent's answers served over real loopback HTTP from testdata/remote/nlip.
func TestConformance(t *testing.T) {
	t.Parallel()
	srv := conformance.ReplayServer(t, nlip.Name)
	// The agent answers in one JSON object; the slow one sends it in two
	// pieces after its headers, so that the suite can cancel the run
	// between the system chunk and the answer.
	slow := conformance.PacedServer(t, replay.Response{Headers: map[string]string{"Content-Type": "application/json"}}, []string{
		`{"format": "text", "subformat": "english",` + "\n",
		`"content": "The answer is 42.", "submessages": [{"format": "token", "subformat": "conversation", "content": "c1"}]}` + "\n",
	}, 40*time.Millisecond)
	base := conformance.CaseURLs(srv, slow, "/nlip/")
	build := func(url string) (adapter.Adapter, error) {
		return nlip.New(remote.Config{BaseURL: url, AllowLoopback: true})
	}
	conformance.Run(t, conformance.Subject{
		Name: nlip.Name,
		New: func(cli.Config) (adapter.Adapter, error) {
			return conformance.PromptCased(nlip.Name, "plain-text", base, build, func(req any) string { return req.(nlip.Request).Prompt })
		},
		Model:   "travel-agent",
		Request: func(p string) map[string]any { return map[string]any{"prompt": p} },
		Streams: append([]conformance.Stream{{Name: "default"}}, conformance.CaseStreams("multi-part", "input-required",
			"no-context", "empty-answer", "provider-error", "cut", "unsupported-part", "http-401", "http-429", "http-500", "http-529")...),
		Happy:        "default",
		Errors:       []string{"provider-error"},
		ServerErrors: []string{"http-500"},
		Slow:         conformance.CaseStreams("slow")[0],
	})
}
