package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Decoding errors. Every error Decode returns matches exactly one of them
// with errors.Is.
var (
	ErrMalformed = errors.New("malformed message")
	ErrTooLarge  = errors.New("message too large")
	ErrVersion   = errors.New("unsupported message version")
)

// MaxMessageSize bounds an encoded message (the NATS default max payload).
const MaxMessageSize = 1 << 20

// MaxDepth bounds the nesting of maps and arrays in a message.
const MaxDepth = 64

var encPool = sync.Pool{New: func() any {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetCustomStructTag("msgpack")
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true) // deterministic bytes: profile hashes and request digests depend on it
	return &encoder{buf: &buf, enc: enc}
}}

type encoder struct {
	buf *bytes.Buffer
	enc *msgpack.Encoder
}

// Marshal encodes v as msgpack. It is safe for concurrent use. A
// *RunRecord or a *Work is written by hand (AppendRunRecord, AppendWork),
// the same bytes the reflective encoder writes for any other value.
func Marshal(v any) ([]byte, error) {
	var b []byte
	var err error
	switch m := v.(type) {
	case *RunRecord:
		b, err = AppendRunRecord(make([]byte, 0, 256), m)
	case *Work:
		b, err = AppendWork(make([]byte, 0, 512), m)
	default:
		return marshalValue(v)
	}
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	if len(b) > MaxMessageSize {
		return nil, fmt.Errorf("encode %T: %w: %d bytes", v, ErrTooLarge, len(b))
	}
	return b, nil
}

// marshalValue is Marshal through the reflective encoder.
func marshalValue(v any) ([]byte, error) {
	e := encPool.Get().(*encoder)
	defer encPool.Put(e)
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	if e.buf.Len() > MaxMessageSize {
		return nil, fmt.Errorf("encode %T: %w: %d bytes", v, ErrTooLarge, e.buf.Len())
	}
	return bytes.Clone(e.buf.Bytes()), nil
}

// Versioned is a message with a schema version.
type Versioned interface {
	RunRequest | Work | Event | RunRecord | Lease | CancelReply | Checkpoint | Consent | ExportRecord | RedactionRules |
		SpendEntry | SpendRollup | Budget | Quota | InFlight | Input | InputReply | PermissionAnswer | PermissionReply
}

// Decode strictly decodes one message of type T from b: b must hold exactly
// one well-formed msgpack map no larger than MaxMessageSize and no deeper
// than MaxDepth, with no unknown field, and v a version from Version to
// MaxVersion that has every field the message uses (VersionOf).
func Decode[T Versioned](b []byte) (T, error) {
	var out T
	if fastDecode(b, &out) {
		// The chunk events a follower reads most and the requests a
		// router reads, without reflection.
	} else {
		out = *new(T)
		if err := decodeStrict(b, &out); err != nil {
			return out, err
		}
	}
	if v := version(&out); v < Version || v > MaxVersion {
		return out, fmt.Errorf("%w: v=%d, want %d to %d", ErrVersion, v, Version, MaxVersion)
	} else if need, field := needs(&out, false); v < need {
		return out, fmt.Errorf("%w: v=%d with field %s, which needs v=%d", ErrVersion, v, field, need)
	}
	if e, ok := any(&out).(*Event); ok {
		if err := e.check(); err != nil {
			return out, err
		}
	}
	return out, nil
}

// fastDecode reads b into out without reflection if out is of a type
// with a fast path and b is a plain encoding of it (decodeChunkEvent,
// decodeRunRequest); false leaves out for the reflective decoder.
func fastDecode[T Versioned](b []byte, out *T) bool {
	switch m := any(out).(type) {
	case *Event:
		return len(b) <= MaxMessageSize && Scan(b) == nil && decodeChunkEvent(b, m)
	case *RunRequest:
		return len(b) <= MaxMessageSize && Scan(b) == nil && decodeRunRequest(b, m)
	}
	return false
}

// check refuses an event whose batch fields disagree with its kind or with
// each other (ErrMalformed).
func (e *Event) check() error {
	if e.Kind == KindStatuses {
		return e.checkStatuses()
	}
	if e.Statuses != nil {
		return fmt.Errorf("%w: a %.20q event with statuses (only a %q event has them)", ErrMalformed, e.Kind, KindStatuses)
	}
	if e.Kind != KindChunks {
		if e.Last != 0 || e.Chunks != nil {
			return fmt.Errorf("%w: a %.20q event with last or chunks (only a %q event has them)", ErrMalformed, e.Kind, KindChunks)
		}
		return nil
	}
	switch {
	case e.Status != nil || e.Chunk != nil:
		return fmt.Errorf("%w: a %q event carries a status or a single chunk", ErrMalformed, KindChunks)
	case e.Seq == 0:
		return fmt.Errorf("%w: a %q event starts at seq 0", ErrMalformed, KindChunks)
	case e.Last < e.Seq:
		return fmt.Errorf("%w: a %q event with last %d before seq %d", ErrMalformed, KindChunks, e.Last, e.Seq)
	case uint64(len(e.Chunks)) != e.Last-e.Seq+1:
		return fmt.Errorf("%w: a %q event of seqs %d to %d holds %d chunks", ErrMalformed, KindChunks, e.Seq, e.Last, len(e.Chunks))
	}
	return nil
}

// checkStatuses is check's for a KindStatuses event.
func (e *Event) checkStatuses() error {
	switch {
	case e.Status != nil || e.Chunk != nil || e.Chunks != nil:
		return fmt.Errorf("%w: a %q event carries a single status or chunks", ErrMalformed, KindStatuses)
	case e.Seq == 0:
		return fmt.Errorf("%w: a %q event starts at seq 0", ErrMalformed, KindStatuses)
	case len(e.Statuses) < 2:
		return fmt.Errorf("%w: a %q event holds %d statuses, at least 2", ErrMalformed, KindStatuses, len(e.Statuses))
	case e.Last < e.Seq || uint64(len(e.Statuses)) != e.Last-e.Seq+1:
		return fmt.Errorf("%w: a %q event of seqs %d to %d holds %d statuses", ErrMalformed, KindStatuses, e.Seq, e.Last, len(e.Statuses))
	}
	for i := range e.Statuses {
		if e.Statuses[i].State.Terminal() {
			return fmt.Errorf("%w: a %q event holds the terminal status %s at seq %d", ErrMalformed, KindStatuses, e.Statuses[i].State, e.Seq+uint64(i))
		}
	}
	return nil
}

// VersionOf is the version m is written in: the lowest that has every
// field it uses (Version unless it uses a field of a later one); for an
// event of a batch kind, BatchVersion at least.
func VersionOf[T Versioned](m *T) int {
	need, _ := needs(m, true)
	return need
}

// needs is the lowest version that has every field m uses, and the first
// such field of a version above Version. Without batches, an event's
// batch kind does not count: a reader accepts a batch stamped v1, as
// writers before BatchVersion stamped them.
func needs(m any, batches bool) (int, string) {
	switch m := m.(type) {
	case *RunRequest:
		if m.Workspace != nil {
			return 2, "workspace"
		}
	case *Work:
		if m.Workspace != nil {
			return 2, "workspace"
		}
	case *Input, *InputReply, *PermissionAnswer, *PermissionReply:
		return 3, "(a session control message)"
	case *Event:
		if m.Chunk != nil && m.Chunk.Type.Version() == 3 {
			return 3, "chunk.type " + string(m.Chunk.Type)
		}
		for i := range m.Chunks {
			if m.Chunks[i].Type.Version() == 3 {
				return 3, "chunks.type " + string(m.Chunks[i].Type)
			}
		}
		if f := m.Status.v2Field(); f != "" {
			return 2, f
		}
		for i := range m.Statuses {
			if f := m.Statuses[i].v2Field(); f != "" {
				return 2, f
			}
		}
		if batches && (m.Kind == KindChunks || m.Kind == KindStatuses) {
			return BatchVersion, "kind " + string(m.Kind)
		}
	}
	return Version, ""
}

// v2Field names a field of contract v2 that s uses, or is "".
func (s *Status) v2Field() string {
	switch {
	case s == nil:
		return ""
	case s.Artifacts != nil:
		return "status.artifacts"
	case s.Sandbox != "":
		return "status.sandbox"
	}
	return ""
}

func version(m any) int {
	switch m := m.(type) {
	case *RunRequest:
		return m.V
	case *Work:
		return m.V
	case *Event:
		return m.V
	case *RunRecord:
		return m.V
	case *Lease:
		return m.V
	case *CancelReply:
		return m.V
	case *Checkpoint:
		return m.V
	case *Consent:
		return m.V
	case *ExportRecord:
		return m.V
	case *RedactionRules:
		return m.V
	case *SpendEntry:
		return m.V
	case *SpendRollup:
		return m.V
	case *Budget:
		return m.V
	case *Quota:
		return m.V
	case *InFlight:
		return m.V
	case *Input:
		return m.V
	case *InputReply:
		return m.V
	case *PermissionAnswer:
		return m.V
	case *PermissionReply:
		return m.V
	}
	return -1
}

// DecodeStrict decodes b into v (a pointer) with the same structural and
// strictness checks as Decode but without a version. Adapters use it for
// their typed requests.
func DecodeStrict(b []byte, v any) error { return decodeStrict(b, v) }

func decodeStrict(b []byte, v any) error {
	if len(b) > MaxMessageSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), MaxMessageSize)
	}
	if err := Scan(b); err != nil {
		return err
	}
	if len(b) == 0 || !isMap(b[0]) {
		return fmt.Errorf("%w: top level is not a map", ErrMalformed)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.SetCustomStructTag("msgpack")
	dec.DisallowUnknownFields(true)
	dec.SetMapDecoder(decodeStringMap)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// decodeStringMap decodes nested maps as map[string]any, refusing non-string
// keys, so that every decoded value can be re-encoded as JSON.
func decodeStringMap(d *msgpack.Decoder) (any, error) {
	n, err := d.DecodeMapLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, nil
	}
	m := make(map[string]any, min(n, 64))
	for range n {
		k, err := d.DecodeString()
		if err != nil {
			return nil, fmt.Errorf("map key: %w", err)
		}
		v, err := d.DecodeInterface()
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

func isMap(c byte) bool { return c&0xf0 == 0x80 || c == 0xde || c == 0xdf }

func isContainer(c byte) bool { return isMap(c) || c&0xf0 == 0x90 || c == 0xdc || c == 0xdd }

// Scan checks that b holds exactly one complete msgpack value nested no
// deeper than MaxDepth, whose declared lengths fit in b. It never allocates
// in proportion to a declared length, so it is safe on hostile input.
func Scan(b []byte) error {
	pending := make([]uint64, 0, 8) // values still expected at each open level
	pending = append(pending, 1)
	i := 0
	for len(pending) > 0 {
		top := len(pending) - 1
		if pending[top] == 0 {
			pending = pending[:top]
			continue
		}
		pending[top]--
		if i >= len(b) {
			return fmt.Errorf("%w: truncated at byte %d", ErrMalformed, i)
		}
		c := b[i]
		i++
		var skip, children uint64
		var lenBytes int
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c&0xf0 == 0x80:
			children = 2 * uint64(c&0x0f)
		case c&0xf0 == 0x90:
			children = uint64(c & 0x0f)
		case c&0xe0 == 0xa0:
			skip = uint64(c & 0x1f)
		case c == 0xc4 || c == 0xd9:
			lenBytes = 1
		case c == 0xc5 || c == 0xda:
			lenBytes = 2
		case c == 0xc6 || c == 0xdb:
			lenBytes = 4
		case c == 0xc7:
			lenBytes, skip = 1, 1
		case c == 0xc8:
			lenBytes, skip = 2, 1
		case c == 0xc9:
			lenBytes, skip = 4, 1
		case c == 0xca:
			skip = 4
		case c == 0xcb:
			skip = 8
		case c == 0xcc || c == 0xd0:
			skip = 1
		case c == 0xcd || c == 0xd1:
			skip = 2
		case c == 0xce || c == 0xd2:
			skip = 4
		case c == 0xcf || c == 0xd3:
			skip = 8
		case c >= 0xd4 && c <= 0xd8:
			skip = 1 + 1<<(c-0xd4)
		case c == 0xdc || c == 0xde:
			lenBytes = 2
		case c == 0xdd || c == 0xdf:
			lenBytes = 4
		default: // 0xc1
			return fmt.Errorf("%w: invalid byte 0x%02x at %d", ErrMalformed, c, i-1)
		}
		if lenBytes > 0 {
			if len(b)-i < lenBytes {
				return fmt.Errorf("%w: truncated length at byte %d", ErrMalformed, i)
			}
			var n uint64
			switch lenBytes {
			case 1:
				n = uint64(b[i])
			case 2:
				n = uint64(binary.BigEndian.Uint16(b[i:]))
			case 4:
				n = uint64(binary.BigEndian.Uint32(b[i:]))
			}
			i += lenBytes
			switch c {
			case 0xdc, 0xdd:
				children = n
			case 0xde, 0xdf:
				children = 2 * n
			default:
				skip += n
			}
		}
		if skip > uint64(len(b)-i) {
			return fmt.Errorf("%w: truncated value at byte %d", ErrMalformed, i)
		}
		i += int(skip)
		// len(pending) is the depth of the value just read if it is a
		// container (the top-level one is at depth 1), empty or not.
		if isContainer(c) && len(pending) > MaxDepth {
			return fmt.Errorf("%w: nested deeper than %d", ErrMalformed, MaxDepth)
		}
		if children > 0 {
			if children > uint64(len(b)-i) { // every value takes at least one byte
				return fmt.Errorf("%w: declared %d values with %d bytes left", ErrMalformed, children, len(b)-i)
			}
			pending = append(pending, children)
		}
	}
	if i != len(b) {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(b)-i)
	}
	return nil
}
