package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// FuzzCodexParser feeds arbitrary bytes, split into lines, to a fresh
// parser: each line that is a JSON object is an event. The parser must
// not panic and must keep the stream rules whatever it is given. Seeds
// are every file in testdata/fuzz/codex (the transcripts' and the
// hand-written cases' stdout).
//
//	go test -run '^$' -fuzz '^FuzzCodexParser$' -fuzztime 60s ./pkg/adapter/cli/codex
func FuzzCodexParser(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join(fuzzDir, "*"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds in %s: %v", fuzzDir, err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, resume bool) {
		var p *Parser
		if resume {
			p = NewParser("m", "01a22a8b-564f-7be0-9f56-beadbebf0082")
			p.baseline = &counts{input: 10, output: 1}
		} else {
			p = NewParser("m", "")
		}
		var chunks []wire.Chunk
		stopped := false
		check := func(cs []wire.Chunk, err error) {
			for _, c := range cs {
				if stopped {
					t.Fatalf("chunk %+v after the stream ended", c)
				}
				chunks = append(chunks, c)
				if c.Type == wire.ChunkError {
					stopped = true
				}
			}
			if err != nil {
				var we *wire.Error
				if !errors.As(err, &we) || !we.Class.Known() {
					t.Fatalf("error %v is not a typed wire error", err)
				}
				stopped = true
			}
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			var ev map[string]any
			if json.Unmarshal(line, &ev) != nil || ev == nil {
				continue
			}
			if stopped {
				break
			}
			check(p.Event(ev))
		}
		if !stopped {
			check(p.End())
		}
		results := 0
		for i, c := range chunks {
			if !c.Type.Valid() {
				t.Fatalf("chunk %d: invalid type %q", i, c.Type)
			}
			if (c.Type == wire.ChunkError) != c.IsError && c.Type != wire.ChunkToolResult {
				t.Fatalf("chunk %d: %s with is_error=%t", i, c.Type, c.IsError)
			}
			if c.Type == wire.ChunkError && i != len(chunks)-1 {
				t.Fatalf("chunk %d: error chunk is not the last", i)
			}
			if c.Type == wire.ChunkResult {
				if results++; results > 1 {
					t.Fatalf("chunk %d: a second result", i)
				}
				if i != len(chunks)-1 {
					t.Fatalf("chunk %d: %s after the result", i+1, chunks[i+1].Type)
				}
			}
			if c.Type == wire.ChunkSystem && c.Content != "" {
				t.Fatalf("chunk %d: system chunk with content", i)
			}
			if _, err := wire.Marshal(c); err != nil {
				t.Fatalf("chunk %d does not encode: %v", i, err)
			}
		}
	})
}

// FuzzProviderFromConfig: the config.toml scanner never panics, and what
// it returns is a bare key the file mentions.
func FuzzProviderFromConfig(f *testing.F) {
	f.Add([]byte(fakeConfigTOML))
	f.Add([]byte("model_provider = \"mine\"\nx = [\n[model_providers.mine]\n]\n"))
	f.Add([]byte("profile = \"p\"\n[profiles.p]\nmodel_provider = 'b'\n[model_providers.b]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := providerFromConfig(b)
		if got != "" && (!bareKeyRE.MatchString(got) || !bytes.Contains(b, []byte(got))) {
			t.Fatalf("providerFromConfig = %q", got)
		}
	})
}
