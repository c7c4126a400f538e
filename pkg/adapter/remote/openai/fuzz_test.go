package openai_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// FuzzOpenAIStream feeds arbitrary bytes as the SSE body of a response to
// a request that declared the tool fs.read. The parser must never panic,
// never yield a chunk that breaks the stream rules (conformance.Check),
// never name a tool by its wire alias, and end only with a typed,
// non-retryable error (the response had begun).
func FuzzOpenAIStream(f *testing.F) {
	for _, b := range conformance.Seeds(f, openai.Name, "*.sse") {
		f.Add(b)
	}
	f.Add([]byte("data: {\"type\":\"error\",\"message\":\"boom\"}\n\n"))
	f.Add([]byte("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{}}\n\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":1,\"output_tokens\":-1}}}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		chunks, err := openai.ParseStream(bytes.NewReader(data), "gpt-5.5", []string{"fs.read"})
		for _, p := range conformance.Check(openai.Capabilities, chunks, err, conformance.Ran) {
			t.Errorf("stream rule: %s", p)
		}
		for _, c := range chunks {
			if c.Type == wire.ChunkToolUse && c.ToolName != "fs.read" {
				t.Errorf("tool_use names %q, not the canonical fs.read", c.ToolName)
			}
		}
		if err != nil {
			var we *wire.Error
			if !errors.As(err, &we) {
				t.Fatalf("untyped error %T %v", err, err)
			}
			if we.Retryable {
				t.Errorf("retryable error %v after the response began", err)
			}
			if !we.Class.IsA(wire.ProviderTransportError) && !we.Class.IsA(wire.ProviderProtocolError) {
				t.Errorf("error class %s; a parser failure is a transport or protocol error", we.Class)
			}
		}
	})
}
