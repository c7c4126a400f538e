package ollama_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/ollama"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// FuzzOllamaStream feeds arbitrary bytes as an /api/chat body through the
// NDJSON framing and the Parser, as Stream does. It asserts no panic, a
// stream that keeps every rule of docs/contract.md §1.3 (conformance.Check: chunk
// types, error chunks, nothing after the error, one result last, closed
// metadata), tool_use chunks with a name and an object input, and parser
// errors that are typed ProviderProtocolErrors.
func FuzzOllamaStream(f *testing.F) {
	for _, b := range conformance.Seeds(f, ollama.Name, "*.ndjson") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := ndjson.NewDecoder(bytes.NewReader(data))
		p := ollama.NewParser()
		var chunks []wire.Chunk
		var perr error
		for perr == nil && !p.Failed() {
			m, err := dec.Next()
			if errors.Is(err, io.EOF) {
				var cs []wire.Chunk
				cs, perr = p.End()
				chunks = append(chunks, cs...)
				break
			}
			if err != nil {
				break // a framing error: the adapter's ProviderProtocolError
			}
			var cs []wire.Chunk
			cs, perr = p.Line(m)
			chunks = append(chunks, cs...)
		}
		if perr != nil && !errors.Is(perr, wire.ProviderProtocolError) {
			t.Fatalf("parser error %v (%T) is not a ProviderProtocolError", perr, perr)
		}
		for _, p := range conformance.Check(ollama.Capabilities, chunks, perr, conformance.Ran) {
			t.Errorf("stream rule: %s", p)
		}
		for _, c := range chunks {
			if c.Type == wire.ChunkToolUse && (c.ToolName == "" || c.ToolInput == nil) {
				t.Errorf("tool_use without name or input: %+v", c)
			}
		}
	})
}
