package wire

import (
	"encoding/binary"
	"math"
)

// decodeChunkEvent is Decode's fast path for the events a follower reads
// most, chunk and chunks events: it reads b, which Scan has accepted, into
// e without reflection, and reports whether it did. It takes only what it
// reads exactly as the reflective decoder would: a map of the event's own
// fields, each once, with the chunk fields a text stream carries (strings,
// booleans, unsigned and signed integers in range, and metadata of plain
// strings). For anything else (a status, a tool's input or output, usage
// or capabilities, nil, an unknown or repeated field, a value of another
// type) it returns false with e unspecified, and Decode reads b the
// reflective way, with that decoder's values and errors.
func decodeChunkEvent(b []byte, e *Event) bool {
	r := reader{b: b}
	n, ok := r.mapLen()
	if !ok {
		return false
	}
	var seen uint16
	for range n {
		k, ok := r.str()
		if !ok {
			return false
		}
		var bit uint16
		switch string(k) {
		case "v":
			bit = 1 << 0
			e.V, ok = r.goInt()
		case "run_id":
			bit = 1 << 1
			e.RunID, ok = r.string()
		case "seq":
			bit = 1 << 2
			e.Seq, ok = r.uint()
		case "ts":
			bit = 1 << 3
			e.TS, ok = r.int()
		case "kind":
			bit = 1 << 4
			var s []byte
			if s, ok = r.str(); ok {
				e.Kind = eventKind(s)
			}
		case "chunk":
			bit = 1 << 5
			e.Chunk = new(Chunk)
			ok = r.chunk(e.Chunk)
		case "last":
			bit = 1 << 6
			e.Last, ok = r.uint()
		case "chunks":
			bit = 1 << 7
			var m int
			if m, ok = r.arrayLen(); !ok || m == 0 {
				return false
			}
			e.Chunks = make([]Chunk, m)
			for i := range e.Chunks {
				if !r.chunk(&e.Chunks[i]) {
					return false
				}
			}
		default:
			return false // a status, or a field the reflective decoder refuses
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
	return r.i == len(b)
}

func (r *reader) chunk(c *Chunk) bool {
	n, ok := r.mapLen()
	if !ok {
		return false
	}
	var seen uint16
	for range n {
		k, ok := r.str()
		if !ok {
			return false
		}
		var bit uint16
		switch string(k) {
		case "type":
			bit = 1 << 0
			var s []byte
			if s, ok = r.str(); ok {
				c.Type = chunkType(s)
			}
		case "content":
			bit = 1 << 1
			c.Content, ok = r.string()
		case "tool_name":
			bit = 1 << 2
			c.ToolName, ok = r.string()
		case "tool_id":
			bit = 1 << 3
			c.ToolID, ok = r.string()
		case "is_error":
			bit = 1 << 4
			c.IsError, ok = r.bool()
		case "is_delta":
			bit = 1 << 5
			c.IsDelta, ok = r.bool()
		case "metadata":
			bit = 1 << 6
			ok = r.metadata(&c.Metadata)
		default:
			return false // tool_input, tool_output, or what is refused
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
	return true
}

func (r *reader) metadata(m *Metadata) bool {
	n, ok := r.mapLen()
	if !ok {
		return false
	}
	var seen uint16
	for range n {
		k, ok := r.str()
		if !ok {
			return false
		}
		var bit uint16
		var dst *string
		switch string(k) {
		case "provider":
			bit, dst = 1<<0, &m.Provider
		case "model":
			bit, dst = 1<<1, &m.Model
		case "session_id":
			bit, dst = 1<<2, &m.SessionID
		case "provider_session_id":
			bit, dst = 1<<3, &m.ProviderSessionID
		case "cost":
			bit, dst = 1<<4, &m.Cost
		case "stop_reason":
			bit, dst = 1<<5, &m.StopReason
		case "error_class":
			bit = 1 << 6
			var s string
			s, ok = r.string()
			m.ErrorClass = Class(s)
		default:
			return false // usage, capabilities, numbers: the reflective way
		}
		if dst != nil {
			*dst, ok = r.string()
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
	return true
}

// eventKind and chunkType are the constants for the kinds and types the
// fast path meets, so that no string is made for them.
func eventKind(b []byte) EventKind {
	switch string(b) {
	case string(KindChunk):
		return KindChunk
	case string(KindChunks):
		return KindChunks
	case string(KindStatus):
		return KindStatus
	}
	return EventKind(b)
}

func chunkType(b []byte) ChunkType {
	switch ChunkType(b) {
	case ChunkText:
		return ChunkText
	case ChunkThinking:
		return ChunkThinking
	case ChunkToolUse:
		return ChunkToolUse
	case ChunkToolResult:
		return ChunkToolResult
	case ChunkSystem:
		return ChunkSystem
	case ChunkResult:
		return ChunkResult
	case ChunkError:
		return ChunkError
	}
	return ChunkType(b)
}

// reader reads msgpack values from b, which Scan has accepted: every
// declared length fits in b. Each read reports false for a value of
// another kind, and the caller gives up.
type reader struct {
	b []byte
	i int
}

func (r *reader) byte() (byte, bool) {
	if r.i >= len(r.b) {
		return 0, false
	}
	c := r.b[r.i]
	r.i++
	return c, true
}

// be reads an n-byte big-endian unsigned integer.
func (r *reader) be(n int) (uint64, bool) {
	if len(r.b)-r.i < n {
		return 0, false
	}
	p := r.b[r.i : r.i+n]
	r.i += n
	switch n {
	case 1:
		return uint64(p[0]), true
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), true
	case 4:
		return uint64(binary.BigEndian.Uint32(p)), true
	}
	return binary.BigEndian.Uint64(p), true
}

func (r *reader) mapLen() (int, bool) { return r.count(0x80, 0xde) }

func (r *reader) arrayLen() (int, bool) { return r.count(0x90, 0xdc) }

// count reads the length of a map or an array: fix is the high nibble of
// its fix form, and w16 the type byte of its 16-bit form (w16+1 is its
// 32-bit form).
func (r *reader) count(fix, w16 byte) (int, bool) {
	c, ok := r.byte()
	switch {
	case !ok:
		return 0, false
	case c&0xf0 == fix:
		return int(c & 0x0f), true
	case c == w16:
		n, ok := r.be(2)
		return int(n), ok
	case c == w16+1:
		n, ok := r.be(4)
		return int(n), ok
	}
	return 0, false
}

// str reads a string's bytes (a window of b).
func (r *reader) str() ([]byte, bool) {
	c, ok := r.byte()
	var n uint64
	switch {
	case !ok:
		return nil, false
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xd9:
		n, ok = r.be(1)
	case c == 0xda:
		n, ok = r.be(2)
	case c == 0xdb:
		n, ok = r.be(4)
	default:
		return nil, false
	}
	if !ok || n > uint64(len(r.b)-r.i) {
		return nil, false
	}
	s := r.b[r.i : r.i+int(n)]
	r.i += int(n)
	return s, true
}

func (r *reader) string() (string, bool) {
	s, ok := r.str()
	return string(s), ok
}

func (r *reader) bool() (bool, bool) {
	switch c, _ := r.byte(); c {
	case 0xc2:
		return false, true
	case 0xc3:
		return true, true
	}
	return false, false
}

// uint reads a non-negative integer.
func (r *reader) uint() (uint64, bool) {
	c, ok := r.byte()
	switch {
	case !ok:
		return 0, false
	case c <= 0x7f:
		return uint64(c), true
	case c >= 0xcc && c <= 0xcf:
		return r.be(1 << (c - 0xcc))
	}
	return 0, false
}

// goInt reads an integer that fits in an int.
func (r *reader) goInt() (int, bool) {
	v, ok := r.int()
	return int(v), ok && v >= math.MinInt && v <= math.MaxInt
}

// int reads an integer that fits in an int64.
func (r *reader) int() (int64, bool) {
	c, ok := r.byte()
	switch {
	case !ok:
		return 0, false
	case c <= 0x7f:
		return int64(c), true
	case c >= 0xe0:
		return int64(int8(c)), true
	case c >= 0xcc && c <= 0xcf:
		n, ok := r.be(1 << (c - 0xcc))
		return int64(n), ok && n <= math.MaxInt64
	case c >= 0xd0 && c <= 0xd3:
		w := 1 << (c - 0xd0)
		n, ok := r.be(w)
		switch w {
		case 1:
			return int64(int8(n)), ok
		case 2:
			return int64(int16(n)), ok
		case 4:
			return int64(int32(n)), ok
		}
		return int64(n), ok
	}
	return 0, false
}
