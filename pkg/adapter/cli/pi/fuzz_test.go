package pi

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// FuzzPiParser feeds every line of the input that is a JSON object to one
// fresh parser, as the transport would, and checks the stream rules: no
// panic, valid chunk types, is_error on error chunks and only there (or on
// a tool result), nothing after an error chunk or after a parser error, at
// most one result and nothing but an error after it. The seed corpus is
// testdata/fuzz/pi: the real transcripts and the synthetic golden cases.
func FuzzPiParser(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join(fuzzDir, "*.ndjson"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds in %s: %v", fuzzDir, err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, maxAttempts uint8) {
		p := NewParser(adapter.Call{MaxAttempts: int(maxAttempts % 8)})
		var chunks []wire.Chunk
		stopped := false
		check := func(cs []wire.Chunk) {
			for _, c := range cs {
				if stopped {
					t.Fatalf("chunk %+v after the error chunk", c)
				}
				chunks = append(chunks, c)
				if c.Type == wire.ChunkError {
					stopped = true
				}
			}
		}
		failed := false
		for _, line := range bytes.Split(data, []byte("\n")) {
			var ev map[string]any
			if json.Unmarshal(line, &ev) != nil || ev == nil {
				continue
			}
			cs, err := p.Event(ev)
			check(cs)
			if err != nil {
				if _, ok := err.(*wire.Error); !ok {
					t.Fatalf("parser error %v is %T, not a *wire.Error", err, err)
				}
				failed = true
				break
			}
		}
		if !failed {
			cs, err := p.End()
			check(cs)
			if err != nil {
				t.Fatalf("End: %v", err)
			}
		}
		checkInvariants(t, chunks)
		for _, c := range chunks {
			if c.Type != wire.ChunkError && c.Metadata.ErrorClass != "" {
				t.Fatalf("%s chunk with error_class %s", c.Type, c.Metadata.ErrorClass)
			}
			if _, err := json.Marshal(c); err != nil {
				t.Fatalf("chunk %+v does not encode: %v", c, err)
			}
			if _, err := wire.Marshal(c); err != nil {
				t.Fatalf("chunk %+v does not encode as msgpack: %v", c, err)
			}
		}
	})
}
