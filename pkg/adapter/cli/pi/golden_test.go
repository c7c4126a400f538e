package pi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/normalize/pi")

const (
	cliDir       = "../../../../testdata/cli/pi"
	normalizeDir = "../../../../testdata/normalize/pi"
	fuzzDir      = "../../../../testdata/fuzz/pi"
)

// goldenCase is one recorded stdout: a real transcript from cliDir, or a
// synthetic case directory under normalizeDir holding stdout.jsonl.
type goldenCase struct {
	name   string
	stdout string // path
	exit   int
}

func goldenCases(t *testing.T) []goldenCase {
	t.Helper()
	var cases []goldenCase
	paths, err := filepath.Glob(filepath.Join(cliDir, "*.stdout.ndjson"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts in %s: %v", cliDir, err)
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".stdout.ndjson")
		b, err := os.ReadFile(filepath.Join(cliDir, name+".exit"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		code, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s.exit: %v", name, err)
		}
		cases = append(cases, goldenCase{name: name, stdout: p, exit: code})
	}
	synthetic, _ := filepath.Glob(filepath.Join(normalizeDir, "*", "stdout.jsonl"))
	for _, p := range synthetic {
		cases = append(cases, goldenCase{name: filepath.Base(filepath.Dir(p)), stdout: p})
	}
	return cases
}

// readEvents parses each line of an NDJSON file as a JSON object.
func readEvents(t testing.TB, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// replay feeds events through a fresh parser as cli does: events in
// order until an error chunk or an error, then End only for exit status 0.
func replay(p *Parser, events []map[string]any, exit int) ([]wire.Chunk, error) {
	var out []wire.Chunk
	add := func(cs []wire.Chunk) bool {
		for _, c := range cs {
			out = append(out, c)
			if c.Type == wire.ChunkError {
				return false
			}
		}
		return true
	}
	for _, ev := range events {
		cs, err := p.Event(ev)
		if !add(cs) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
	if exit != 0 {
		return out, nil
	}
	cs, err := p.End()
	add(cs)
	return out, err
}

// normalize renders chunks and the final error as JSON lines.
func normalize(t testing.TB, chunks []wire.Chunk, err error, exit int) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, c := range chunks {
		if e := enc.Encode(c); e != nil {
			t.Fatal(e)
		}
	}
	if err != nil {
		var we *wire.Error
		if !errors.As(err, &we) {
			t.Fatalf("parser error %v is not a *wire.Error", err)
		}
		if e := enc.Encode(map[string]any{"error": we}); e != nil {
			t.Fatal(e)
		}
	}
	if exit != 0 {
		_ = enc.Encode(map[string]int{"exit": exit})
	}
	return buf.Bytes()
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			events := readEvents(t, tc.stdout)
			chunks, err := replay(NewParser(adapter.Call{MaxAttempts: wire.DefaultMaxAttempts}), events, tc.exit)
			got := normalize(t, chunks, err, tc.exit)
			want := filepath.Join(normalizeDir, tc.name, "want.jsonl")
			if *update {
				if err := os.MkdirAll(filepath.Dir(want), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(want, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, b) {
				t.Errorf("normalized %s differs from %s\ngot:\n%s\nwant:\n%s", tc.name, want, got, b)
			}
			checkInvariants(t, chunks)
		})
	}
}

// checkInvariants asserts the stream rules of docs/contract.md §1.3 on a chunk list.
func checkInvariants(t testing.TB, chunks []wire.Chunk) {
	t.Helper()
	results := 0
	for i, c := range chunks {
		if !c.Type.Valid() {
			t.Fatalf("chunk %d: invalid type %q", i, c.Type)
		}
		if (c.Type == wire.ChunkError) != c.IsError && c.Type != wire.ChunkToolResult {
			t.Fatalf("chunk %d: %s with is_error=%t", i, c.Type, c.IsError)
		}
		if c.Type == wire.ChunkError && i != len(chunks)-1 {
			t.Fatalf("chunk %d: error chunk is not the last (%d chunks)", i, len(chunks))
		}
		if c.Type == wire.ChunkResult {
			results++
			if results > 1 {
				t.Fatalf("chunk %d: a second result", i)
			}
		} else if results > 0 && c.Type != wire.ChunkError {
			t.Fatalf("chunk %d: %s after the result", i, c.Type)
		}
		if c.Type == wire.ChunkSystem && c.Content != "" {
			t.Fatalf("chunk %d: system chunk with content %q", i, c.Content)
		}
		if c.Type == wire.ChunkError && (c.Content == "" || !c.Metadata.ErrorClass.Known()) {
			t.Fatalf("chunk %d: error chunk without a message or a known class: %+v", i, c)
		}
	}
}
