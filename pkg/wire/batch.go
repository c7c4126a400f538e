package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ChunkBatch collects consecutive chunks of a run, encoding each as it is
// added, into the message of one event: a KindChunk event when it holds
// one chunk, a KindChunks event when it holds more. The zero value is an
// empty batch. It is not safe for concurrent use.
type ChunkBatch struct {
	// buf is batchHeadroom bytes kept for the array header, the batch's
	// chunks' encodings one after the other, then the held chunk's.
	buf  []byte
	end  int // where the batch's chunks end in buf; the held chunk, if any, follows
	n    int
	held bool
	// v is the newest contract version a chunk of the batch's type needs
	// (ChunkType.Version), heldV the held chunk's.
	v, heldV int
}

// batchHeadroom is the longest msgpack array header: 0xdd and 4 bytes.
const batchHeadroom = 5

// Add encodes c and appends it to the batch, unless the batch already
// holds chunks and c would take their encoded size past limit bytes: then
// the batch holds c back (added is false) for the next batch, and Reset
// makes it that batch's first chunk. A batch holds back one chunk at most:
// Add with one held back is an error. On error the batch is unchanged.
func (b *ChunkBatch) Add(c *Chunk, limit int) (added bool, err error) {
	if b.held {
		return false, errors.New("add chunk: the batch already holds one back; Reset it first")
	}
	if len(b.buf) == 0 {
		b.buf = append(b.buf[:0], make([]byte, batchHeadroom)...)
		b.end = batchHeadroom
	}
	grown, err := AppendChunk(b.buf, c)
	if err != nil {
		return false, fmt.Errorf("encode chunk: %w", err)
	}
	size := len(grown) - len(b.buf)
	b.buf = grown
	if b.n > 0 && b.Size()+size > limit {
		b.held, b.heldV = true, c.Type.Version()
		return false, nil
	}
	b.end, b.n, b.v = len(b.buf), b.n+1, max(b.v, c.Type.Version())
	return true, nil
}

// Len is the number of chunks in the batch, not counting one held back.
func (b *ChunkBatch) Len() int { return b.n }

// Size is the encoded size of the batch's chunks in bytes, not counting
// one held back.
func (b *ChunkBatch) Size() int { return max(b.end-batchHeadroom, 0) }

// Reset empties the batch, keeping its buffer; a chunk held back by Add
// becomes its first chunk.
func (b *ChunkBatch) Reset() {
	if !b.held {
		b.buf, b.end, b.n, b.v = b.buf[:0], 0, 0, 0
		return
	}
	b.v, b.heldV = b.heldV, 0
	k := copy(b.buf[batchHeadroom:], b.buf[b.end:])
	b.buf = b.buf[:batchHeadroom+k]
	b.end, b.n, b.held = len(b.buf), 1, false
}

// Encode returns the encoded event of run runID that holds the batch's
// chunks as seqs first onward, stamped ts: a KindChunk event for a batch
// of one chunk, a KindChunks event with Last first+Len()-1 for more. It
// does not empty the batch and leaves out a chunk held back. Encoding an
// empty batch is an error, as is one larger than MaxMessageSize
// (ErrTooLarge). The bytes are Marshal's for the same Event, stamped
// VersionOf's version: a KindChunks event BatchVersion at least.
func (b *ChunkBatch) Encode(runID string, first uint64, ts int64) ([]byte, error) {
	switch {
	case b.n == 0:
		return nil, fmt.Errorf("encode chunks of %s: the batch is empty", runID)
	case first == 0:
		return nil, fmt.Errorf("encode chunks of %s: seq 0", runID)
	}
	var out []byte
	// v, run_id, seq, ts, kind and the chunk or chunks; at most 64 bytes
	// of field names and numbers besides the run id and the chunks.
	room := 64 + len(runID) + b.end - batchHeadroom
	if b.n == 1 {
		out = appendEventHead(make([]byte, 0, room), 6, max(b.v, Version), runID, first, ts, KindChunk)
		out = append(appendStr(out, "chunk"), b.buf[batchHeadroom:b.end]...)
	} else {
		h := arrayHeader(b.buf[:batchHeadroom], b.n)
		out = appendEventHead(make([]byte, 0, room+h), 7, max(b.v, BatchVersion), runID, first, ts, KindChunks)
		out = appendUint(appendStr(out, "last"), first+uint64(b.n)-1)
		out = append(appendStr(out, "chunks"), b.buf[batchHeadroom-h:b.end]...)
	}
	if len(out) > MaxMessageSize {
		return nil, fmt.Errorf("encode chunks of %s: %w: %d bytes", runID, ErrTooLarge, len(out))
	}
	return out, nil
}

// arrayHeader writes the msgpack header of an array of n values at the
// end of dst (which has room for the longest) and returns its length.
func arrayHeader(dst []byte, n int) int {
	switch {
	case n < 16:
		dst[len(dst)-1] = 0x90 | byte(n)
		return 1
	case n <= 0xffff:
		dst[len(dst)-3] = 0xdc
		binary.BigEndian.PutUint16(dst[len(dst)-2:], uint16(n))
		return 3
	default:
		dst[len(dst)-5] = 0xdd
		binary.BigEndian.PutUint32(dst[len(dst)-4:], uint32(n))
		return 5
	}
}
