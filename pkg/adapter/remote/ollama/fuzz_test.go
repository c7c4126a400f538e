package ollama_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/ollama"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// fuzzSeedDir holds the stream parser's seeds: the recorded bodies and a
// few odd ones. Go reads a target's own corpus only from the package's
// testdata/fuzz; ours lives with the other fixtures and is added with f.Add.
var fuzzSeedDir = filepath.Join("..", "..", "..", "..", "testdata", "fuzz", "ollama")

// FuzzOllamaStream feeds arbitrary bytes as an /api/chat body through the
// NDJSON framing and the Parser, as Stream does. It asserts no panic, a
// stream that keeps every rule of DESIGN §1 (conformance.Check: chunk
// types, error chunks, nothing after the error, one result last, closed
// metadata), tool_use chunks with a name and an object input, and parser
// errors that are typed ProviderProtocolErrors.
func FuzzOllamaStream(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join(fuzzSeedDir, "*.ndjson"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds in %s (%v)", fuzzSeedDir, err)
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
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
