package claudecode_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// fuzzSeedDir holds the parser's seeds (transcripts and odd streams). Go
// reads a target's own corpus only from pkg/adapter/cli/claudecode/testdata/fuzz/; ours
// lives at the top of the repository with the other fixtures and is added
// with f.Add.
var fuzzSeedDir = filepath.Join("..", "..", "..", "..", "testdata", "fuzz", "claude-code")

// FuzzClaudeParser splits arbitrary bytes into lines and feeds every line
// that is a JSON object (or, for the last line, what TailRepair makes of
// it) to a fresh parser, then End. It asserts no panic, only valid chunk
// types, error chunks with is_error and an error class, nothing after an
// error chunk, at most one result and nothing but an error after it, and
// errors that are typed wire errors.
func FuzzClaudeParser(f *testing.F) {
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
		p := claudecode.NewParser()
		var chunks []wire.Chunk
		stopped := false
		check := func(cs []wire.Chunk, err error) {
			if stopped && len(cs) > 0 {
				t.Fatalf("chunks %+v after an error chunk", cs)
			}
			chunks = append(chunks, cs...)
			for _, c := range cs {
				if c.Type == wire.ChunkError {
					stopped = true
				}
			}
			if err := checkInvariants(chunks); err != nil {
				t.Fatal(err)
			}
			if _, ok := err.(*wire.Error); err != nil && !ok {
				t.Fatalf("error %v (%T) is not a wire error", err, err)
			}
		}
		lines := bytes.Split(data, []byte("\n"))
		for i, line := range lines {
			var m map[string]any
			if json.Unmarshal(line, &m) != nil || m == nil {
				if i != len(lines)-1 {
					continue
				}
				var ok bool
				if m, ok = claudecode.TailRepair(line); !ok {
					continue
				}
			}
			cs, err := p.Event(m)
			check(cs, err)
			if err != nil {
				return // the stream ends at a parser error
			}
		}
		cs, err := p.End()
		check(cs, err)
	})
}
