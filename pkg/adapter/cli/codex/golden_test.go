package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// update rewrites the golden files:
//
//	go test -run TestGolden -update ./pkg/adapter/cli/codex
var update = flag.Bool("update", false, "rewrite testdata/normalize/codex/*/want.jsonl")

var (
	cliDir       = filepath.Join("..", "..", "..", "..", "testdata", "cli", "codex")
	normalizeDir = filepath.Join("..", "..", "..", "..", "testdata", "normalize", "codex")
	fuzzDir      = filepath.Join("..", "..", "..", "..", "testdata", "fuzz", "codex")
)

// goldenCase is one recorded or hand-written run: its stdout, exit status
// and stderr, and what the parser is told about the run.
type goldenCase struct {
	name     string
	stdout   string // path
	stderr   string // path, may not exist
	exit     int
	argv     []string // the transcript's argv, when recorded
	model    string
	resumeID string
	home     string // a CODEX_HOME holding the resumed thread's rollout, if any
}

// goldenCases lists every transcript in testdata/cli/codex and every
// hand-written case in testdata/normalize/codex/<case>/stdout.jsonl.
func goldenCases(t *testing.T) []goldenCase {
	t.Helper()
	var out []goldenCase
	paths, err := filepath.Glob(filepath.Join(cliDir, "*.stdout.ndjson"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts in %s: %v", cliDir, err)
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".stdout.ndjson")
		c := goldenCase{name: name, stdout: p, stderr: filepath.Join(cliDir, name+".stderr.txt"),
			exit: readExit(t, filepath.Join(cliDir, name+".exit")), model: "gpt-5.5"}
		if name == "S1-unknown-model" {
			c.model = "gpt-5-codex" // that capture's config.toml model
		}
		b, err := os.ReadFile(filepath.Join(cliDir, name+".argv"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &c.argv); err != nil {
			t.Fatalf("%s.argv: %v", name, err)
		}
		if len(c.argv) > 5 && c.argv[2] == "resume" {
			c.resumeID = c.argv[5] // codex exec resume --json --skip-git-repo-check <id> <prompt>
		}
		if h := filepath.Join(normalizeDir, name, "codex_home"); isDir(h) {
			c.home = h
		}
		out = append(out, c)
	}
	dirs, err := os.ReadDir(normalizeDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		p := filepath.Join(normalizeDir, d.Name(), "stdout.jsonl")
		if _, err := os.Stat(p); err != nil {
			continue
		}
		out = append(out, goldenCase{name: d.Name(), stdout: p, stderr: filepath.Join(normalizeDir, d.Name(), "stderr.txt"),
			exit: readExit(t, filepath.Join(normalizeDir, d.Name(), "exit")), model: "gpt-5.5"})
	}
	return out
}

func readExit(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// parser builds the case's parser as the adapter would.
func (c goldenCase) parser(t *testing.T) *Parser {
	t.Helper()
	p := NewParser(c.model, c.resumeID)
	if c.resumeID != "" && c.home != "" {
		abs, err := filepath.Abs(c.home)
		if err != nil {
			t.Fatal(err)
		}
		p.baseline = home{set: map[string]string{EnvCodexHome: abs}}.threadTotal(c.resumeID)
		if p.baseline == nil {
			t.Fatalf("%s: no baseline in %s", c.name, c.home)
		}
	}
	return p
}

// replay feeds stdout through p the way cli.Adapter.Stream does:
// each line that is a JSON object is an event, anything else ends the
// stream with a protocol error (as proc's framing would), nothing follows
// an error chunk, End runs only after a clean exit, and a non-zero exit
// with no error chunk is the run's typed error.
func replay(p cli.Parser, stdout []byte, exit int, stderr string) ([]wire.Chunk, error) {
	var out []wire.Chunk
	emit := func(cs []wire.Chunk) bool {
		for _, c := range cs {
			out = append(out, c)
			if c.Type == wire.ChunkError {
				return false
			}
		}
		return true
	}
	for _, line := range bytes.Split(stdout, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal(line, &ev); err != nil || ev == nil {
			return out, wire.Errorf(wire.ProviderProtocolError, "codex stdout: not a JSON object: %.40q", line)
		}
		cs, err := p.Event(ev)
		if !emit(cs) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
	if exit != 0 {
		e := wire.Errorf(Classify(exit, stderr), "codex exited with status %d", exit)
		e.ReturnCode = &exit
		return out, e
	}
	cs, err := p.End()
	if !emit(cs) {
		return out, nil
	}
	return out, err
}

// normalize renders chunks and the stream's error as JSON lines: one line
// per chunk, then {"stream_error":{class, returncode, message}} when the
// stream failed. withMessage keeps the error's message (stable only for
// errors the parser makes).
func normalize(t *testing.T, chunks []wire.Chunk, err error, withMessage bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, c := range chunks {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err != nil {
		we := wire.AsError(err)
		se := map[string]any{"class": we.Class}
		if we.ReturnCode != nil {
			se["returncode"] = *we.ReturnCode
		}
		if withMessage && we.ReturnCode == nil {
			se["message"] = we.Message
		}
		b, _ := json.Marshal(map[string]any{"stream_error": se})
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

func TestGolden(t *testing.T) {
	cases := goldenCases(t)
	var seen []string
	for _, c := range cases {
		seen = append(seen, c.name)
		t.Run(c.name, func(t *testing.T) {
			stdout, err := os.ReadFile(c.stdout)
			if err != nil {
				t.Fatal(err)
			}
			stderr, _ := os.ReadFile(c.stderr)
			chunks, serr := replay(c.parser(t), stdout, c.exit, string(stderr))
			got := normalize(t, chunks, serr, true)
			want := filepath.Join(normalizeDir, c.name, "want.jsonl")
			if *update {
				if err := os.MkdirAll(filepath.Dir(want), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(want, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantB, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if !bytes.Equal(got, wantB) {
				t.Errorf("normalized stream differs from %s\ngot:\n%s\nwant:\n%s", want, got, wantB)
			}
			checkStream(t, chunks)
		})
	}
	// Every golden directory belongs to a case.
	dirs, _ := os.ReadDir(normalizeDir)
	for _, d := range dirs {
		if !slices.Contains(seen, d.Name()) {
			t.Errorf("%s: golden directory without a transcript or stdout.jsonl", d.Name())
		}
	}
}

// checkStream asserts the stream rules of docs/contract.md §1.3 on a chunk sequence.
func checkStream(t *testing.T, chunks []wire.Chunk) {
	t.Helper()
	results := 0
	for i, c := range chunks {
		if !c.Type.Valid() {
			t.Errorf("chunk %d: invalid type %q", i, c.Type)
		}
		if (c.Type == wire.ChunkError) != c.IsError && c.Type != wire.ChunkToolResult {
			t.Errorf("chunk %d: %s with is_error=%t", i, c.Type, c.IsError)
		}
		if c.Type == wire.ChunkError && i != len(chunks)-1 {
			t.Errorf("chunk %d: error chunk is not the last", i)
		}
		if c.Type == wire.ChunkResult {
			results++
			if i != len(chunks)-1 {
				t.Errorf("chunk %d: result is not the last", i)
			}
		}
		if c.Type == wire.ChunkSystem && c.Content != "" {
			t.Errorf("chunk %d: system chunk with content", i)
		}
		if c.Type == wire.ChunkError && c.Metadata.ErrorClass == "" {
			t.Errorf("chunk %d: error chunk without error_class", i)
		}
	}
	if results > 1 {
		t.Errorf("%d result chunks", results)
	}
}
