package gemini

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// sameAsEvent frames data as the adapter does (ndjson.Decoder) and feeds
// each object to two parsers made by newParser, one through Line (and
// Event for what Line leaves, as the adapter does) and one through Event
// alone, and fails unless they give the same chunks and errors, object by
// object and at End. An object that is not JSON must be left by Line.
func sameAsEvent(t *testing.T, data []byte, newParser func() *parser) {
	t.Helper()
	fast, slow := newParser(), newParser()
	dec := ndjson.NewDecoder(bytes.NewReader(data))
	for {
		line, err := dec.NextBytes()
		if err == io.EOF {
			break
		}
		if err != nil {
			return // the stream ends at a framing error either way
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

// TestLineSameAsEvent runs sameAsEvent over every recorded transcript and
// every fuzz seed and golden case.
func TestLineSameAsEvent(t *testing.T) {
	var files []string
	for _, pat := range []string{
		filepath.Join(transcriptsDir, "*.stdout.ndjson"),
		filepath.Join(fuzzDir, "*"),
		filepath.Join(normalizeDir, "*", "stdout.jsonl"),
	} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 12 {
		t.Fatalf("only %d transcripts found", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) { sameAsEvent(t, b, newParser) })
	}
}

// TestLineTakesCommonShapes: the fast path really takes the events a run
// is mostly made of, and leaves the rare ones.
func TestLineTakesCommonShapes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool // handled
	}{
		{`{"type":"init","timestamp":"t","session_id":"f9f8d0ce-8f8e-497e-b1f8-e1b327e8af6e","model":"gemini-2.5-flash"}`, true},
		{`{"type":"message","role":"user","content":"What is the answer?"}`, true},
		{`{"type":"message","role":"assistant","content":"The answ","delta":true}`, true},
		{`{"type":"tool_use","tool_name":"run_shell_command","tool_id":"t1","parameters":{"command":"ls"}}`, true},
		{`{"type":"tool_result","tool_id":"t1","status":"error","error":{"type":"x","message":"denied"}}`, true},
		{`{"type":"result","status":"success","stats":{"total_tokens":8348,"input_tokens":8336,"output_tokens":12,"cached":0,"input":8336,"duration_ms":210,"models":{}}}`, true},
		{`{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: quota]"}}`, true},
		{`{"session_id":"f8799b92-dd97-4235-bfeb-d8ee9e98b87c","response":"The answer is 42.","stats":{}}`, true},
		{`{"type":"error","severity":"warning","message":"loop"}`, false},
		{`{"type":"message","role":"system","content":"x"}`, false},
		{`{"type":"result","status":"success","stats":{"input":-1}}`, false},
		{`{"type":"tool_use","tool_name":"x","tool_id":"t","parameters":[1]}`, false},
	} {
		if _, handled, _ := newParser().Line([]byte(tc.in)); handled != tc.want {
			t.Errorf("Line(%s): handled %t, want %t", tc.in, handled, tc.want)
		}
	}
}

// FuzzGeminiLine checks Line against Event (sameAsEvent) on the parser's
// seeds and what the fuzzer makes of them.
//
//	go test -run '^$' -fuzz '^FuzzGeminiLine$' -fuzztime 60s ./pkg/adapter/cli/gemini
func FuzzGeminiLine(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join(fuzzDir, "*"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds in %s: %v", fuzzDir, err)
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameAsEvent(t, data, newParser) })
}

// TestLineTakesRecordedRuns: every object of the recorded transcripts
// whose CLI exited 0 is taken by the fast path, so a run the CLI
// finishes normally costs no map.
func TestLineTakesRecordedRuns(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(transcriptsDir, "*.stdout.ndjson"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts in %s: %v", transcriptsDir, err)
	}
	for _, path := range paths {
		exit, err := os.ReadFile(strings.TrimSuffix(path, ".stdout.ndjson") + ".exit")
		if err != nil || strings.TrimSpace(string(exit)) != "0" {
			continue
		}
		argv, _ := os.ReadFile(strings.TrimSuffix(path, ".stdout.ndjson") + ".argv")
		if strings.Contains(string(argv), `"--output-format", "json"`) {
			continue // not the NDJSON the adapter asks for
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p := newParser()
		dec := ndjson.NewDecoder(bytes.NewReader(b))
		for n := 0; ; n++ {
			line, err := dec.NextBytes()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if _, handled, _ := p.Line(line); !handled {
				t.Errorf("%s: object %d left to Event: %.200s", filepath.Base(path), n, line)
			}
		}
	}
}
