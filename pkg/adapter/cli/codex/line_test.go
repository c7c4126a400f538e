package codex

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
func sameAsEvent(t *testing.T, data []byte, newParser func() *Parser) {
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

// lineParsers are the parsers sameAsEvent compares: a new thread, and a
// resumed one with a known baseline.
var lineParsers = map[string]func() *Parser{
	"new": func() *Parser { return NewParser("m", "") },
	"resumed": func() *Parser {
		p := NewParser("m", "01a22a8b-564f-7be0-9f56-beadbebf0082")
		p.baseline = &counts{input: 10, output: 1}
		return p
	},
}

// TestLineSameAsEvent runs sameAsEvent over every recorded transcript and
// every fuzz seed and golden case.
func TestLineSameAsEvent(t *testing.T) {
	var files []string
	for _, pat := range []string{
		filepath.Join(cliDir, "*.stdout.ndjson"),
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
		for name, np := range lineParsers {
			t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f)+"/"+name, func(t *testing.T) { sameAsEvent(t, b, np) })
		}
	}
}

// TestLineTakesCommonShapes: the fast path really takes the events a run
// is mostly made of, and leaves the rare ones.
func TestLineTakesCommonShapes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool // handled
	}{
		{`{"type":"thread.started","thread_id":"01a22a8b-564f-7be0-9f56-beadbebf0082"}`, true},
		{`{"type":"turn.started"}`, true},
		{`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"hi"}}`, true},
		{`{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"hm"}}`, true},
		{`{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}`, true},
		{`{"type":"item.completed","item":{"id":"item_1","type":"error","message":"warning"}}`, true},
		{`{"type":"turn.completed","usage":{"input_tokens":9835,"cached_input_tokens":0,"output_tokens":20}}`, true},
		{`{"type":"error","message":"Reconnecting... 1/5"}`, true},
		{`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":null}}`, false},
		{`{"type":"item.completed","item":{"id":"item_0","type":"file_change","changes":[]}}`, false},
		{`{"type":"turn.completed","usage":{"input_tokens":-1}}`, false},
		{`{"type":"turn.failed","error":{"message":"boom"}}`, false},
		{`{"type":null}`, false},
	} {
		if _, handled, _ := NewParser("m", "").Line([]byte(tc.in)); handled != tc.want {
			t.Errorf("Line(%s): handled %t, want %t", tc.in, handled, tc.want)
		}
	}
}

// FuzzCodexLine checks Line against Event (sameAsEvent) on the parser's
// seeds and what the fuzzer makes of them.
//
//	go test -run '^$' -fuzz '^FuzzCodexLine$' -fuzztime 60s ./pkg/adapter/cli/codex
func FuzzCodexLine(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join(fuzzDir, "*"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds in %s: %v", fuzzDir, err)
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	f.Fuzz(func(t *testing.T, data []byte, resume bool) {
		np := lineParsers["new"]
		if resume {
			np = lineParsers["resumed"]
		}
		sameAsEvent(t, data, np)
	})
}

// TestLineTakesRecordedRuns: every object of the recorded transcripts
// whose CLI exited 0 is taken by the fast path, so a run the CLI
// finishes normally costs no map.
func TestLineTakesRecordedRuns(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(cliDir, "*.stdout.ndjson"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts in %s: %v", cliDir, err)
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
		p := NewParser("m", "")
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
