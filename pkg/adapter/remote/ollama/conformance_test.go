package ollama_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/ollama"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestConformance runs the conformance suite over the ollama adapter, its
// streams served over real loopback HTTP from testdata/remote/ollama.
func TestConformance(t *testing.T) {
	t.Parallel()
	srv := conformance.ReplayServer(t, ollama.Name)
	slow := conformance.PacedServer(t, replay.Response{Headers: map[string]string{"Content-Type": "application/x-ndjson"}}, ollamaSlow(), 40*time.Millisecond)
	base := func(name string) string {
		if name == "slow" {
			return slow
		}
		return srv.URL() + "/" + name
	}
	newOllama := func(url string) (adapter.Adapter, error) {
		return ollama.New(remote.Config{BaseURL: url, AllowLoopback: true})
	}
	fixture := func(name string) map[string]any { return map[string]any{"prompt": conformance.CasePrefix + name} }
	weather := map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string"}}}}
	conformance.Run(t, conformance.Subject{
		Name: ollama.Name,
		New: func(cli.Config) (adapter.Adapter, error) {
			return conformance.PromptCased(ollama.Name, "plain-text", base, newOllama, func(req any) string { return req.(ollama.Request).Prompt })
		},
		Model:   "qwen3:8b",
		Request: func(p string) map[string]any { return map[string]any{"prompt": p} },
		Streams: []conformance.Stream{
			{Name: "default"},
			{Name: "thinking", Request: fixture("thinking")},
			{Name: "tool-call", Request: map[string]any{"prompt": conformance.CasePrefix + "tool-call", "tools": []any{weather}}},
			{Name: "usage", Request: fixture("usage")},
			{Name: "provider-error", Request: fixture("provider-error")},
			{Name: "cut", Request: fixture("cut")},
			{Name: "no-done", Request: fixture("no-done")},
			{Name: "http-401", Request: fixture("http-401")},
			{Name: "http-429", Request: fixture("http-429")},
			{Name: "http-500", Request: fixture("http-500")},
			{Name: "http-529", Request: fixture("http-529")},
		},
		Happy:        "default",
		Errors:       []string{"provider-error"},
		ServerErrors: []string{"http-500"},
		Slow:         conformance.Stream{Name: "slow", Request: fixture("slow")},
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
