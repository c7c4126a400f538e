package claudecode_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// update rewrites the golden files:
//
//	go test -run TestGolden -update ./pkg/adapter/cli/claudecode
var update = flag.Bool("update", false, "rewrite testdata/normalize/claude-code/*/want.jsonl")

var (
	transcriptDir = filepath.Join("..", "..", "..", "..", "testdata", "cli", "claude-code")
	goldenDir     = filepath.Join("..", "..", "..", "..", "testdata", "normalize", "claude-code")
)

// transcripts returns the names of the captured runs (S1, S2-no-allowedTools, …).
func transcripts(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(transcriptDir, "*.stdout.ndjson"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts in %s (%v)", transcriptDir, err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".stdout.ndjson"))
	}
	return names
}

// end is how a replayed stream ended: nil at a clean end, else the
// terminal error (not a chunk).
type end struct {
	Class      wire.Class `json:"class"`
	ReturnCode *int       `json:"returncode,omitempty"`
	Message    string     `json:"message,omitempty"`
}

// replay feeds a transcript's stdout through a fresh parser the way
// cli and proc do: each line parsed with encoding/json into a map (a
// line that is not an object is a ProviderProtocolError; an unterminated
// last line goes through TailRepair), nothing after an error chunk, End at
// a clean exit 0, and a non-zero exit without an in-band error classified
// by Classify with its return code.
func replay(stdout []byte, code int, stderr string) ([]wire.Chunk, *end) {
	p := claudecode.NewParser()
	var chunks []wire.Chunk
	emit := func(cs []wire.Chunk) bool {
		for _, c := range cs {
			chunks = append(chunks, c)
			if c.Type == wire.ChunkError {
				return false
			}
		}
		return true
	}
	fail := func(err error) *end {
		var we *wire.Error
		if !errors.As(err, &we) {
			return &end{Class: "not a wire error", Message: err.Error()}
		}
		return &end{Class: we.Class, ReturnCode: we.ReturnCode, Message: we.Message}
	}
	lines := bytes.Split(stdout, []byte("\n"))
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil || m == nil {
			repaired, ok := map[string]any(nil), false
			if i == len(lines)-1 { // no newline after it: a cut-off tail
				repaired, ok = claudecode.TailRepair(line)
			}
			if !ok {
				return chunks, &end{Class: wire.ProviderProtocolError, Message: fmt.Sprintf("stdout line %d is not a JSON object", i+1)}
			}
			m = repaired
		}
		cs, err := p.Event(m)
		if !emit(cs) {
			return chunks, nil
		}
		if err != nil {
			return chunks, fail(err)
		}
	}
	if code != 0 {
		return chunks, &end{Class: claudecode.Classify(code, stderr), ReturnCode: &code}
	}
	cs, err := p.End()
	if emit(cs) && err != nil {
		return chunks, fail(err)
	}
	return chunks, nil
}

// normalize renders chunks and the end as JSON lines: one line per chunk,
// then {"end":…}.
func normalize(t testing.TB, chunks []wire.Chunk, e *end) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, c := range chunks {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal chunk: %v", err)
		}
		buf.Write(append(b, '\n'))
	}
	b, err := json.Marshal(map[string]any{"end": e})
	if err != nil {
		t.Fatal(err)
	}
	buf.Write(append(b, '\n'))
	return buf.Bytes()
}

// readGolden splits a want.jsonl into its chunks and its end.
func readGolden(t testing.TB, name string) ([]wire.Chunk, *end) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name, "want.jsonl"))
	if err != nil {
		t.Fatalf("%s: %v (run with -update)", name, err)
	}
	var chunks []wire.Chunk
	var e *end
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(line, &probe); err != nil {
			t.Fatalf("%s: golden line %q: %v", name, line, err)
		}
		if raw, ok := probe["end"]; ok {
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("%s: golden end: %v", name, err)
			}
			continue
		}
		var c wire.Chunk
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("%s: golden chunk: %v", name, err)
		}
		chunks = append(chunks, c)
	}
	return chunks, e
}

func loadTranscript(t testing.TB, name string) (stdout []byte, code int, stderr string) {
	t.Helper()
	base := filepath.Join(transcriptDir, name)
	stdout, err := os.ReadFile(base + ".stdout.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	code, err = readExit(base)
	if err != nil {
		t.Fatal(err)
	}
	errText, _ := os.ReadFile(base + ".stderr.txt")
	return stdout, code, string(errText)
}

// TestGolden replays every transcript through the parser and compares the
// normalized chunks with testdata/normalize/claude-code/<case>/want.jsonl.
func TestGolden(t *testing.T) {
	for _, name := range transcripts(t) {
		t.Run(name, func(t *testing.T) {
			stdout, code, stderr := loadTranscript(t, name)
			chunks, e := replay(stdout, code, stderr)
			if err := checkInvariants(chunks); err != nil {
				t.Fatal(err)
			}
			got := normalize(t, chunks, e)
			path := filepath.Join(goldenDir, name, "want.jsonl")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("normalized %s differs from %s\ngot:\n%s\nwant:\n%s", name, path, got, want)
			}
		})
	}
}

// TestGoldenSemantics states, per scenario, what the goldens must show, so
// an -update cannot silently bless a wrong stream.
func TestGoldenSemantics(t *testing.T) {
	type want struct {
		types      string     // chunk types in order, space-separated
		errorClass wire.Class // of the error chunk, if any
		end        wire.Class // terminal error class, "" for a clean end
	}
	cases := map[string]want{
		"S1":                             {types: "system text result"},
		"S1-resume":                      {types: "system text result"},
		"S1-system-prompt":               {types: "system text result"},
		"S1-output-json":                 {end: wire.ProviderProtocolError},
		"S1-skip-permissions-as-root":    {end: wire.ProviderProcessError},
		"S2":                             {types: "system text tool_use tool_result text result"},
		"S2-no-allowedTools":             {types: "system text tool_use tool_result text result"},
		"S2-skip-permissions-IS_SANDBOX": {types: "system text tool_use tool_result text result"},
		"S3":                             {types: "system error", errorClass: wire.ProviderAuthError},
		"S3-noretry":                     {types: "system error", errorClass: wire.ProviderAuthError},
		"S4":                             {types: "system error", errorClass: wire.ProviderQuotaError},
		"S4-noretry":                     {types: "system error", errorClass: wire.ProviderQuotaError},
		"S5":                             {types: "system error", errorClass: wire.ProviderError},
		"S5-noretry":                     {types: "system error", errorClass: wire.ProviderError},
		"S6":                             {types: "system thinking text result"},
		"S6-partial":                     {types: "system thinking thinking text text result"},
	}
	names := transcripts(t)
	if len(names) != len(cases) {
		t.Errorf("%d transcripts, %d expectations: add the new case here", len(names), len(cases))
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			w, ok := cases[name]
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			chunks, e := readGolden(t, name)
			var types []string
			for _, c := range chunks {
				types = append(types, string(c.Type))
				switch c.Type {
				case wire.ChunkError:
					if c.Metadata.ErrorClass != w.errorClass {
						t.Errorf("error class = %q, want %q", c.Metadata.ErrorClass, w.errorClass)
					}
					if c.Content == "" || strings.Contains(c.Content, "sk-ant") {
						t.Errorf("error content %q is not a safe message", c.Content)
					}
				case wire.ChunkResult:
					if c.Content != "" {
						t.Errorf("result content %q repeats emitted text", c.Content)
					}
					if u := c.Metadata.Usage; u == nil || u.InputTokens == 0 || u.OutputTokens == 0 {
						t.Errorf("result usage = %+v", u)
					}
					if c.Metadata.TotalCostUSD == nil || c.Metadata.NumTurns == nil || c.Metadata.DurationMS == nil {
						t.Errorf("result metadata lacks cost, turns or duration: %+v", c.Metadata)
					}
				case wire.ChunkText:
					if strings.Contains(c.Content, "API Error") || strings.Contains(c.Content, "Invalid API key") {
						t.Errorf("synthetic error text emitted as text: %q", c.Content)
					}
				}
			}
			if got := strings.Join(types, " "); got != w.types {
				t.Errorf("types = %q, want %q", got, w.types)
			}
			var gotEnd wire.Class
			if e != nil {
				gotEnd = e.Class
			}
			if gotEnd != w.end {
				t.Errorf("end = %q, want %q", gotEnd, w.end)
			}
			if len(chunks) > 0 {
				sys := chunks[0]
				if sys.Type != wire.ChunkSystem || sys.Metadata.SessionID == "" || sys.Metadata.Provider != claudecode.Name ||
					sys.Metadata.Model != "claude-sonnet-4-5" || sys.Metadata.Capabilities == nil || sys.Content != "" {
					t.Errorf("first chunk %+v is not the init system chunk", sys)
				}
			}
		})
	}
}

// TestGoldenToolRoundTrip checks S2's tool_use and tool_result pair.
func TestGoldenToolRoundTrip(t *testing.T) {
	chunks, _ := readGolden(t, "S2")
	var use, res *wire.Chunk
	for i := range chunks {
		switch chunks[i].Type {
		case wire.ChunkToolUse:
			use = &chunks[i]
		case wire.ChunkToolResult:
			res = &chunks[i]
		}
	}
	if use == nil || res == nil {
		t.Fatalf("S2 lacks tool_use or tool_result: %+v", chunks)
	}
	if use.ToolID == "" || use.ToolID != res.ToolID || use.ToolName != "Bash" || res.ToolName != "Bash" {
		t.Errorf("tool ids/names: use %q/%q, result %q/%q", use.ToolID, use.ToolName, res.ToolID, res.ToolName)
	}
	if got := use.ToolInput["command"]; got != "echo hello-from-tool" {
		t.Errorf("tool input command = %v", got)
	}
	if res.ToolOutput != "hello-from-tool" || res.IsError {
		t.Errorf("tool result = %v, is_error %t", res.ToolOutput, res.IsError)
	}
}

// checkInvariants asserts the chunk rules of docs/contract.md §1.3 on one stream.
func checkInvariants(chunks []wire.Chunk) error {
	results := 0
	for i, c := range chunks {
		if !c.Type.Valid() {
			return fmt.Errorf("chunk %d: invalid type %q", i, c.Type)
		}
		if (c.Type == wire.ChunkError) != c.IsError && c.Type != wire.ChunkToolResult {
			return fmt.Errorf("chunk %d: type %s with is_error=%t", i, c.Type, c.IsError)
		}
		if c.Type == wire.ChunkError && i != len(chunks)-1 {
			return fmt.Errorf("chunk %d: %d chunks after the error chunk", i, len(chunks)-1-i)
		}
		if c.Type == wire.ChunkError && c.Metadata.ErrorClass == "" {
			return fmt.Errorf("chunk %d: error chunk without error_class", i)
		}
		if c.Type == wire.ChunkSystem && c.Content != "" {
			return fmt.Errorf("chunk %d: system chunk with content", i)
		}
		if c.Type == wire.ChunkResult {
			results++
		}
		if results > 0 && c.Type != wire.ChunkResult && c.Type != wire.ChunkError {
			return fmt.Errorf("chunk %d: %s after the result", i, c.Type)
		}
		if _, err := json.Marshal(c); err != nil {
			return fmt.Errorf("chunk %d: %v", i, err)
		}
	}
	if results > 1 {
		return fmt.Errorf("%d results", results)
	}
	return nil
}
