package ollama_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/ollama"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const model = "qwen3:8b"

// newAdapter returns the adapter pointed at case name of srv.
func newAdapter(t *testing.T, srv *replay.Server, name string) adapter.Adapter {
	t.Helper()
	a, err := ollama.New(remote.Config{BaseURL: srv.URL() + "/" + name, AllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// run validates fields as the router does and ranges over one attempt on
// checkpoint to its end, recording what it saves.
func run(t *testing.T, a adapter.Adapter, fields map[string]any, checkpoint []byte) conformance.Outcome {
	t.Helper()
	call := conformance.Call(t, a, model, fields)
	call.Checkpoint = checkpoint
	return conformance.CollectSaving(t, a, call)
}

// Chunk builders for expected streams.
var caps = ollama.Capabilities

func sys() wire.Chunk {
	return wire.Chunk{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: "ollama", Model: model, Capabilities: &caps}}
}
func text(s string) wire.Chunk { return wire.Chunk{Type: wire.ChunkText, Content: s, IsDelta: true} }
func think(s string) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkThinking, Content: s, IsDelta: true}
}
func tool(id, name string, input map[string]any) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkToolUse, ToolID: id, ToolName: name, ToolInput: input}
}
func result(in, out, ms int64, stop string) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkResult, Metadata: wire.Metadata{Usage: &wire.Usage{InputTokens: in, OutputTokens: out},
		DurationMS: &ms, StopReason: stop}}
}
func errChunk(class wire.Class, msg string) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkError, Content: msg, IsError: true, Metadata: wire.Metadata{ErrorClass: class}}
}

func secretFor(s string) secret.String { return secret.New(s) }

// TestConformance runs the conformance suite over the ollama adapter, its
// streams served over real loopback HTTP from testdata/remote/ollama.
func TestConformance(t *testing.T) {
	t.Parallel()
	srv := conformance.ReplayServer(t, ollama.Name)
	slow := conformance.PacedServer(t, replay.Response{Headers: map[string]string{"Content-Type": "application/x-ndjson"}}, ollamaSlow(), 40*time.Millisecond)
	base := conformance.CaseURLs(srv, slow, "")
	newOllama := func(url string) (adapter.Adapter, error) {
		return ollama.New(remote.Config{BaseURL: url, AllowLoopback: true})
	}
	weather := map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string"}}}}
	conformance.Run(t, conformance.Subject{
		Name: ollama.Name,
		New: func(cli.Config) (adapter.Adapter, error) {
			return conformance.PromptCased(ollama.Name, "plain-text", base, newOllama, func(req any) string { return req.(ollama.Request).Prompt })
		},
		Model:   "qwen3:8b",
		Request: func(p string) map[string]any { return map[string]any{"prompt": p} },
		Streams: append([]conformance.Stream{
			{Name: "default"},
			{Name: "tool-call", Request: map[string]any{"prompt": conformance.CasePrefix + "tool-call", "tools": []any{weather}}},
		}, conformance.CaseStreams("thinking", "usage", "provider-error", "cut", "no-done", "http-401", "http-429", "http-500", "http-529")...),
		Happy:        "default",
		Errors:       []string{"provider-error"},
		ServerErrors: []string{"http-500"},
		Slow:         conformance.CaseStreams("slow")[0],
		Reasoning:    "the user wants a short answer",
	})
}

// ollamaSlow is a plain answer whose objects the paced server sends one
// by one, so that the suite can cancel it after its first chunk.
func ollamaSlow() []string {
	var lines []string
	for _, w := range []string{"The", " answer", " is", " 42", "."} {
		lines = append(lines, fmt.Sprintf(`{"model":"qwen3:8b","message":{"role":"assistant","content":%q},"done":false}`+"\n", w))
	}
	return append(lines, `{"model":"qwen3:8b","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":15,"eval_count":6}`+"\n")
}

// TestOllamaToolStreams checks the tool streams of the ollama adapter
// against the stream rules under its real declaration (emits_tool_events
// true), while TestConformance waits for the remote tool proof: the
// recorded tool calls, with and without the server's ids, as the first run
// of a round trip yields them.
func TestOllamaToolStreams(t *testing.T) {
	t.Parallel()
	srv := conformance.ReplayServer(t, ollama.Name)
	weather := map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string"}}}}
	for _, name := range []string{"tool-call", "tool-roundtrip", "tool-roundtrip-noid"} {
		t.Run(name, func(t *testing.T) {
			a, err := ollama.New(remote.Config{BaseURL: srv.URL() + "/" + name, AllowLoopback: true})
			if err != nil {
				t.Fatal(err)
			}
			b, err := wire.Marshal(map[string]any{"prompt": "Weather?", "tools": []any{weather}})
			if err != nil {
				t.Fatal(err)
			}
			req, err := a.Validate(b)
			if err != nil {
				t.Fatal(err)
			}
			var chunks []wire.Chunk
			var streamErr error
			uses := 0
			for c, err := range a.Stream(context.Background(), adapter.Call{RunID: "conformance-1", Request: req, Attempt: 1, Model: "qwen3:8b", MaxAttempts: 3}) {
				if err != nil {
					streamErr = err
					continue
				}
				chunks = append(chunks, c)
				if c.Type == wire.ChunkToolUse {
					uses++
				}
			}
			for _, p := range conformance.Check(ollama.Capabilities, chunks, streamErr, conformance.Ran) {
				t.Errorf("stream rule: %s", p)
			}
			if streamErr != nil || uses == 0 {
				t.Errorf("err %v, %d tool_use chunks; want a clean end with tool calls", streamErr, uses)
			}
			if last := chunks[len(chunks)-1]; last.Type != wire.ChunkResult || last.Metadata.StopReason != "tool_use" {
				t.Errorf("last chunk %+v, want the result with stop_reason tool_use", last)
			}
		})
	}
}
