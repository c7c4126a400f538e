package pi

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
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
		for name, np := range piParsers {
			t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f)+"/"+name, func(t *testing.T) { sameAsEvent(t, b, np) })
		}
	}
}

// piParsers are the parsers sameAsEvent compares: the default attempt
// policy and a single attempt.
var piParsers = map[string]func() *Parser{
	"default": func() *Parser { return NewParser(adapter.Call{}) },
	"one":     func() *Parser { return NewParser(adapter.Call{MaxAttempts: 1}) },
}

// TestLineTakesCommonShapes: the fast path really takes the events a run
// is mostly made of, and leaves the rare ones.
func TestLineTakesCommonShapes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool // handled
	}{
		{`{"type":"session","version":3,"id":"01a22a8d-7f7d-7689-a314-843817dab2e1","cwd":"/w"}`, true},
		{`{"type":"turn_end","message":{"role":"assistant","content":[{"type":"text","text":"x"}]},"toolResults":[]}`, true},
		{`{"type":"message_start","message":{"role":"assistant","content":[],"model":"m","usage":{"input":1,"cost":{"total":0.5}}}}`, true},
		{`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"The answ","partial":{"role":"assistant"}},"message":{"role":"assistant"}}`, true},
		{`{"type":"message_update","assistantMessageEvent":{"type":"thinking_end","contentIndex":0,"content":"[Reasoning redacted]","partial":{"content":[{"type":"thinking","redacted":true}]}}}`, true},
		{`{"type":"message_update","assistantMessageEvent":{"type":"toolcall_end","contentIndex":1,"toolCall":{"type":"toolCall","id":"t1","name":"bash","arguments":{"command":"ls"}}}}`, true},
		{`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"hi"},{"type":"toolCall","id":"t1","name":"bash","arguments":{}}],"usage":{"input":3,"output":1},"stopReason":"toolUse"}}`, true},
		{`{"type":"message_end","message":{"role":"toolResult","toolCallId":"t1","toolName":"bash","content":[{"type":"text","text":"ok"}],"isError":false}}`, true},
		{`{"type":"tool_execution_start","toolCallId":"t1","toolName":"bash","args":{"command":"ls"}}`, true},
		{`{"type":"tool_execution_end","toolCallId":"t1","toolName":"bash","result":{"content":[{"type":"image","mimeType":"image/png"}]},"isError":true}`, true},
		{`{"type":"auto_retry_start","attempt":1,"errorMessage":"429 slow down"}`, true},
		{`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"500 boom"}`, true},
		{`{"type":"compaction_end","willRetry":true}`, true},
		{`{"type":"auto_retry_end","success":null}`, false},
		{`{"type":"auto_retry_start","attempt":"1"}`, false},
		{`{"type":"message_end","message":{"role":"assistant","content":[{"type":"image"}]}}`, false},
		{`{"type":"message_end","message":{"role":"assistant","usage":{"input":-1}}}`, false},
		{`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0.5,"delta":"x"}}`, false},
	} {
		if _, handled, _ := NewParser(adapter.Call{}).Line([]byte(tc.in)); handled != tc.want {
			t.Errorf("Line(%s): handled %t, want %t", tc.in, handled, tc.want)
		}
	}
}

// FuzzPiLine checks Line against Event (sameAsEvent) on the parser's
// seeds and what the fuzzer makes of them.
//
//	go test -run '^$' -fuzz '^FuzzPiLine$' -fuzztime 60s ./pkg/adapter/cli/pi
func FuzzPiLine(f *testing.F) {
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
	f.Fuzz(func(t *testing.T, data []byte, one bool) {
		np := piParsers["default"]
		if one {
			np = piParsers["one"]
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
		p := NewParser(adapter.Call{})
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
