package ndjson

import (
	"iter"
	"strconv"
	"unicode/utf8"
)

// Lexer reads one JSON value in place, for a parser's fast path over the
// common shapes of a CLI's events: it reads the members a parser names into
// the parser's own typed fields and skips the rest without building
// anything for them.
//
// A Lexer reads exactly what encoding/json reads, or fails: any input it is
// not sure it reads as encoding/json would decode it into map[string]any
// (a syntax error, a number out of float64's range, invalid UTF-8 or a
// lone surrogate in a string it returns, an escaped member name, nesting
// deeper than 1,000) makes Ok false, and from then on every read returns a
// zero value. A parser whose lexing failed decodes the same bytes with
// encoding/json instead (DecodeObject), and so reports the same error, or
// reads the same map, as it always has. Duplicate member names are read in
// order, so a parser that keeps the last one agrees with a map.
//
// The zero Lexer has failed. A Lexer is not safe for concurrent use.
type Lexer struct {
	b  []byte
	i  int
	ok bool
}

// maxLexDepth bounds the nesting Skip follows (encoding/json allows 10,000).
const maxLexDepth = 1000

// NewLexer returns a Lexer reading b, which must not change while it is read.
func NewLexer(b []byte) Lexer { return Lexer{b: b, ok: true} }

// Ok reports whether everything read so far was read exactly.
func (l *Lexer) Ok() bool { return l.ok }

// Fail marks the input as one the Lexer does not read; Ok is false after it.
// A parser calls it for a value of a shape its fast path does not take.
func (l *Lexer) Fail() { l.ok = false }

// End fails unless only whitespace is left after the value read.
func (l *Lexer) End() bool {
	l.ws()
	if l.i != len(l.b) {
		l.ok = false
	}
	return l.ok
}

func (l *Lexer) ws() {
	// Compact JSON has none: one comparison is the usual cost.
	for l.i < len(l.b) && l.b[l.i] <= ' ' {
		switch l.b[l.i] {
		case ' ', '\t', '\n', '\r':
			l.i++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, or 0 at the end.
func (l *Lexer) peek() byte {
	l.ws()
	if !l.ok || l.i >= len(l.b) {
		return 0
	}
	return l.b[l.i]
}

// Peek returns the first byte of the next value ('{', '[', '"', 't', 'f',
// 'n', or a number's first byte), without reading it; 0 at the end or
// after a failure.
func (l *Lexer) Peek() byte { return l.peek() }

// Null consumes a null and reports whether there was one.
func (l *Lexer) Null() bool {
	if l.peek() != 'n' {
		return false
	}
	if len(l.b)-l.i >= 4 && string(l.b[l.i:l.i+4]) == "null" {
		l.i += 4
		return true
	}
	l.ok = false
	return false
}

// Members reads an object and yields each member's name; the loop body
// must read the member's value with exactly one read (String, Bool,
// Number, Skip, Raw, Members, Elements). A value that is not an object
// (null included) fails. The name is valid only during its iteration.
func (l *Lexer) Members() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		if l.peek() != '{' {
			l.ok = false
			return
		}
		l.i++
		if l.peek() == '}' {
			l.i++
			return
		}
		for l.ok {
			if l.peek() != '"' {
				l.ok = false
				return
			}
			l.i++
			start := l.i
			if l.i = nextStop(l.b, l.i, true); l.i >= len(l.b) || l.b[l.i] != '"' {
				l.ok = false // escaped, control or non-ASCII name: leave it to encoding/json
				return
			}
			name := l.b[start:l.i]
			l.i++
			if l.peek() != ':' {
				l.ok = false
				return
			}
			l.i++
			if !yield(name) {
				l.ok = false // a parser's fast path reads every member
				return
			}
			switch l.peek() {
			case ',':
				l.i++
			case '}':
				l.i++
				return
			default:
				l.ok = false
				return
			}
		}
	}
}

// Elements reads an array and yields each element's index; the loop body
// must read the element with exactly one read. A value that is not an
// array (null included) fails.
func (l *Lexer) Elements() iter.Seq[int] {
	return func(yield func(int) bool) {
		if l.peek() != '[' {
			l.ok = false
			return
		}
		l.i++
		if l.peek() == ']' {
			l.i++
			return
		}
		for n := 0; l.ok; n++ {
			if !yield(n) {
				l.ok = false
				return
			}
			switch l.peek() {
			case ',':
				l.i++
			case ']':
				l.i++
				return
			default:
				l.ok = false
				return
			}
		}
	}
}

// String reads a string; null reads as "" (as a parser's map lookup of a
// null or absent field does) and anything else fails.
func (l *Lexer) String() string {
	b, _ := l.stringBytes()
	return string(b)
}

// StringBytes reads a string as String does and returns its content:
// the input's own bytes when the string has no escape (valid as long as
// the input, and not to be changed), else a new slice. A parser compares
// a member's value with what it already holds, or with a constant,
// without making a string of it.
func (l *Lexer) StringBytes() []byte {
	b, _ := l.stringBytes()
	return b
}

// stringBytes is String's and StringBytes': fresh reports a slice of
// its own (the string had an escape).
func (l *Lexer) stringBytes() (b []byte, fresh bool) {
	switch l.peek() {
	case 'n':
		l.Null()
		return nil, false
	case '"':
	default:
		l.ok = false
		return nil, false
	}
	l.i++
	start := l.i
	for l.i < len(l.b) {
		// Past plain ASCII 8 bytes at a time: no quote, backslash, control
		// or non-ASCII byte among them.
		if l.i = nextStop(l.b, l.i, true); l.i >= len(l.b) {
			break
		}
		c := l.b[l.i]
		switch {
		case c == '"':
			s := l.b[start:l.i]
			l.i++
			return s, false
		case c == '\\':
			return l.escaped(start), true
		case c < 0x20:
			l.ok = false
			return nil, false
		case c < utf8.RuneSelf:
			l.i++
		default:
			r, n := utf8.DecodeRune(l.b[l.i:])
			if r == utf8.RuneError && n == 1 {
				l.ok = false // encoding/json would put U+FFFD here
				return nil, false
			}
			l.i += n
		}
	}
	l.ok = false
	return nil, false
}

// escaped finishes a string that has an escape at l.i, its content
// starting at start.
func (l *Lexer) escaped(start int) []byte {
	buf := make([]byte, 0, l.i-start+16)
	buf = append(buf, l.b[start:l.i]...)
	for l.i < len(l.b) {
		c := l.b[l.i]
		switch {
		case c == '"':
			l.i++
			return buf
		case c < 0x20:
			l.ok = false
			return nil
		case c == '\\':
			if l.i+1 >= len(l.b) {
				l.ok = false
				return nil
			}
			e := l.b[l.i+1]
			l.i += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := l.hex4()
				if !ok {
					return nil
				}
				if utf16IsSurrogate(r) {
					// A pair decodes to one rune; anything else is a
					// lone surrogate, U+FFFD in encoding/json: leave it.
					if r >= 0xdc00 || len(l.b)-l.i < 6 || l.b[l.i] != '\\' || l.b[l.i+1] != 'u' {
						l.ok = false
						return nil
					}
					l.i += 2
					lo, ok := l.hex4()
					if !ok || lo < 0xdc00 || lo > 0xdfff {
						l.ok = false
						return nil
					}
					r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
				}
				buf = utf8.AppendRune(buf, r)
			default:
				l.ok = false
				return nil
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			l.i++
		default:
			r, n := utf8.DecodeRune(l.b[l.i:])
			if r == utf8.RuneError && n == 1 {
				l.ok = false
				return nil
			}
			buf = append(buf, l.b[l.i:l.i+n]...)
			l.i += n
		}
	}
	l.ok = false
	return nil
}

func utf16IsSurrogate(r rune) bool { return r >= 0xd800 && r < 0xe000 }

func (l *Lexer) hex4() (rune, bool) {
	if len(l.b)-l.i < 4 {
		l.ok = false
		return 0, false
	}
	var r rune
	for _, c := range l.b[l.i : l.i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			l.ok = false
			return 0, false
		}
	}
	l.i += 4
	return r, true
}

// Bool reads a boolean; null reads as false and anything else fails.
func (l *Lexer) Bool() bool {
	switch l.peek() {
	case 'n':
		l.Null()
	case 't':
		if len(l.b)-l.i >= 4 && string(l.b[l.i:l.i+4]) == "true" {
			l.i += 4
			return true
		}
		l.ok = false
	case 'f':
		if len(l.b)-l.i >= 5 && string(l.b[l.i:l.i+5]) == "false" {
			l.i += 5
			return false
		}
		l.ok = false
	default:
		l.ok = false
	}
	return false
}

// Number reads a number as encoding/json does into an interface (a
// float64) and reports whether there was one: null reads as absent, and
// anything else fails, as does a number out of float64's range.
func (l *Lexer) Number() (float64, bool) {
	if l.peek() == 'n' {
		l.Null()
		return 0, false
	}
	start := l.i
	simple, ok := l.number()
	if !ok {
		return 0, false
	}
	lit := l.b[start:l.i]
	if simple {
		// At most 15 digits, no fraction or exponent: exact in a float64,
		// so the same value strconv.ParseFloat gives.
		var n int64
		neg := lit[0] == '-'
		if neg {
			lit = lit[1:]
		}
		for _, c := range lit {
			n = n*10 + int64(c-'0')
		}
		if neg {
			if n == 0 {
				return negZero, true
			}
			n = -n
		}
		return float64(n), true
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		l.ok = false
		return 0, false
	}
	return f, true
}

var negZero = func() float64 { z := 0.0; return -z }()

// number scans a JSON number at l.i; simple reports an integer of at most
// 15 digits.
func (l *Lexer) number() (simple, ok bool) {
	b, i := l.b, l.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		l.ok = false
		return false, false
	}
	digits := i - l.i
	if b[l.i] == '-' {
		digits--
	}
	simple = digits <= 15
	if i < len(b) && b[i] == '.' {
		simple = false
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			l.ok = false
			return false, false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		simple = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			l.ok = false
			return false, false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	l.i = i
	return simple, true
}

// Raw reads any value and returns its bytes, for a member a parser hands
// to encoding/json whole (a tool's input). The bytes alias the input.
func (l *Lexer) Raw() []byte {
	l.ws()
	start := l.i
	l.Skip()
	if !l.ok {
		return nil
	}
	return l.b[start:l.i]
}

// Quoted reads a string or null as its raw bytes, quotes included, with
// no copy, and fails on a value of any other type: for a member a parser
// only compares with names it knows (Is), at no allocation. Raw bytes
// with an escape never equal a name, so such a member matches none.
func (l *Lexer) Quoted() []byte {
	if c := l.Peek(); c != '"' && c != 'n' {
		l.Fail()
	}
	return l.Raw()
}

// Is reports whether raw, as Quoted read it, is the string s.
func Is(raw []byte, s string) bool {
	return len(raw) == len(s)+2 && raw[0] == '"' && string(raw[1:len(raw)-1]) == s
}

// OptString is a string member as a lookup in the decoded map sees it:
// absent (Set is false), null (Null), or the string S.
type OptString struct {
	S         string
	Set, Null bool
}

// Ok reports whether the member is a string, as v.(string) does.
func (s OptString) Ok() bool { return s.Set && !s.Null }

// OptString reads a string or null member; a value of any other type
// fails the lexer.
func (l *Lexer) OptString() OptString {
	if l.Peek() == 'n' {
		l.Null()
		return OptString{Set: true, Null: true}
	}
	return OptString{S: l.String(), Set: true}
}

// Skip reads any value and drops it, failing where encoding/json would.
func (l *Lexer) Skip() { l.skip(0) }

func (l *Lexer) skip(depth int) {
	if depth > maxLexDepth {
		l.ok = false
		return
	}
	switch l.peek() {
	case '{':
		l.i++
		if l.peek() == '}' {
			l.i++
			return
		}
		for l.ok {
			if l.peek() != '"' {
				l.ok = false
				return
			}
			l.skipString()
			if l.peek() != ':' {
				l.ok = false
				return
			}
			l.i++
			l.skip(depth + 1)
			switch l.peek() {
			case ',':
				l.i++
			case '}':
				l.i++
				return
			default:
				l.ok = false
				return
			}
		}
	case '[':
		l.i++
		if l.peek() == ']' {
			l.i++
			return
		}
		for l.ok {
			l.skip(depth + 1)
			switch l.peek() {
			case ',':
				l.i++
			case ']':
				l.i++
				return
			default:
				l.ok = false
				return
			}
		}
	case '"':
		l.skipString()
	case 't', 'f':
		l.Bool()
	case 'n':
		if !l.Null() {
			l.ok = false
		}
	default:
		start := l.i
		simple, ok := l.number()
		if ok && !simple && (l.i-start > 300 || hasExp(l.b[start:l.i])) {
			if _, err := strconv.ParseFloat(string(l.b[start:l.i]), 64); err != nil {
				l.ok = false // encoding/json's map decode fails on it
			}
		}
	}
}

func hasExp(b []byte) bool {
	for _, c := range b {
		if c == 'e' || c == 'E' {
			return true
		}
	}
	return false
}

// skipString reads a string without keeping it: invalid UTF-8 is
// accepted (encoding/json reads it as U+FFFD), a bad escape or a control
// byte is not.
func (l *Lexer) skipString() {
	l.i++
	for l.i < len(l.b) {
		if l.i = nextStop(l.b, l.i, false); l.i >= len(l.b) {
			break
		}
		c := l.b[l.i]
		switch {
		case c == '"':
			l.i++
			return
		case c == '\\':
			if l.i+1 >= len(l.b) {
				l.ok = false
				return
			}
			switch l.b[l.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				l.i += 2
			case 'u':
				l.i += 2
				if _, ok := l.hex4(); !ok {
					return
				}
			default:
				l.ok = false
				return
			}
		case c < 0x20:
			l.ok = false
			return
		default:
			l.i++
		}
	}
	l.ok = false
}
