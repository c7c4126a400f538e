package wire

import "bytes"

// decodeRunRequest is Decode's fast path for the message a router reads
// first, a RunRequest: it reads b, which Scan has accepted, into q
// without reflection, and reports whether it did. As decodeChunkEvent,
// it takes only what it reads exactly as the reflective decoder would: a
// map of the request's own fields, each once, strings as strings,
// integers in range, the request as any one value but nil, and labels as
// a map of strings. For anything else (runtime, nil, an unknown or
// repeated field, a value of another type) it returns false with q
// unspecified, and Decode reads b the reflective way, with that
// decoder's values and errors.
func decodeRunRequest(b []byte, q *RunRequest) bool {
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
			q.V, ok = r.goInt()
		case "run_id":
			bit = 1 << 1
			q.RunID, ok = r.string()
		case "tenant":
			bit = 1 << 2
			q.Tenant, ok = r.string()
		case "principal":
			bit = 1 << 3
			q.Principal, ok = r.string()
		case "profile":
			bit = 1 << 4
			q.Profile, ok = r.string()
		case "request":
			bit = 1 << 5
			var raw []byte
			if raw, ok = r.raw(); ok {
				q.Request = bytes.Clone(raw)
			}
		case "conversation":
			bit = 1 << 6
			q.Conversation, ok = r.string()
		case "deadline_ms":
			bit = 1 << 7
			q.DeadlineMS, ok = r.int()
		case "labels":
			bit = 1 << 8
			q.Labels, ok = r.stringMap()
		default:
			return false // runtime, or a field the reflective decoder refuses
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
	return r.i == len(b)
}

// raw reads one value of any kind but nil and returns its bytes (a window
// of b). b has been accepted by Scan, so every length fits.
func (r *reader) raw() ([]byte, bool) {
	start := r.i
	if r.i >= len(r.b) || r.b[r.i] == 0xc0 {
		return nil, false
	}
	for left := uint64(1); left > 0; left-- {
		c, ok := r.byte()
		if !ok {
			return nil, false
		}
		var skip uint64
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c&0xf0 == 0x80:
			left += 2 * uint64(c&0x0f)
		case c&0xf0 == 0x90:
			left += uint64(c & 0x0f)
		case c&0xe0 == 0xa0:
			skip = uint64(c & 0x1f)
		case c == 0xc4 || c == 0xd9:
			skip, ok = r.be(1)
		case c == 0xc5 || c == 0xda:
			skip, ok = r.be(2)
		case c == 0xc6 || c == 0xdb:
			skip, ok = r.be(4)
		case c >= 0xc7 && c <= 0xc9:
			skip, ok = r.be(1 << (c - 0xc7))
			skip++
		case c == 0xca:
			skip = 4
		case c == 0xcb:
			skip = 8
		case c >= 0xcc && c <= 0xcf:
			skip = 1 << (c - 0xcc)
		case c >= 0xd0 && c <= 0xd3:
			skip = 1 << (c - 0xd0)
		case c >= 0xd4 && c <= 0xd8:
			skip = 1 + 1<<(c-0xd4)
		case c == 0xdc || c == 0xdd:
			var m uint64
			m, ok = r.be(2 << (c - 0xdc))
			left += m
		case c == 0xde || c == 0xdf:
			var m uint64
			m, ok = r.be(2 << (c - 0xde))
			left += 2 * m
		default:
			return nil, false
		}
		if !ok || skip > uint64(len(r.b)-r.i) {
			return nil, false
		}
		r.i += int(skip)
	}
	return r.b[start:r.i], true
}

// stringMap reads a map of strings to strings (an empty map, not nil, for
// a map of no entries, as the reflective decoder gives); a later
// duplicate key wins, as there.
func (r *reader) stringMap() (map[string]string, bool) {
	n, ok := r.mapLen()
	if !ok {
		return nil, false
	}
	m := make(map[string]string, min(n, 64))
	for range n {
		k, ok := r.string()
		if !ok {
			return nil, false
		}
		if m[k], ok = r.string(); !ok {
			return nil, false
		}
	}
	return m, true
}
