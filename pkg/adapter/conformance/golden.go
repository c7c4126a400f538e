package conformance

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// update is the one -update flag of every test binary that uses the kit:
// Compare then rewrites the golden files instead of only reading them.
//
//	go test -run TestGolden -update ./pkg/adapter/cli/pi
var update = flag.Bool("update", false, "rewrite the golden files the test compares with (then review the diff)")

// Compare fails t unless got is the content of the golden file at path.
// With -update it first writes got there, creating the directory.
func Compare(t testing.TB, path string, got []byte) {
	t.Helper()
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
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("differs from %s\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// Case is one run of a CLI: a capture, testdata/cli/<cli>/<Name> with
// .stdout.ndjson, .stderr.txt, .exit and .argv, or a hand-written case,
// testdata/normalize/<cli>/<Name> with stdout.jsonl and optionally
// stderr.txt and exit, for grammar the captures do not show.
type Case struct {
	Name   string
	Stdout []byte
	Stderr string
	Exit   int
	// Argv is the captured command line (nil for a hand-written case).
	Argv []string
	// Dir is testdata/normalize/<cli>/<Name>: the case's want.jsonl and
	// any files of its own.
	Dir string
	// StdoutPath is the file Stdout was read from.
	StdoutPath string
	// Captured: a real run of the CLI, not a hand-written case.
	Captured bool
}

// Cases returns every capture of the CLI adapter named name, in name
// order, then every hand-written case. It fails t if there is no capture.
func Cases(t testing.TB, name string) []Case {
	t.Helper()
	capDir, normDir := Testdata(t, "cli", name), Testdata(t, "normalize", name)
	outs, err := filepath.Glob(filepath.Join(capDir, "*.stdout.ndjson"))
	if err != nil || len(outs) == 0 {
		t.Fatalf("conformance: no captures in %s (%v)", capDir, err)
	}
	var cases []Case
	for _, out := range outs {
		base := strings.TrimSuffix(out, ".stdout.ndjson")
		c := readCase(t, filepath.Base(base), out, base+".stderr.txt", base+".exit")
		if b, err := os.ReadFile(base + ".argv"); err == nil {
			if err := json.Unmarshal(b, &c.Argv); err != nil {
				t.Fatalf("%s.argv: %v", base, err)
			}
		}
		c.Dir, c.Captured = filepath.Join(normDir, c.Name), true
		cases = append(cases, c)
	}
	written, err := filepath.Glob(filepath.Join(normDir, "*", "stdout.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range written {
		dir := filepath.Dir(out)
		c := readCase(t, filepath.Base(dir), out, filepath.Join(dir, "stderr.txt"), filepath.Join(dir, "exit"))
		c.Dir = dir
		cases = append(cases, c)
	}
	return cases
}

// readCase reads a case's stdout and its optional stderr and exit status
// (0 when there is no exit file).
func readCase(t testing.TB, name, stdout, stderr, exit string) Case {
	t.Helper()
	c := Case{Name: name, StdoutPath: stdout}
	var err error
	if c.Stdout, err = os.ReadFile(stdout); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(stderr); err == nil {
		c.Stderr = string(b)
	}
	switch b, err := os.ReadFile(exit); {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		t.Fatal(err)
	default:
		if c.Exit, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			t.Fatalf("%s: %v", exit, err)
		}
	}
	return c
}

// Parsing is how a CLI adapter maps its CLI's stdout, for the tests that
// run its parser without a process (Replay, Golden). The fields are the
// adapter's cli.Spec's.
type Parsing struct {
	// Name is the adapter's name, which names its test data.
	Name string
	// Binary is the CLI's default executable, which the messages of a
	// failed exit or a broken stdout name (default: Name).
	Binary       string
	Capabilities wire.Capabilities
	// NewParser returns the parser of one case's attempt; it may fail t.
	NewParser  func(t testing.TB, c Case) cli.Parser
	Classify   func(code int, stderr string) wire.Class // nil: proc.Classify
	TailRepair func(tail []byte) (map[string]any, bool)
}

// Replay maps c through a fresh parser as the CLI adapter's Stream maps a
// run, without the process: stdout framed by proc's Decoder, each object
// through cli.Feed, an incomplete tail through TailRepair, nothing after
// an error chunk, a framing failure a ProviderProtocolError naming the
// adapter's stdout, a non-zero exit the typed, classified error with its
// return code, and End only after exit 0. The stream rules the adapter's
// guard enforces are not enforced here: Golden checks them (Check).
func (p Parsing) Replay(t testing.TB, c Case) ([]wire.Chunk, error) {
	t.Helper()
	binary := cmp.Or(p.Binary, p.Name)
	parser := p.NewParser(t, c)
	dec := ndjson.NewDecoder(bytes.NewReader(c.Stdout))
	var out []wire.Chunk
	emit := func(cs []wire.Chunk) bool {
		for _, ch := range cs {
			out = append(out, ch)
			if ch.Type == wire.ChunkError {
				return false
			}
		}
		return true
	}
	for tail := false; !tail; {
		b, err := dec.NextBytes()
		if err == io.EOF {
			break
		}
		var cs []wire.Chunk
		var bad *cli.DecodeError
		switch {
		case err == nil:
			if cs, err = cli.Feed(parser, b); errors.As(err, &bad) {
				return out, proc.ProtocolError(binary, bad.Err)
			}
		case errors.Is(err, ndjson.ErrIncomplete) && p.TailRepair != nil:
			fixed, ok := p.TailRepair(dec.Tail())
			if !ok || fixed == nil {
				return out, proc.ProtocolError(binary, err)
			}
			cs, err = parser.Event(fixed)
			tail = true
		default:
			return out, proc.ProtocolError(binary, err)
		}
		if !emit(cs) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
	if c.Exit != 0 {
		classify := p.Classify
		if classify == nil {
			classify = proc.Classify
		}
		code := c.Exit
		we := wire.Errorf(classify(code, c.Stderr), "%s exited with status %d", binary, code)
		we.ReturnCode = &code
		return out, we
	}
	cs, err := parser.End()
	if emit(cs) && err != nil {
		return out, err
	}
	return out, nil
}

// Fed is what FeedEvents made of its input.
type Fed struct {
	Chunks []wire.Chunk
	// Err is the parser's error, from Event or, if AtEnd, from End.
	Err   error
	AtEnd bool
}

// FeedEvents feeds p every line of data that is a JSON object, as an
// event, the last line through tailRepair (if set) when it is not one; it
// stops after an error chunk or a parser error and otherwise calls End.
// Lines that are not objects are skipped rather than ending the stream,
// so that a fuzzer reaches the parser with any sequence of events; Check
// then judges the chunks.
func FeedEvents(p cli.Parser, data []byte, tailRepair func([]byte) (map[string]any, bool)) Fed {
	var f Fed
	lines := bytes.Split(data, []byte("\n"))
	for i, line := range lines {
		var ev map[string]any
		if json.Unmarshal(line, &ev) != nil || ev == nil {
			if i != len(lines)-1 || tailRepair == nil {
				continue
			}
			var ok bool
			if ev, ok = tailRepair(line); !ok || ev == nil {
				continue
			}
		}
		cs, err := p.Event(ev)
		f.Chunks = append(f.Chunks, cs...)
		if err != nil || slices.ContainsFunc(cs, func(c wire.Chunk) bool { return c.Type == wire.ChunkError }) {
			f.Err = err
			return f
		}
	}
	cs, err := p.End()
	f.Chunks, f.Err, f.AtEnd = append(f.Chunks, cs...), err, true
	return f
}

// Golden replays every case of p (Cases, Replay), checks the stream rules
// on each (Check) and compares its normalized stream (Normalize) with
// <case>/want.jsonl; -update rewrites them. A golden directory that
// belongs to no case fails the test.
func Golden(t *testing.T, p Parsing) {
	t.Helper()
	cases := Cases(t, p.Name)
	var names []string
	for _, c := range cases {
		names = append(names, c.Name)
		t.Run(c.Name, func(t *testing.T) {
			chunks, err := p.Replay(t, c)
			for _, problem := range Check(p.Capabilities, chunks, err, Ran) {
				t.Errorf("stream rule: %s", problem)
			}
			Compare(t, filepath.Join(c.Dir, "want.jsonl"), Normalize(chunks, err))
		})
	}
	dirs, err := os.ReadDir(Testdata(t, "normalize", p.Name))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() && !slices.Contains(names, d.Name()) {
			t.Errorf("testdata/normalize/%s/%s: a golden directory without a capture or a stdout.jsonl", p.Name, d.Name())
		}
	}
}

// End is how a golden stream ended: its terminal error, or nil at a clean
// end (an error chunk is a chunk, and the stream's end is then clean).
type End struct {
	Class      wire.Class `json:"class"`
	ReturnCode *int       `json:"returncode,omitempty"`
	Message    string     `json:"message,omitempty"`
}

// Normalize renders a stream as the golden files hold it: each chunk's
// JSON on a line, then {"end":null} at a clean end or {"end":{"class",
// "returncode","message"}} with the terminal error.
func Normalize(chunks []wire.Chunk, err error) []byte {
	var buf bytes.Buffer
	for _, c := range chunks {
		b, merr := json.Marshal(c)
		if merr != nil {
			b, _ = json.Marshal(map[string]string{"unencodable_chunk": merr.Error()})
		}
		buf.Write(append(b, '\n'))
	}
	b, _ := json.Marshal(map[string]*End{"end": endOf(err)})
	buf.Write(append(b, '\n'))
	return buf.Bytes()
}

func endOf(err error) *End {
	if err == nil {
		return nil
	}
	var we *wire.Error
	if !errors.As(err, &we) {
		return &End{Class: "untyped", Message: err.Error()}
	}
	return &End{Class: we.Class, ReturnCode: we.ReturnCode, Message: we.Message}
}

// ReadGolden returns the chunks and the end of the golden file at path.
func ReadGolden(t testing.TB, path string) ([]wire.Chunk, *End) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	var chunks []wire.Chunk
	var end *End
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(line, &probe); err != nil {
			t.Fatalf("%s: line %q: %v", path, line, err)
		}
		if raw, ok := probe["end"]; ok {
			if err := json.Unmarshal(raw, &end); err != nil {
				t.Fatalf("%s: end: %v", path, err)
			}
			continue
		}
		var c wire.Chunk
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("%s: chunk: %v", path, err)
		}
		chunks = append(chunks, c)
	}
	return chunks, end
}

// MatchGolden fails t unless a stream of the real adapter, run with the
// fake CLI replaying a case, is the case's golden stream: the same chunks
// and the same end, but for the terminal error's message, which names the
// binary (here the test binary) and is not API.
func MatchGolden(t testing.TB, path string, chunks []wire.Chunk, err error) {
	t.Helper()
	want, wantEnd := ReadGolden(t, path)
	if got, w := string(Normalize(chunks, nil)), string(Normalize(want, nil)); got != w {
		t.Errorf("chunks differ from %s\ngot:\n%swant:\n%s", path, got, w)
	}
	gotEnd := endOf(err)
	for _, e := range []*End{gotEnd, wantEnd} {
		if e != nil {
			e.Message = ""
		}
	}
	g, _ := json.Marshal(gotEnd)
	w, _ := json.Marshal(wantEnd)
	if string(g) != string(w) {
		t.Errorf("the stream ended with %s (%v), want %s as %s says", g, err, w, path)
	}
}
