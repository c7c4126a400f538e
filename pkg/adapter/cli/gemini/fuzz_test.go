package gemini

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// FuzzGeminiParser feeds arbitrary bytes, split into lines, to a fresh
// parser: each line that parses as a JSON object is an event. The parser
// must never panic, and what it yields must keep the chunk rules: valid
// types, is_error on error chunks, nothing after an error chunk or a
// parser error, at most one result. Seeds are testdata/fuzz/gemini.
func FuzzGeminiParser(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join(fuzzDir, "*"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds in %s (%v)", fuzzDir, err)
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := newParser()
		var chunks []wire.Chunk
		stopped := false
		for _, line := range bytes.Split(data, []byte("\n")) {
			var ev map[string]any
			if json.Unmarshal(line, &ev) != nil || ev == nil {
				continue
			}
			cs, err := p.Event(ev)
			chunks = append(chunks, cs...)
			if err != nil {
				if !isProtocolError(err) {
					t.Fatalf("Event error %v is not a ProviderProtocolError", err)
				}
				stopped = true
				break
			}
			if len(chunks) > 0 && chunks[len(chunks)-1].Type == wire.ChunkError {
				stopped = true
				break
			}
		}
		if !stopped {
			cs, err := p.End()
			chunks = append(chunks, cs...)
			if err != nil && !isProtocolError(err) {
				t.Fatalf("End error %v", err)
			}
		}
		if err := checkStream(chunks); err != nil {
			t.Fatalf("stream rules: %v\nchunks: %+v", err, chunks)
		}
		for _, c := range chunks {
			if _, err := json.Marshal(c); err != nil {
				t.Fatalf("chunk %+v does not marshal: %v", c, err)
			}
			if _, err := wire.Marshal(c); err != nil {
				t.Fatalf("chunk %+v does not encode: %v", c, err)
			}
		}
	})
}

func isProtocolError(err error) bool {
	we, ok := err.(*wire.Error)
	return ok && we.Class == wire.ProviderProtocolError
}
