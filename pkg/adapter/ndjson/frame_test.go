package ndjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
)

// chunkReader returns at most n bytes per Read, so a value (and a rune)
// arrives in pieces.
type chunkReader struct {
	b []byte
	n int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n, len(r.b))
	copy(p, r.b[:k])
	r.b = r.b[k:]
	return k, nil
}

// frames is what a Decoder made of an input: its maps, and how it ended.
type frames struct {
	maps []map[string]any
	end  string // "eof", "incomplete", "not a map", "syntax", "other: …"
	tail string
}

func decodeFrames(r io.Reader) (frames, error) {
	var f frames
	dec := ndjson.NewDecoder(r)
	for {
		m, err := dec.Next()
		if err == nil {
			if m == nil {
				return f, errors.New("Next returned a nil map and no error")
			}
			f.maps = append(f.maps, m)
			continue
		}
		if m != nil {
			return f, fmt.Errorf("Next returned the map %v with the error %v", m, err)
		}
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case err == io.EOF:
			f.end = "eof"
			// A clean end stays clean.
			if m, err := dec.Next(); m != nil || err != io.EOF {
				return f, fmt.Errorf("Next after EOF = %v, %v", m, err)
			}
		case errors.Is(err, ndjson.ErrIncomplete):
			f.end, f.tail = "incomplete", string(dec.Tail())
			if len(bytes.TrimSpace(dec.Tail())) == 0 {
				return f, fmt.Errorf("incomplete with an empty tail: %v", err)
			}
		case errors.Is(err, ndjson.ErrNotMap):
			f.end = "not a map"
		case errors.As(err, &syn):
			f.end = "syntax"
		case errors.As(err, &typ):
			f.end = "type"
		default:
			return f, fmt.Errorf("unexpected error %T: %v", err, err)
		}
		return f, nil
	}
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		want     []string
		wantEnd  string
		wantTail string
	}{
		{name: "empty", in: "", wantEnd: "eof"},
		{name: "ndjson", in: "{\"a\":1}\n{\"b\":2}\n", want: []string{`{"a":1}`, `{"b":2}`}, wantEnd: "eof"},
		{name: "concatenated", in: `{"a":1}{"b":2}{}`, want: []string{`{"a":1}`, `{"b":2}`, `{}`}, wantEnd: "eof"},
		{name: "whitespace", in: "\n\r\n \t{\"a\":1}  \n\n{\"b\":2}\n\n ", want: []string{`{"a":1}`, `{"b":2}`}, wantEnd: "eof"},
		{name: "utf-8", in: `{"t":"日本語 🎉 é"}`, want: []string{`{"t":"日本語 🎉 é"}`}, wantEnd: "eof"},
		{name: "braces in strings", in: `{"t":"}{\"{"}{"u":"]["}`, want: []string{`{"t":"}{\"{"}`, `{"u":"]["}`}, wantEnd: "eof"},
		{name: "scalar", in: "{\"a\":1}\n42\n{\"b\":2}", want: []string{`{"a":1}`}, wantEnd: "not a map"},
		{name: "null", in: "null", wantEnd: "not a map"},
		{name: "array", in: `[{"a":1}]`, wantEnd: "not a map"},
		{name: "string", in: `"x"`, wantEnd: "not a map"},
		{name: "incomplete", in: "{\"a\":1}\n  {\"b\":[1,", want: []string{`{"a":1}`}, wantEnd: "incomplete", wantTail: `{"b":[1,`},
		{name: "incomplete string", in: `{"a":"x`, wantEnd: "incomplete", wantTail: `{"a":"x`},
		{name: "incomplete scalar", in: `{"a":1}fals`, want: []string{`{"a":1}`}, wantEnd: "incomplete", wantTail: "fals"},
		{name: "incomplete rune", in: "{\"a\":\"\xe6\x97", wantEnd: "incomplete", wantTail: "{\"a\":\"\xe6\x97"},
		{name: "syntax", in: "{\"a\":1}\n{\"a\" 1}", want: []string{`{"a":1}`}, wantEnd: "syntax"},
		{name: "text line", in: "warning: deprecated\n", wantEnd: "syntax"},
		{name: "stray close", in: `{"a":1}}`, want: []string{`{"a":1}`}, wantEnd: "syntax"},
		{name: "number out of range", in: `{"n":1e999}`, wantEnd: "type"},
	}
	for _, tt := range tests {
		for _, n := range []int{1, 2, 3, 7, 4096} {
			t.Run(fmt.Sprintf("%s/%d", tt.name, n), func(t *testing.T) {
				got, err := decodeFrames(&chunkReader{b: []byte(tt.in), n: n})
				if err != nil {
					t.Fatal(err)
				}
				var want []map[string]any
				for _, s := range tt.want {
					var m map[string]any
					if err := json.Unmarshal([]byte(s), &m); err != nil {
						t.Fatal(err)
					}
					want = append(want, m)
				}
				if !reflect.DeepEqual(got.maps, want) {
					t.Errorf("maps = %v, want %v", got.maps, want)
				}
				if got.end != tt.wantEnd || got.tail != tt.wantTail {
					t.Errorf("end %q tail %q, want %q tail %q", got.end, got.tail, tt.wantEnd, tt.wantTail)
				}
			})
		}
	}
}

// TestDecoderIncremental: a value is returned as soon as its last byte has
// been read, without waiting for more input.
func TestDecoderIncremental(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	dec := ndjson.NewDecoder(pr)
	done := make(chan error, 1)
	go func() {
		_, err := pw.Write([]byte(`{"a":"日`))
		if err == nil {
			_, err = pw.Write([]byte(`本"}`))
		}
		done <- err // and then nothing more until the reader is closed
	}()
	m, err := dec.Next()
	if err != nil || m["a"] != "日本" {
		t.Fatalf("Next = %v, %v", m, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestDecoderReadError: a failing reader's error comes back as is.
func TestDecoderReadError(t *testing.T) {
	errRead := errors.New("read failed")
	dec := ndjson.NewDecoder(io.MultiReader(strings.NewReader(`{"a":1}{"b"`), iotest.ErrReader(errRead)))
	if m, err := dec.Next(); err != nil || m["a"] != float64(1) {
		t.Fatalf("first Next = %v, %v", m, err)
	}
	if _, err := dec.Next(); !errors.Is(err, errRead) {
		t.Errorf("err = %v, want %v", err, errRead)
	}
}

// fuzzSeedDir holds the framing seeds: real transcript lines and framing
// edge cases. Go reads a target's own corpus only from
// pkg/adapter/ndjson/testdata/fuzz/FuzzDecoder; ours sits with the other fixtures.
var fuzzSeedDir = filepath.Join("..", "..", "..", "testdata", "fuzz", "ndjson")

// fuzzSeeds are the contents of the files in fuzzSeedDir.
func fuzzSeeds(f *testing.F) [][]byte {
	f.Helper()
	files, err := filepath.Glob(filepath.Join(fuzzSeedDir, "*"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in %s (%v)", fuzzSeedDir, err)
	}
	seeds := make([][]byte, len(files))
	for i, p := range files {
		if seeds[i], err = os.ReadFile(p); err != nil {
			f.Fatal(err)
		}
	}
	return seeds
}

func FuzzDecoder(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		for _, k := range []uint8{0, 1, 6, 255} {
			f.Add(b, k)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, k uint8) {
		// Read sizes from 1 to 256 bytes, derived from the input.
		got, err := decodeFrames(&chunkReader{b: b, n: int(k) + 1})
		if err != nil {
			t.Fatal(err)
		}
		// Framing never depends on how the bytes were split into reads.
		whole, err := decodeFrames(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, whole) {
			t.Fatalf("reads of %d bytes gave %+v, one read gave %+v", int(k)+1, got, whole)
		}
	})
}

// benchInput is the Claude Code S2 transcript (a tool round trip) repeated
// to about 8 MiB.
func benchInput(b *testing.B) []byte {
	b.Helper()
	line, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "ndjson", "claude-S2.stdout.ndjson"))
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Repeat(line, 8<<20/len(line)+1)
}

// BenchmarkDecoder measures framing throughput against encoding/json's
// Decoder decoding the same bytes into map[string]any, in the same run,
// taking turns at going first. ns/op is the two together; the metrics are
// each one's MB/s and their ratio (above 1: the Decoder is faster).
func BenchmarkDecoder(b *testing.B) {
	in := benchInput(b)
	ours := func() int {
		n := 0
		dec := ndjson.NewDecoder(bytes.NewReader(in))
		for {
			_, err := dec.Next()
			if err == io.EOF {
				return n
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	std := func() int {
		n := 0
		jd := json.NewDecoder(bytes.NewReader(in))
		for {
			var m map[string]any
			err := jd.Decode(&m)
			if err == io.EOF {
				return n
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	var oursT, stdT time.Duration
	timed := func(f func() int, d *time.Duration) int {
		start := time.Now()
		n := f()
		*d += time.Since(start)
		return n
	}
	i := 0
	for b.Loop() {
		var a, c int
		if i%2 == 0 {
			a, c = timed(ours, &oursT), timed(std, &stdT)
		} else {
			c, a = timed(std, &stdT), timed(ours, &oursT)
		}
		if a != c || a == 0 {
			b.Fatalf("Decoder framed %d objects, json.Decoder %d", a, c)
		}
		i++
	}
	mb := float64(len(in)) * float64(i) / 1e6
	b.ReportMetric(mb/oursT.Seconds(), "ndjson-MB/s")
	b.ReportMetric(mb/stdT.Seconds(), "json-MB/s")
	b.ReportMetric(stdT.Seconds()/oursT.Seconds(), "ndjson/json-speed")
}

// Decoding a stream of concatenated and newline-delimited objects.
func ExampleDecoder() {
	dec := ndjson.NewDecoder(strings.NewReader("{\"type\":\"a\"}{\"type\":\"b\"}\n\n{\"type\":\"c\"}\n{\"type\":"))
	for {
		m, err := dec.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, ndjson.ErrIncomplete) {
			fmt.Printf("incomplete tail %s\n", dec.Tail())
			break
		}
		if err != nil {
			fmt.Println(err)
			break
		}
		fmt.Println(m["type"])
	}
	// Output:
	// a
	// b
	// c
	// incomplete tail {"type":
}

// framesOf is what a Decoder made of an input, read with NextBytes or
// with NextLine: each value's bytes (a guess without the whitespace after
// its object) and the error that ended the stream, with the tail of an
// incomplete one.
func framesOf(r io.Reader, lines, refuseAll bool) (got []string, end string) {
	dec := ndjson.NewDecoder(r)
	for {
		var b []byte
		var err error
		if lines {
			var guess bool
			b, guess, err = dec.NextLine()
			if err == nil && guess {
				l := ndjson.NewLexer(b)
				l.Skip()
				if !l.End() || refuseAll {
					b, err = dec.Reframe()
				} else {
					b = bytes.TrimRight(b, " \t\r\n")
				}
			}
		} else {
			b, err = dec.NextBytes()
		}
		if err != nil {
			return got, err.Error() + " tail " + string(dec.Tail())
		}
		got = append(got, string(b))
	}
}

// FuzzNextLine holds NextLine's guesses, taken where a Lexer reads them
// as one object and refused (Reframe) elsewhere, or all refused, to
// NextBytes's frames: the same values and the same end, however the
// input is split into reads.
func FuzzNextLine(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		for _, k := range []uint8{0, 6, 255} {
			f.Add(b, k)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, k uint8) {
		want, wantEnd := framesOf(bytes.NewReader(b), false, false)
		for _, refuseAll := range []bool{false, true} {
			got, end := framesOf(&chunkReader{b: b, n: int(k) + 1}, true, refuseAll)
			if !reflect.DeepEqual(got, want) || end != wantEnd {
				t.Fatalf("NextLine (reads of %d bytes, refusing all %t) gave %q, %s; NextBytes gave %q, %s", int(k)+1, refuseAll, got, end, want, wantEnd)
			}
		}
	})
}

// TestTypeName: every type encoding/json decodes into an any has its JSON
// name; anything else is named by its Go type.
func TestTypeName(t *testing.T) {
	var v []any
	if err := json.Unmarshal([]byte(`[null, true, 1.5, "s", [], {}]`), &v); err != nil {
		t.Fatal(err)
	}
	v = append(v, json.Number("7"), int64(3))
	want := []string{"null", "a boolean", "a number", "a string", "an array", "an object", "a number", "int64"}
	for i, x := range v {
		if got := ndjson.TypeName(x); got != want[i] {
			t.Errorf("TypeName(%#v) = %q, want %q", x, got, want[i])
		}
	}
}
