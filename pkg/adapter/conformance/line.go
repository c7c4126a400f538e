package conformance

import (
	"bytes"
	"errors"
	"io"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// FuzzLine is the body of an adapter's Fuzz…Line target: it seeds f with
// the adapter's seeds (Seeds(f, name, pattern)) and checks SameAsEvent on
// each input. With alt non-nil the fuzzer also picks, by a second bool
// argument, which of two parser configurations (newParser or alt) reads it.
func FuzzLine(f *testing.F, name, pattern string, newParser, alt func() cli.LineParser) {
	seeds := Seeds(f, name, pattern)
	if alt == nil {
		for _, b := range seeds {
			f.Add(b)
		}
		f.Fuzz(func(t *testing.T, data []byte) { SameAsEvent(t, data, newParser) })
		return
	}
	for _, b := range seeds {
		f.Add(b, false)
	}
	f.Fuzz(func(t *testing.T, data []byte, useAlt bool) {
		np := newParser
		if useAlt {
			np = alt
		}
		SameAsEvent(t, data, np)
	})
}

// SameAsEvent frames data as the CLI adapter does (proc's Decoder) and
// feeds each object to two parsers made by newParser, one through Line
// (and Event for what Line leaves, as the adapter does) and one through
// Event alone, and fails t unless they give the same chunks and errors,
// object by object and at End. An object that is not JSON must be left by
// Line. It is the property every cli.LineParser promises, and the body of
// the adapters' Fuzz…Line targets.
func SameAsEvent(t *testing.T, data []byte, newParser func() cli.LineParser) {
	t.Helper()
	fast, slow := newParser(), newParser()
	for line, err := range Frames(data) {
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

// LineTakes fails t unless a fresh parser of newParser takes (Line's
// handled) exactly the events of shapes, each the bytes of one object,
// that map to true: the fast path really takes the events a run is mostly
// made of, and leaves the rare ones.
func LineTakes(t *testing.T, newParser func() cli.LineParser, shapes map[string]bool) {
	t.Helper()
	for _, in := range slices.Sorted(maps.Keys(shapes)) {
		if _, handled, _ := newParser().Line([]byte(in)); handled != shapes[in] {
			t.Errorf("Line(%s): handled %t, want %t", in, handled, shapes[in])
		}
	}
}

// CorpusSameAsEvent runs SameAsEvent, in a subtest "<file>/<parser>", on
// every file of the line corpus of the CLI adapter named name (LineCorpus,
// at least min files) with each of parsers; a parser named "" names its
// subtests by file alone.
func CorpusSameAsEvent(t *testing.T, name string, min int, parsers map[string]func() cli.LineParser) {
	t.Helper()
	for file, b := range LineCorpus(t, name, min) {
		for pn, np := range parsers {
			sub := file
			if pn != "" {
				sub += "/" + pn
			}
			t.Run(sub, func(t *testing.T) { SameAsEvent(t, b, np) })
		}
	}
}

// LineCorpus returns every stdout the tests of the CLI adapter named name
// hold: its captures, its fuzz seeds and its hand-written golden cases. It
// fails t if it finds fewer than min files.
func LineCorpus(t testing.TB, name string, min int) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, pat := range []string{
		Testdata(t, "cli", name, "*.stdout.ndjson"),
		Testdata(t, "fuzz", name, "*"),
		Testdata(t, "normalize", name, "*", "stdout.jsonl"),
	} {
		paths, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p)] = b
		}
	}
	if len(out) < min {
		t.Fatalf("conformance: only %d stdout files for %s, want at least %d", len(out), name, min)
	}
	return out
}

// LineTakesCaptures fails t unless every object of the captured runs of
// the CLI adapter named name that exited 0 in the adapter's own output
// format is taken by the fast path (Line) of a parser of newParser, so
// that a run the CLI finishes normally costs no map.
func LineTakesCaptures(t *testing.T, name string, newParser func() cli.LineParser) {
	t.Helper()
	for _, c := range Cases(t, name) {
		if !c.Captured || c.Exit != 0 || adjacent(c.Argv, "--output-format", "json") {
			continue // hand-written, failed, or not the NDJSON the adapter asks for
		}
		p, n := newParser(), 0
		for line, err := range Frames(c.Stdout) {
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			if _, handled, _ := p.Line(line); !handled {
				t.Errorf("%s: object %d left to Event: %.200s", c.Name, n, line)
			}
			n++
		}
	}
}

// Frames yields the bytes of each object of data as the CLI adapter frames
// a child's stdout (proc's Decoder), and then the framing error, if data
// ends in one. The bytes are valid until the next iteration.
func Frames(data []byte) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		dec := ndjson.NewDecoder(bytes.NewReader(data))
		for {
			b, err := dec.NextBytes()
			if err == io.EOF || !yield(b, err) || err != nil {
				return
			}
		}
	}
}

// adjacent reports whether a and then b stand next to each other in argv.
func adjacent(argv []string, a, b string) bool {
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == a && argv[i+1] == b {
			return true
		}
	}
	return false
}
