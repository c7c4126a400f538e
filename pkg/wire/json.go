package wire

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// JSON strictly decodes b as a message of type t (as Decode does) and
// returns it as one line of JSON: the message's own msgpack keys, in the
// order they are on the wire, with the same values. A binary value that
// holds one msgpack map (an adapter's opaque state encoded that way)
// becomes that map; any other binary value a base64 string (standard
// encoding, padded). A float that JSON cannot hold (NaN, ±Inf) becomes
// the string "NaN", "+Inf" or "-Inf". A request, the adapter's typed
// request, is msgpack in the message itself, so it is JSON like the rest.
//
// An error matches ErrUnknownType for an unknown t, or the Decode error
// of a body that is not a valid message of type t; it never panics.
func JSON(t MessageType, b []byte) ([]byte, error) {
	if err := Check(t, b); err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	out, _, err := appendJSON(make([]byte, 0, 2*len(b)), b, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	return out, nil
}

// topKeys is the keys of the map b holds, in order. b must be exactly one
// msgpack map with string keys (else ErrMalformed).
func topKeys(b []byte) ([]string, error) {
	if len(b) > MaxMessageSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), MaxMessageSize)
	}
	if err := Scan(b); err != nil {
		return nil, err
	}
	n, i, ok := mapLen(b, 0)
	if !ok {
		return nil, fmt.Errorf("%w: top level is not a map", ErrMalformed)
	}
	keys := make([]string, 0, n)
	for range n {
		k, next, ok := str(b, i)
		if !ok {
			return nil, fmt.Errorf("%w: a key at byte %d is not a string", ErrMalformed, i)
		}
		keys = append(keys, k)
		if i, _ = skip(b, next); i < 0 {
			return nil, fmt.Errorf("%w: truncated at byte %d", ErrMalformed, next)
		}
	}
	return keys, nil
}

// The readers below take b as Scan checked it: every declared length fits.

// mapLen reads a map header at i: its number of pairs and where its first
// key starts.
func mapLen(b []byte, i int) (n, next int, ok bool) {
	if i >= len(b) {
		return 0, 0, false
	}
	switch c := b[i]; {
	case c&0xf0 == 0x80:
		return int(c & 0x0f), i + 1, true
	case c == 0xde && i+3 <= len(b):
		return int(binary.BigEndian.Uint16(b[i+1:])), i + 3, true
	case c == 0xdf && i+5 <= len(b):
		return int(binary.BigEndian.Uint32(b[i+1:])), i + 5, true
	}
	return 0, 0, false
}

// lenAt reads a header's length of k bytes at i (1, 2 or 4).
func lenAt(b []byte, i, k int) (int, bool) {
	if i+k > len(b) {
		return 0, false
	}
	switch k {
	case 1:
		return int(b[i]), true
	case 2:
		return int(binary.BigEndian.Uint16(b[i:])), true
	}
	return int(binary.BigEndian.Uint32(b[i:])), true
}

// strOrBin reads a string (str) or binary (bin) value at i: its bytes, where
// the next value starts, and which it was.
func strOrBin(b []byte, i int) (v []byte, next int, isStr, ok bool) {
	if i >= len(b) {
		return nil, 0, false, false
	}
	c := b[i]
	var n, k int
	switch {
	case c&0xe0 == 0xa0:
		n, isStr = int(c&0x1f), true
	case c == 0xd9 || c == 0xc4:
		k, isStr = 1, c == 0xd9
	case c == 0xda || c == 0xc5:
		k, isStr = 2, c == 0xda
	case c == 0xdb || c == 0xc6:
		k, isStr = 4, c == 0xdb
	default:
		return nil, 0, false, false
	}
	if k > 0 {
		if n, ok = lenAt(b, i+1, k); !ok {
			return nil, 0, false, false
		}
	}
	start := i + 1 + k
	if n > len(b)-start {
		return nil, 0, false, false
	}
	return b[start : start+n], start + n, isStr, true
}

func str(b []byte, i int) (string, int, bool) {
	v, next, isStr, ok := strOrBin(b, i)
	if !ok || !isStr {
		return "", 0, false
	}
	return string(v), next, true
}

// skip returns where the value at i ends, or -1.
func skip(b []byte, i int) (int, error) {
	_, next, err := appendJSON(nil, b, i, -1)
	if err != nil {
		return -1, err
	}
	return next, nil
}

// appendJSON appends the JSON of the msgpack value at b[i:] to dst and
// returns where the value ends. depth counts the open containers; a depth
// of -1 only skips the value (dst stays nil).
func appendJSON(dst, b []byte, i, depth int) ([]byte, int, error) {
	emit := depth >= 0
	if depth > MaxDepth {
		return nil, 0, fmt.Errorf("%w: nested deeper than %d", ErrMalformed, MaxDepth)
	}
	inner := depth + 1
	if !emit {
		inner = -1
	}
	if i >= len(b) {
		return nil, 0, fmt.Errorf("%w: truncated at byte %d", ErrMalformed, i)
	}
	c := b[i]
	var n, k int
	switch {
	case c <= 0x7f:
		return appendIf(emit, dst, strconv.AppendInt, int64(c)), i + 1, nil
	case c >= 0xe0:
		return appendIf(emit, dst, strconv.AppendInt, int64(int8(c))), i + 1, nil
	case c == 0xc0:
		return appendStrIf(emit, dst, "null"), i + 1, nil
	case c == 0xc2:
		return appendStrIf(emit, dst, "false"), i + 1, nil
	case c == 0xc3:
		return appendStrIf(emit, dst, "true"), i + 1, nil
	case c >= 0xcc && c <= 0xcf:
		k = 1 << (c - 0xcc)
		if i+1+k > len(b) {
			break
		}
		var u uint64
		for _, x := range b[i+1 : i+1+k] {
			u = u<<8 | uint64(x)
		}
		if emit {
			dst = strconv.AppendUint(dst, u, 10)
		}
		return dst, i + 1 + k, nil
	case c >= 0xd0 && c <= 0xd3:
		k = 1 << (c - 0xd0)
		if i+1+k > len(b) {
			break
		}
		var u uint64
		for _, x := range b[i+1 : i+1+k] {
			u = u<<8 | uint64(x)
		}
		v := int64(u<<(64-8*k)) >> (64 - 8*k) // sign-extended
		return appendIf(emit, dst, strconv.AppendInt, v), i + 1 + k, nil
	case c == 0xca && i+5 <= len(b):
		return appendFloat(emit, dst, float64(math.Float32frombits(binary.BigEndian.Uint32(b[i+1:]))), 32), i + 5, nil
	case c == 0xcb && i+9 <= len(b):
		return appendFloat(emit, dst, math.Float64frombits(binary.BigEndian.Uint64(b[i+1:])), 64), i + 9, nil
	case c&0xe0 == 0xa0 || c == 0xd9 || c == 0xda || c == 0xdb || c == 0xc4 || c == 0xc5 || c == 0xc6:
		v, next, isStr, ok := strOrBin(b, i)
		if !ok {
			break
		}
		if !emit {
			return nil, next, nil
		}
		if isStr {
			return appendString(dst, v), next, nil
		}
		return appendBinary(dst, v, depth), next, nil
	case c&0xf0 == 0x90 || c == 0xdc || c == 0xdd:
		ok := true
		switch c {
		case 0xdc:
			n, ok = lenAt(b, i+1, 2)
			i += 3
		case 0xdd:
			n, ok = lenAt(b, i+1, 4)
			i += 5
		default:
			n = int(c & 0x0f)
			i++
		}
		if !ok {
			break
		}
		if emit {
			dst = append(dst, '[')
		}
		for j := range n {
			if emit && j > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, i, err = appendJSON(dst, b, i, inner); err != nil {
				return nil, 0, err
			}
		}
		if emit {
			dst = append(dst, ']')
		}
		return dst, i, nil
	case isMap(c):
		n, i, ok := mapLen(b, i)
		if !ok {
			break
		}
		if emit {
			dst = append(dst, '{')
		}
		for j := range n {
			if emit && j > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, i, err = appendKey(dst, b, i, inner); err != nil {
				return nil, 0, err
			}
			if emit {
				dst = append(dst, ':')
			}
			if dst, i, err = appendJSON(dst, b, i, inner); err != nil {
				return nil, 0, err
			}
		}
		if emit {
			dst = append(dst, '}')
		}
		return dst, i, nil
	case c >= 0xd4 && c <= 0xd8 || c >= 0xc7 && c <= 0xc9:
		typ, data, next, ok := ext(b, i)
		if !ok {
			break
		}
		if emit {
			dst = appendExt(dst, typ, data)
		}
		return dst, next, nil
	default: // 0xc1, never used
		return nil, 0, fmt.Errorf("%w: invalid msgpack byte 0x%02x at byte %d", ErrMalformed, c, i)
	}
	return nil, 0, fmt.Errorf("%w: truncated value at byte %d", ErrMalformed, i)
}

func appendIf[T any](emit bool, dst []byte, f func([]byte, T, int) []byte, v T) []byte {
	if !emit {
		return dst
	}
	return f(dst, v, 10)
}

func appendStrIf(emit bool, dst []byte, s string) []byte {
	if !emit {
		return dst
	}
	return append(dst, s...)
}

func appendFloat(emit bool, dst []byte, f float64, bits int) []byte {
	switch {
	case !emit:
		return dst
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Inf"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

// appendBinary appends v as the JSON of the msgpack map it holds, or else
// as a base64 string.
func appendBinary(dst, v []byte, depth int) []byte {
	if len(v) > 0 && isMap(v[0]) && Scan(v) == nil {
		if out, _, err := appendJSON(dst, v, 0, depth+1); err == nil {
			return out
		}
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, v)
	return append(dst, '"')
}

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD.
func appendString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '\n':
			dst = append(dst, `\n`...)
		case r == '\r':
			dst = append(dst, `\r`...)
		case r == '\t':
			dst = append(dst, `\t`...)
		case r < 0x20, r == 0x2028, r == 0x2029:
			dst = append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		default:
			dst = append(dst, s[:size]...)
		}
		s = s[size:]
	}
	return append(dst, '"')
}

// appendKey appends the map key at b[i:] as a JSON string: a string as
// itself, any other value (a request is msgpack of the client's making,
// and only the adapter decides what it takes) as the string of its JSON.
func appendKey(dst, b []byte, i, depth int) ([]byte, int, error) {
	if k, next, isStr, ok := strOrBin(b, i); ok && isStr {
		if depth >= 0 {
			dst = appendString(dst, k)
		}
		return dst, next, nil
	}
	v, next, err := appendJSON(nil, b, i, depth)
	if err != nil {
		return nil, 0, err
	}
	if depth >= 0 {
		dst = appendString(dst, v)
	}
	return dst, next, nil
}

// ext reads the extension value at i: its type, its data and where the
// next value starts.
func ext(b []byte, i int) (typ int8, data []byte, next int, ok bool) {
	c := b[i]
	var n, k int
	switch {
	case c >= 0xd4 && c <= 0xd8:
		n = 1 << (c - 0xd4)
	default: // 0xc7, 0xc8, 0xc9
		k = 1 << (c - 0xc7)
		if n, ok = lenAt(b, i+1, k); !ok {
			return 0, nil, 0, false
		}
	}
	start := i + 1 + k + 1 // the type byte follows the length
	if start > len(b) || n > len(b)-start {
		return 0, nil, 0, false
	}
	return int8(b[start-1]), b[start : start+n], start + n, true
}

// appendExt appends an extension value: a msgpack timestamp (type -1) as
// an RFC 3339 string in UTC, any other as {"msgpack_ext": type, "data":
// base64}. No message of this package has one; a request may.
func appendExt(dst []byte, typ int8, data []byte) []byte {
	if typ == -1 {
		var sec int64
		var nsec uint32
		ok := true
		switch len(data) {
		case 4:
			sec = int64(binary.BigEndian.Uint32(data))
		case 8:
			v := binary.BigEndian.Uint64(data)
			nsec, sec = uint32(v>>34), int64(v&(1<<34-1))
		case 12:
			nsec, sec = binary.BigEndian.Uint32(data), int64(binary.BigEndian.Uint64(data[4:]))
		default:
			ok = false
		}
		if ok {
			if ts := time.Unix(sec, int64(nsec)).UTC(); ts.Year() >= 0 && ts.Year() <= 9999 {
				return append(append(append(dst, '"'), ts.Format(time.RFC3339Nano)...), '"')
			}
		}
	}
	dst = append(dst, `{"msgpack_ext":`...)
	dst = strconv.AppendInt(dst, int64(typ), 10)
	dst = append(dst, `,"data":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, data)
	return append(dst, `"}`...)
}
