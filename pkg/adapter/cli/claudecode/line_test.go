package claudecode_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// sameAsEvent feeds each line of data that starts an object to two fresh
// parsers, one through Line (and Event for what Line leaves, as the
// adapter does) and one through Event alone, and fails unless they give
// the same chunks and errors, line by line and at End. A line that is not
// JSON must be left by Line.
func sameAsEvent(t *testing.T, data []byte) {
	t.Helper()
	fast, slow := claudecode.NewParser(), claudecode.NewParser()
	for _, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		m, derr := ndjson.DecodeObject(line)
		fc, handled, ferr := fast.Line(line)
		if derr != nil {
			if handled {
				t.Fatalf("Line took %q, which does not decode: %v", line, derr)
			}
			return // the stream ends at a protocol error either way
		}
		if !handled {
			fc, ferr = fast.Event(m)
		}
		sc, serr := slow.Event(m)
		if !reflect.DeepEqual(fc, sc) || !sameErr(ferr, serr) {
			t.Fatalf("line %q (handled %t):\n Line  %+v, %v\n Event %+v, %v", line, handled, fc, ferr, sc, serr)
		}
		if serr != nil {
			return
		}
	}
	fc, ferr := fast.End()
	sc, serr := slow.End()
	if !reflect.DeepEqual(fc, sc) || !sameErr(ferr, serr) {
		t.Fatalf("End:\n Line  %+v, %v\n Event %+v, %v", fc, ferr, sc, serr)
	}
}

func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	var wa, wb *wire.Error
	return errors.As(a, &wa) && errors.As(b, &wb) && wa.Class == wb.Class && a.Error() == b.Error()
}

// TestLineSameAsEvent runs sameAsEvent over every transcript the parser's
// golden, fuzz and CLI fixtures hold.
func TestLineSameAsEvent(t *testing.T) {
	var files []string
	for _, pat := range []string{
		filepath.Join(fuzzSeedDir, "*.ndjson"),
		filepath.Join("..", "..", "..", "..", "testdata", "cli", "claude-code", "*.ndjson"),
		filepath.Join("..", "..", "..", "..", "testdata", "normalize", "claude-code", "*", "stdout.jsonl"),
	} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("only %d transcripts found", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) { sameAsEvent(t, b) })
	}
}

// TestLineTakesCommonShapes: the fast path really takes the events a run
// is mostly made of.
func TestLineTakesCommonShapes(t *testing.T) {
	for _, line := range []string{
		`{"type":"assistant","message":{"id":"msg_1","model":"m","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},"session_id":"b0b0b0b0-0000-4000-8000-000000000001"}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok","is_error":false}]}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"h"}}}`,
		`{"type":"rate_limit_event"}`,
	} {
		if _, handled, err := claudecode.NewParser().Line([]byte(line)); !handled || err != nil {
			t.Errorf("Line(%s) = handled %t, %v", line, handled, err)
		}
	}
}

// FuzzClaudeLine checks Line against Event (sameAsEvent) on the parser's
// seeds and what the fuzzer makes of them.
func FuzzClaudeLine(f *testing.F) {
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
	f.Fuzz(sameAsEvent)
}
