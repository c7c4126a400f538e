package ndjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
)

// Framing errors returned by Decoder.Next and Decoder.NextBytes.
var (
	// ErrIncomplete is a final value cut off by EOF; Decoder.Tail holds it.
	ErrIncomplete = errors.New("incomplete final JSON value")
	// ErrNotMap is a complete value that is not a JSON object.
	ErrNotMap = errors.New("JSON value is not an object")
	// ErrTooLarge is an object longer than MaxValueBytes.
	ErrTooLarge = errors.New("JSON value too large")
)

// MaxValueBytes bounds one object on a child's stdout, and so what a
// Decoder buffers. A longer object is an error matching ErrTooLarge.
const MaxValueBytes = 64 << 20

// maxNewlineChecks bounds how often one object spanning lines is checked
// for a syntax error at a line end (see Decoder.scan).
const maxNewlineChecks = 16

// Decoder frames a stream of JSON objects, newline-delimited or directly
// concatenated, decoding UTF-8 incrementally across reads. It finds where
// an object ends by its braces and strings alone, without encoding/json's
// token scanner, and hands anything that does not start an object to
// encoding/json, so every error is the one json.Decoder gives. It is not
// safe for concurrent use.
type Decoder struct {
	r      io.Reader
	buf    []byte
	off    int   // start of what is not yet returned
	rerr   error // the reader's error, once it returned one
	tail   []byte
	value  []byte // the last object returned by NextBytes (a window of buf)
	filled bool   // the last read filled the room it had

	// the scan of the object starting at off
	pos    int    // next byte to scan
	stack  []byte // open '{' and '['
	inStr  bool
	esc    bool
	checks int // newline checks made
}

// NewDecoder returns a Decoder reading r.
func NewDecoder(r io.Reader) *Decoder { return &Decoder{r: r} }

// Next returns the next object. At a clean end it returns io.EOF; a value
// cut off by EOF returns an error matching ErrIncomplete; a scalar or array
// returns one matching ErrNotMap; malformed JSON returns the syntax error
// (a *json.SyntaxError), a number out of range a *json.UnmarshalTypeError,
// and an object over MaxValueBytes one matching ErrTooLarge. After any
// error but io.EOF the Decoder must not be used again.
func (d *Decoder) Next() (map[string]any, error) {
	b, err := d.NextBytes()
	if err != nil {
		return nil, err
	}
	return DecodeObject(b)
}

// NextBytes returns the bytes of the next value that starts an object,
// from its '{' to the brace that closes it, without decoding it: they are
// JSON only if DecodeObject (or a Lexer) says so. They are valid until the
// next call (after a clean EOF the Decoder's buffer is reused by others). Its errors are Next's, except that a syntax error or a
// number out of range inside an object is left to the decoding.
func (d *Decoder) NextBytes() ([]byte, error) {
	if err := d.start(); err != nil {
		return nil, err
	}
	return d.frame()
}

// NextLine is NextBytes for a consumer that reads every object exactly or
// not at all, as a Lexer does, and so can spare the framing. When the next
// value starts an object and a newline follows in what is already read,
// NextLine returns without framing it, with guess true: b runs from the
// object's '{' through that newline. Such a line holds the object
// NextBytes would return followed by whitespace only exactly when it is
// one JSON object followed by whitespace only, as encoding/json reads it:
// such an object, before the line's first newline, has no newline,
// control byte or unbalanced bracket where the framing would end it
// early. A consumer that finds the line is not one calls Reframe before
// anything else. Without a guess NextLine is
// NextBytes. b is valid until the next call.
func (d *Decoder) NextLine() (b []byte, guess bool, err error) {
	if err := d.start(); err != nil {
		return nil, false, err
	}
	if n := bytes.IndexByte(d.buf[d.off:], '\n'); n >= 0 && n < MaxValueBytes {
		d.value = d.buf[d.off : d.off+n+1]
		return d.value, true, nil
	}
	b, err = d.frame()
	return b, false, err
}

// Reframe, called after NextLine returned a guess, returns what NextBytes
// would have returned in its place: the object the guess starts with,
// framed, or NextBytes's error.
func (d *Decoder) Reframe() ([]byte, error) {
	d.value = nil
	return d.frame()
}

// start moves past the last value returned and the whitespace after it,
// to the first byte of the next value, and returns the error that ends
// the stream there: io.EOF, a read error, or encoding/json's for a value
// that does not start an object.
func (d *Decoder) start() error {
	d.off += len(d.value)
	d.value = nil
	// Skip whitespace between values.
	for {
		for d.off < len(d.buf) && isSpace(d.buf[d.off]) {
			d.off++
		}
		if d.off < len(d.buf) {
			break
		}
		if d.rerr != nil {
			if d.rerr == io.EOF {
				d.release()
			}
			return d.rerr
		}
		d.fill()
	}
	if d.buf[d.off] != '{' {
		return d.fallback()
	}
	return nil
}

// frame finds the end of the object starting at off (scan), reading more
// as it needs to.
func (d *Decoder) frame() ([]byte, error) {
	d.pos, d.stack, d.inStr, d.esc, d.checks = d.off, d.stack[:0], false, false, 0
	for {
		end, done := d.scan()
		if done {
			d.value = d.buf[d.off:end]
			return d.value, nil
		}
		if d.pos-d.off > MaxValueBytes {
			return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, MaxValueBytes)
		}
		if d.rerr != nil {
			if d.rerr != io.EOF {
				return nil, d.rerr
			}
			return nil, d.fallback()
		}
		d.fill()
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// scan goes on with the object at off and reports where its frame ends.
// The frame ends at the brace that closes the object; it also ends early,
// just after the byte, where encoding/json would already stop with a
// syntax error: a control byte in a string, a closing bracket of the
// wrong kind, or a line end after which the object so far is not a JSON
// prefix (checked at most maxNewlineChecks times an object). The decoding
// of such a frame then fails with that syntax error, as json.Decoder
// would, at the same point of the stream.
func (d *Decoder) scan() (end int, done bool) {
	b := d.buf
	inStr, esc := d.inStr, d.esc // in locals: this loop is the framing's cost
	i := d.pos
	for i < len(b) {
		if inStr {
			if esc {
				esc = false
				i++
				continue
			}
			// The bulk of a line is string content: pass 8 bytes at a time
			// over those that are neither a quote, a backslash nor a
			// control byte, then run to the next byte that matters.
			for i+8 <= len(b) && !special(binary.LittleEndian.Uint64(b[i:])) {
				i += 8
			}
			for i < len(b) && !inString[b[i]] {
				i++
			}
			if i == len(b) {
				break
			}
			switch c := b[i]; {
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			default: // a control byte
				d.inStr, d.esc = inStr, esc
				return i + 1, true
			}
			i++
			continue
		}
		for i < len(b) && !outside[b[i]] {
			i++ // names' quotes aside, nothing between values matters
		}
		if i == len(b) {
			break
		}
		switch c := b[i]; c {
		case '"':
			inStr = true
		case '{', '[':
			d.stack = append(d.stack, c)
		case '}', ']':
			open := byte('{')
			if c == ']' {
				open = '['
			}
			if len(d.stack) == 0 || d.stack[len(d.stack)-1] != open {
				d.inStr, d.esc = inStr, esc
				return i + 1, true
			}
			d.stack = d.stack[:len(d.stack)-1]
			if len(d.stack) == 0 {
				d.inStr, d.esc = inStr, esc
				return i + 1, true
			}
		case '\n':
			if d.checks < maxNewlineChecks {
				d.checks++
				if notPrefix(b[d.off : i+1]) {
					d.inStr, d.esc = inStr, esc
					return i + 1, true
				}
			}
		}
		i++
	}
	d.inStr, d.esc = inStr, esc
	d.pos = len(b)
	return 0, false
}

// special reports whether any of the 8 bytes in x is a quote, a backslash
// or a control byte (below 0x20): the bytes that end a run of plain string
// bytes. Each test is the classic "has a zero byte" one; it is exact for
// whether some byte matches, which is all the caller asks.
func special(x uint64) bool { return specialBits(x) != 0 }

// specialBits has the high bit set of the first byte of x (the lowest)
// that is a quote, a backslash or a control byte, and perhaps of later
// ones: a "has a zero byte" test may flag bytes above a true match, never
// below one, so the lowest bit set is exact.
func specialBits(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return ((q-ones)&^q | (bs-ones)&^bs | (x-ones*0x20)&^x) & highs
}

// nextStop returns the index of the first byte of b at or after i that is
// a quote, a backslash, a control byte or, with ascii set, a byte of 0x80
// or above; len(b) if there is none. It goes 8 bytes at a time.
func nextStop(b []byte, i int, ascii bool) int {
	var high uint64
	if ascii {
		high = 0x8080808080808080
	}
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if m := specialBits(x) | x&high; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 || ascii && c >= 0x80 {
			return i
		}
	}
	return i
}

// inString and outside are the bytes scan stops at inside a string (a
// quote, a backslash, a control byte) and outside one (a quote, a bracket,
// a line end).
var inString, outside = func() (in, out [256]bool) {
	for c := range 0x20 {
		in[c] = true
	}
	in['"'], in['\\'] = true, true
	for _, c := range []byte("\"{}[]\n") {
		out[c] = true
	}
	return in, out
}()

// notPrefix reports whether b, an unfinished object, already holds a
// syntax error.
func notPrefix(b []byte) bool {
	var v any
	err := json.NewDecoder(bytes.NewReader(b)).Decode(&v)
	var syn *json.SyntaxError
	return errors.As(err, &syn)
}

// fill reads more input into buf, keeping buf[off:]. The buffer starts
// small, so that a short stream costs little; it doubles, up to
// fillBuffer, while the reads fill it (a fast writer: fewer, larger
// reads), and beyond that while one value outgrows it.
func (d *Decoder) fill() {
	if d.off > 0 && (d.off >= len(d.buf)/2 || cap(d.buf)-len(d.buf) < minRead) {
		n := copy(d.buf, d.buf[d.off:])
		d.pos -= d.off
		d.buf = d.buf[:n]
		d.off = 0
	}
	if cap(d.buf) == 0 {
		if p, _ := bufPool.Get().(*[]byte); p != nil {
			d.buf = (*p)[:0]
		}
	}
	if cap(d.buf)-len(d.buf) < minRead || d.filled && cap(d.buf) < fillBuffer {
		nb := make([]byte, len(d.buf), max(4<<10, 2*cap(d.buf)))
		copy(nb, d.buf)
		d.buf = nb
	}
	room := d.buf[len(d.buf):cap(d.buf)]
	n, err := d.r.Read(room)
	d.buf = d.buf[:len(d.buf)+n]
	d.filled = n == len(room)
	if err != nil {
		d.rerr = err
	}
}

// fillBuffer is the size the buffer grows to while reads fill it: a
// pipe's default capacity on Linux.
const fillBuffer = 64 << 10

// minRead is the least room fill reads into.
const minRead = 512

// bufPool holds the buffers of Decoders that reached a clean EOF, so that
// a process reading many short-lived children's stdout reuses them. Only
// buffers of at most maxPooled bytes go back.
var bufPool sync.Pool // of *[]byte

const maxPooled = 64 << 10

// release gives the buffer back at a clean EOF, once everything in it has
// been returned: the last value is no longer valid after the call that
// returns io.EOF.
func (d *Decoder) release() {
	if d.buf == nil {
		return
	}
	if cap(d.buf) <= maxPooled {
		b := d.buf[:0]
		bufPool.Put(&b)
	}
	d.buf, d.off, d.pos, d.value = nil, 0, 0, nil
}

// fallback decodes what is left with encoding/json, for a value that does
// not start an object or an object cut off by EOF: its result is always
// an error, the one json.Decoder gives.
func (d *Decoder) fallback() error {
	var rest io.Reader = bytes.NewReader(d.buf[d.off:])
	switch {
	case d.rerr == nil:
		rest = io.MultiReader(rest, d.r)
	case d.rerr != io.EOF:
		rest = io.MultiReader(rest, errReader{d.rerr})
	}
	dec := json.NewDecoder(rest)
	var v any
	if err := dec.Decode(&v); err != nil {
		if err == io.EOF {
			return io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			d.tail = bytes.TrimSpace(bytesOf(dec.Buffered()))
			return fmt.Errorf("%w (%d bytes)", ErrIncomplete, len(d.tail))
		}
		return err
	}
	if _, ok := v.(map[string]any); ok {
		// Only a framing bug lands here: an object was complete after all.
		return fmt.Errorf("%w: an object the framing missed", ErrNotMap)
	}
	return fmt.Errorf("%w: got %s", ErrNotMap, TypeName(v))
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// DecodeObject decodes one framed object (NextBytes) into a map as Next
// does: malformed JSON is the *json.SyntaxError, a number out of range a
// *json.UnmarshalTypeError, and a value that is not an object matches
// ErrNotMap.
func DecodeObject(b []byte) (map[string]any, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: got %s", ErrNotMap, TypeName(v))
	}
	return m, nil
}

// Tail is the incomplete final value after Next returned ErrIncomplete.
func (d *Decoder) Tail() []byte { return d.tail }

func bytesOf(r io.Reader) []byte {
	b, _ := io.ReadAll(r)
	return b
}

// TypeName names the JSON type of v as encoding/json decodes a value into
// an any ("null", "a number", "an object", …; a json.Number is a number),
// for "…, not a string" and "want …, got …" messages about decoded JSON.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
