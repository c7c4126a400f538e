package ndjson_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
)

// lexAny reads any value with the Lexer's reads into what encoding/json
// makes of it in an interface; lexAnyBytes reads its strings with
// StringBytes.
func lexAny(l *ndjson.Lexer) any { return lexValue(l, false) }

func lexAnyBytes(l *ndjson.Lexer) any { return lexValue(l, true) }

func lexValue(l *ndjson.Lexer, asBytes bool) any {
	switch l.Peek() {
	case '{':
		m := map[string]any{}
		for k := range l.Members() {
			m[string(k)] = lexValue(l, asBytes)
		}
		return m
	case '[':
		a := []any{}
		for range l.Elements() {
			a = append(a, lexValue(l, asBytes))
		}
		return a
	case '"':
		if asBytes {
			return string(l.StringBytes())
		}
		return l.String()
	case 't', 'f':
		return l.Bool()
	case 'n':
		l.Null()
		return nil
	}
	f, _ := l.Number()
	return f
}

// lexMatches checks the Lexer's contract on b: where it reads b, it reads
// what encoding/json reads, and where encoding/json fails, so does it.
// Skip and Raw must agree with the full read.
func lexMatches(t *testing.T, b []byte) {
	t.Helper()
	var want any
	jerr := json.Unmarshal(b, &want)
	l := ndjson.NewLexer(b)
	got := lexAny(&l)
	ok := l.End()
	if jerr != nil && ok {
		t.Fatalf("%q: Lexer read %#v, encoding/json failed: %v", b, got, jerr)
	}
	if ok && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: Lexer read %#v, encoding/json %#v", b, got, want)
	}
	lb := ndjson.NewLexer(b)
	if gotBytes := lexAnyBytes(&lb); lb.End() != ok || ok && !reflect.DeepEqual(gotBytes, got) {
		t.Fatalf("%q: with StringBytes the Lexer read %#v (ok %t), with String %#v (ok %t)", b, gotBytes, lb.Ok(), got, ok)
	}
	s := ndjson.NewLexer(b)
	s.Skip()
	if sok := s.End(); jerr != nil && sok {
		t.Fatalf("%q: Skip read what encoding/json rejects (%v)", b, jerr)
	} else if ok && !sok {
		t.Fatalf("%q: Skip failed on what the full read took", b)
	}
	r := ndjson.NewLexer(b)
	raw := r.Raw()
	if r.End() && !bytes.Equal(bytes.TrimSpace(raw), bytes.TrimSpace(b)) {
		t.Fatalf("%q: Raw = %q", b, raw)
	}
}

func TestLexer(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		wantOk bool
	}{
		{name: "object", in: `{"a":1,"b":[true,false,null],"c":{"d":"e"}}`, wantOk: true},
		{name: "escapes", in: `{"s":"a\"b\\c\/d\b\f\n\r\t\u00e9\u65e5\ud83c\udf89"}`, wantOk: true},
		{name: "utf-8", in: `{"t":"日本語 🎉 é"}`, wantOk: true},
		{name: "numbers", in: `[0,-0,1,-1,12.5,1e3,-2.5E-3,123456789012345,1234567890123456789]`, wantOk: true},
		{name: "duplicate names", in: `{"a":1,"a":2}`, wantOk: true},
		{name: "whitespace", in: " \n{ \"a\" : [ 1 , 2 ] }\t", wantOk: true},
		{name: "lone surrogate", in: `{"s":"\ud800"}`},
		{name: "invalid utf-8", in: "{\"s\":\"\xff\"}"},
		{name: "escaped name", in: `{"\u0061":1}`},
		{name: "out of range", in: `{"n":1e999}`},
		{name: "leading zero", in: `{"n":01}`},
		{name: "trailing comma", in: `{"a":1,}`},
		{name: "control byte", in: "{\"s\":\"a\nb\"}"},
		{name: "bad escape", in: `{"s":"\x"}`},
		{name: "cut", in: `{"a":`},
		{name: "trailing data", in: `{}{}`},
		{name: "bare word", in: `{"a":nul}`},
		{name: "long ascii", in: `{"s":"abcdefghijklmnopqrstuvwxyz0123456789","t":"0123456\"789abcdefghij\\klmnop"}`, wantOk: true},
		{name: "long utf-8", in: `{"s":"abcdefghé日本語abcdefghijklmnop🎉abcdefgh"}`, wantOk: true},
		{name: "long control byte", in: "{\"s\":\"abcdefghijklm\tnopqrstuvwxyz\"}"},
		{name: "long invalid utf-8", in: "{\"s\":\"abcdefghijklmnopq\xffrstuvwxyz\"}"},
		{name: "long cut", in: `{"s":"abcdefghijklmnopqrstuvwxyz`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lexMatches(t, []byte(tt.in))
			l := ndjson.NewLexer([]byte(tt.in))
			lexAny(&l)
			if got := l.End(); got != tt.wantOk {
				t.Errorf("Ok = %t, want %t", got, tt.wantOk)
			}
		})
	}
}

// FuzzLexer checks the Lexer against encoding/json (lexMatches) on the
// framing seeds and what the fuzzer makes of them.
func FuzzLexer(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		for _, line := range bytes.Split(b, []byte("\n")) {
			f.Add(line)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) { lexMatches(t, b) })
}

// TestQuotedAndOptString: Quoted and OptString read a string or null and
// fail on anything else; Is matches Quoted's bytes against a name, and an
// escaped spelling of the name matches nothing.
func TestQuotedAndOptString(t *testing.T) {
	for _, tt := range []struct {
		in     string
		is     string // the name Is matches, or ""
		opt    ndjson.OptString
		failed bool
	}{
		{in: `"init"`, is: "init", opt: ndjson.OptString{S: "init", Set: true}},
		{in: `"in\u0069t"`, opt: ndjson.OptString{S: "init", Set: true}},
		{in: `null`, opt: ndjson.OptString{Set: true, Null: true}},
		{in: `7`, failed: true},
		{in: `{"a":1}`, failed: true},
	} {
		l := ndjson.NewLexer([]byte(tt.in))
		raw := l.Quoted()
		if l.End() == tt.failed {
			t.Errorf("Quoted(%s): End() = %t, want %t", tt.in, !tt.failed, !tt.failed)
		}
		if got := ndjson.Is(raw, "init"); got != (tt.is == "init") {
			t.Errorf("Is(Quoted(%s), \"init\") = %t", tt.in, got)
		}
		l = ndjson.NewLexer([]byte(tt.in))
		opt := l.OptString()
		if l.End() == tt.failed {
			t.Errorf("OptString(%s): End() = %t, want %t", tt.in, !tt.failed, !tt.failed)
		}
		if !tt.failed && opt != tt.opt {
			t.Errorf("OptString(%s) = %+v, want %+v", tt.in, opt, tt.opt)
		}
		if want := tt.opt.Set && !tt.opt.Null; !tt.failed && opt.Ok() != want {
			t.Errorf("OptString(%s).Ok() = %t, want %t", tt.in, opt.Ok(), want)
		}
	}
}
