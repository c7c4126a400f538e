package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/normalize/gemini")

// Where the tests find the repository's test data, seen from this package.
const (
	transcriptsDir = "../../../../testdata/cli/gemini"
	normalizeDir   = "../../../../testdata/normalize/gemini"
	fuzzDir        = "../../../../testdata/fuzz/gemini"
)

// The test binary doubles as the gemini CLI (STYLE item 9): with
// FAKE_GEMINI_STDOUT in its environment, TestMain runs fakeGemini instead of
// the tests.
const (
	fakeStdout = "FAKE_GEMINI_STDOUT" // file replayed on stdout
	fakeStderr = "FAKE_GEMINI_STDERR" // file replayed on stderr (optional)
	fakeExit   = "FAKE_GEMINI_EXIT"   // exit status (optional, default 0)
	fakeRecord = "FAKE_GEMINI_RECORD" // where the fake writes what it saw
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeStdout) != "" {
		os.Exit(fakeGemini())
	}
	goleak.VerifyTestMain(m)
}

// record is what the fake CLI saw.
type record struct {
	Argv     []string          `json:"argv"`
	Cwd      string            `json:"cwd"`
	Env      map[string]string `json:"env"`
	Settings string            `json:"settings"` // the system settings file's content
}

// fakeGemini records its argv, working directory, environment and retry
// settings, then replays a transcript's stdout and stderr and exits with
// its status.
func fakeGemini() int {
	wd, _ := os.Getwd()
	rec := record{Argv: os.Args[1:], Cwd: wd, Env: map[string]string{}}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		rec.Env[k] = v
	}
	if p := os.Getenv(EnvSystemSettingsPath); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			rec.Settings = "unreadable: " + err.Error()
		} else {
			rec.Settings = string(b)
		}
	}
	if p := os.Getenv(fakeRecord); p != "" {
		b, _ := json.Marshal(rec)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "fake gemini:", err)
			return 99
		}
	}
	out, err := os.ReadFile(os.Getenv(fakeStdout))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake gemini:", err)
		return 98
	}
	os.Stdout.Write(out)
	if p := os.Getenv(fakeStderr); p != "" {
		if b, err := os.ReadFile(p); err == nil {
			os.Stderr.Write(b)
		}
	}
	code, _ := strconv.Atoi(strings.TrimSpace(os.Getenv(fakeExit)))
	return code
}

// The normalized form of a run, one JSON value per line: each chunk, then
// an end line saying how the stream ended: "ok" (clean), "error_chunk" (a
// provider-declared failure, nothing after it) or "failed" with the typed
// terminal error's class and returncode (messages are not API).
type endLine struct {
	End        string     `json:"end"`
	Class      wire.Class `json:"class,omitempty"`
	ReturnCode *int       `json:"returncode,omitempty"`
}

func chunkLine(t testing.TB, c wire.Chunk) string {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("marshal chunk %+v: %v", c, err)
	}
	return string(b)
}

func endOf(t testing.TB, chunks []wire.Chunk, err error) string {
	t.Helper()
	e := endLine{End: "ok"}
	switch {
	case err != nil:
		we := wire.AsError(err)
		e = endLine{End: "failed", Class: we.Class, ReturnCode: we.ReturnCode}
	case len(chunks) > 0 && chunks[len(chunks)-1].Type == wire.ChunkError:
		e.End = "error_chunk"
	}
	b, _ := json.Marshal(e)
	return string(b)
}

func normalized(t testing.TB, chunks []wire.Chunk, err error) []string {
	t.Helper()
	var lines []string
	for _, c := range chunks {
		lines = append(lines, chunkLine(t, c))
	}
	return append(lines, endOf(t, chunks, err))
}

// replay feeds stdout through the real framing and a fresh parser the way
// pkg/adapter/cli and pkg/adapter/cli/proc do for one attempt: it stops at the first
// error chunk (the child is then torn down and its exit not reported), a
// framing or parser error is the terminal error, a non-zero exit is a typed
// process error after the chunks, and a clean exit calls End.
func replay(t testing.TB, stdout []byte, exit int, stderr string) ([]wire.Chunk, error) {
	t.Helper()
	p := newParser()
	dec := ndjson.NewDecoder(bytes.NewReader(stdout))
	var chunks []wire.Chunk
	for {
		ev, err := dec.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return chunks, wire.Errorf(wire.ProviderProtocolError, "gemini stdout: %v", err)
		}
		cs, err := p.Event(ev)
		for _, c := range cs {
			chunks = append(chunks, c)
			if c.Type == wire.ChunkError {
				return chunks, nil
			}
		}
		if err != nil {
			return chunks, err
		}
	}
	if exit != 0 {
		we := wire.Errorf(Classify(exit, stderr), "gemini exited with status %d", exit)
		we.ReturnCode = &exit
		return chunks, we
	}
	cs, err := p.End()
	return append(chunks, cs...), err
}

// checkStream asserts the chunk rules of DESIGN §1 that hold for any input:
// valid types, is_error agreeing with the type (a tool result may fail),
// nothing after an error chunk, at most one result and nothing but an
// error after it, and no error chunk without a message and a class.
func checkStream(chunks []wire.Chunk) error {
	var errs []error
	results := 0
	for i, c := range chunks {
		if !c.Type.Valid() {
			errs = append(errs, fmt.Errorf("chunk %d: type %q", i, c.Type))
		}
		if c.Type != wire.ChunkToolResult && (c.Type == wire.ChunkError) != c.IsError {
			errs = append(errs, fmt.Errorf("chunk %d: %s with is_error=%t", i, c.Type, c.IsError))
		}
		if c.Type == wire.ChunkError {
			if i != len(chunks)-1 {
				errs = append(errs, fmt.Errorf("chunk %d: the error chunk is followed by %d more", i, len(chunks)-1-i))
			}
			if c.Content == "" || !c.Metadata.ErrorClass.Known() {
				errs = append(errs, fmt.Errorf("chunk %d: error chunk without a message or a known class: %+v", i, c))
			}
		}
		if results > 0 && c.Type != wire.ChunkError {
			errs = append(errs, fmt.Errorf("chunk %d: %s after the result", i, c.Type))
		}
		if c.Type == wire.ChunkResult {
			results++
		}
		if c.Type == wire.ChunkSystem && (c.Content != "" || c.IsDelta) {
			errs = append(errs, fmt.Errorf("chunk %d: system chunk with text", i))
		}
	}
	return errors.Join(errs...)
}
