package proc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Framing errors returned by Decoder.Next.
var (
	// ErrIncomplete is a final value cut off by EOF; Decoder.Tail holds it.
	ErrIncomplete = errors.New("incomplete final JSON value")
	// ErrNotMap is a complete value that is not a JSON object.
	ErrNotMap = errors.New("JSON value is not an object")
)

// Decoder frames a stream of JSON objects, newline-delimited or directly
// concatenated, decoding UTF-8 incrementally across reads. It is not safe
// for concurrent use.
type Decoder struct {
	dec  *json.Decoder
	tail []byte
}

// NewDecoder returns a Decoder reading r.
func NewDecoder(r io.Reader) *Decoder { return &Decoder{dec: json.NewDecoder(r)} }

// Next returns the next object. At a clean end it returns io.EOF; a value
// cut off by EOF returns an error matching ErrIncomplete; a scalar or array
// returns one matching ErrNotMap; malformed JSON returns the syntax error.
// After any error but io.EOF the Decoder must not be used again.
func (d *Decoder) Next() (map[string]any, error) {
	var v any
	if err := d.dec.Decode(&v); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			d.tail = bytes.TrimSpace(bytesOf(d.dec.Buffered()))
			return nil, fmt.Errorf("%w (%d bytes)", ErrIncomplete, len(d.tail))
		}
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: got %s", ErrNotMap, kind(v))
	}
	return m, nil
}

// Tail is the incomplete final value after Next returned ErrIncomplete.
func (d *Decoder) Tail() []byte { return d.tail }

func bytesOf(r io.Reader) []byte {
	b, _ := io.ReadAll(r)
	return b
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}
