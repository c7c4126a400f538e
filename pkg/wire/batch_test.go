package wire

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestChunkBatchEncodesOneEvent(t *testing.T) {
	// 15 and 16 chunks cross from msgpack's one-byte array header to the
	// three-byte one (TestArrayHeader checks the five-byte one: so many
	// chunks do not fit in a message).
	for _, n := range []int{1, 2, 15, 16, 3000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			want := make([]Chunk, n)
			var b ChunkBatch
			size := 0
			for i := range want {
				want[i] = Chunk{Type: ChunkText, Content: strconv.Itoa(i), IsDelta: true}
				if n <= 16 {
					want[i] = sampleChunks()[i%len(sampleChunks())]
				}
				s := b.Size()
				added, err := b.Add(&want[i], 1<<20)
				if err != nil || !added {
					t.Fatal(added, err)
				}
				size += b.Size() - s
			}
			if b.Len() != n || b.Size() != size {
				t.Fatalf("len %d size %d, want %d and %d", b.Len(), b.Size(), n, size)
			}
			raw, err := b.Encode("run-1", 7, 42)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := Decode[Event](raw)
			if err != nil {
				t.Fatal(err)
			}
			if wantV := map[bool]int{true: Version, false: BatchVersion}[n == 1]; ev.V != wantV {
				t.Fatalf("%d chunks: v=%d, want %d", n, ev.V, wantV)
			}
			var got []Event
			for e := range ev.Expand() {
				got = append(got, e)
			}
			if len(got) != n {
				t.Fatalf("expands to %d events, want %d", len(got), n)
			}
			for i, e := range got {
				if e.Kind != KindChunk || e.Seq != 7+uint64(i) || e.TS != 42 || e.RunID != "run-1" || e.V != VersionOf(&e) || !reflect.DeepEqual(*e.Chunk, want[i]) {
					t.Fatalf("event %d = %+v (chunk %+v), want chunk seq %d of %+v", i, e, e.Chunk, 7+i, want[i])
				}
			}
			wantKind, wantLast := KindChunks, uint64(7+n-1)
			if n == 1 {
				wantKind = KindChunk
			}
			if ev.Kind != wantKind || ev.LastSeq() != wantLast {
				t.Errorf("kind %s last seq %d, want %s and %d", ev.Kind, ev.LastSeq(), wantKind, wantLast)
			}
		})
	}
}

func TestArrayHeader(t *testing.T) {
	for _, n := range []int{0, 1, 15, 16, 65535, 65536, 1 << 20} {
		dst := make([]byte, batchHeadroom)
		h := arrayHeader(dst, n)
		got, err := msgpack.NewDecoder(bytes.NewReader(dst[batchHeadroom-h:])).DecodeArrayLen()
		if err != nil || got != n {
			t.Errorf("header of %d: % x decodes to %d, %v", n, dst[batchHeadroom-h:], got, err)
		}
	}
}

func TestChunkBatchReset(t *testing.T) {
	var b ChunkBatch
	if _, err := b.Encode("r", 1, 0); err == nil {
		t.Fatal("encoding an empty batch: no error")
	}
	for _, s := range []string{"a", "b"} {
		if _, err := b.Add(&Chunk{Type: ChunkText, Content: s}, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	b.Reset()
	if b.Len() != 0 || b.Size() != 0 {
		t.Fatalf("after Reset: len %d size %d", b.Len(), b.Size())
	}
	if _, err := b.Add(&Chunk{Type: ChunkText, Content: "c"}, 1<<20); err != nil {
		t.Fatal(err)
	}
	raw, err := b.Encode("r", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := Decode[Event](raw)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != KindChunk || ev.Seq != 3 || ev.Chunk == nil || ev.Chunk.Content != "c" {
		t.Errorf("after Reset and one chunk: %+v", ev)
	}
	if _, err := b.Add(&Chunk{Type: ChunkText, ToolOutput: make(chan int)}, 1<<20); err == nil || b.Len() != 1 {
		t.Errorf("adding an unencodable chunk: %v, len %d; want an error and the batch unchanged", err, b.Len())
	}
}

func TestChunkBatchHoldsBackAChunkPastTheLimit(t *testing.T) {
	var b ChunkBatch
	big := Chunk{Type: ChunkText, Content: strings.Repeat("x", 100)}
	added, err := b.Add(&big, 10)
	if err != nil || !added || b.Len() != 1 {
		t.Fatalf("first chunk past the limit: added %v, %v, len %d; want it added alone", added, err, b.Len())
	}
	one := b.Size()
	next := Chunk{Type: ChunkText, Content: "next"}
	if added, err := b.Add(&next, one+5); err != nil || added || b.Len() != 1 || b.Size() != one {
		t.Fatalf("a chunk past the limit: added %v, %v, len %d size %d; want it held back", added, err, b.Len(), b.Size())
	}
	if _, err := b.Add(&next, 1<<20); err == nil {
		t.Fatal("adding with a chunk held back: no error")
	}
	raw, err := b.Encode("r", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := Decode[Event](raw); err != nil || ev.Kind != KindChunk || ev.Chunk.Content != big.Content {
		t.Fatalf("batch before the held chunk = %+v, %v; want the big chunk alone", ev, err)
	}
	b.Reset()
	raw, err = b.Encode("r", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := Decode[Event](raw); err != nil || b.Len() != 1 || ev.Kind != KindChunk || ev.Seq != 2 || ev.Chunk.Content != "next" {
		t.Fatalf("after Reset = %+v, %v (len %d); want the held chunk first", ev, err, b.Len())
	}
}

func TestExpandSingleEvent(t *testing.T) {
	for _, e := range append(sampleChunkEvents(), sampleStatusEvent()) {
		var got []Event
		for x := range e.Expand() {
			got = append(got, x)
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], e) || e.LastSeq() != e.Seq {
			t.Errorf("Expand of %s seq %d = %+v, want the event itself", e.Kind, e.Seq, got)
		}
	}
	// Breaking out of a batch's expansion stops it.
	b := sampleBatchEvents()[1]
	n := 0
	for range b.Expand() {
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("broke out after %d, want 2", n)
	}
}

func TestDecodeRefusesABadBatch(t *testing.T) {
	chunk := map[string]any{"type": "text", "content": "x"}
	status := map[string]any{"state": "running"}
	ev := func(kv ...any) map[string]any {
		m := map[string]any{"v": 1, "run_id": "r", "ts": 1}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name    string
		in      map[string]any
		wantErr error
	}{
		{name: "two chunks", in: ev("kind", "chunks", "seq", 3, "last", 4, "chunks", []any{chunk, chunk})},
		{name: "one chunk", in: ev("kind", "chunks", "seq", 3, "last", 3, "chunks", []any{chunk})},
		{name: "empty", in: ev("kind", "chunks", "seq", 3, "last", 2, "chunks", []any{}), wantErr: ErrMalformed},
		{name: "no chunks", in: ev("kind", "chunks", "seq", 3, "last", 3), wantErr: ErrMalformed},
		{name: "last before seq", in: ev("kind", "chunks", "seq", 3, "last", 1, "chunks", []any{chunk, chunk}), wantErr: ErrMalformed},
		{name: "too few chunks", in: ev("kind", "chunks", "seq", 3, "last", 5, "chunks", []any{chunk, chunk}), wantErr: ErrMalformed},
		{name: "too many chunks", in: ev("kind", "chunks", "seq", 3, "last", 3, "chunks", []any{chunk, chunk}), wantErr: ErrMalformed},
		{name: "seq 0", in: ev("kind", "chunks", "seq", 0, "last", 1, "chunks", []any{chunk, chunk}), wantErr: ErrMalformed},
		{name: "seq 0 to the last uint64", in: ev("kind", "chunks", "seq", 0, "last", uint64(1<<64-1), "chunks", []any{}), wantErr: ErrMalformed},
		{name: "with a status", in: ev("kind", "chunks", "seq", 3, "last", 3, "chunks", []any{chunk}, "status", status), wantErr: ErrMalformed},
		{name: "with a single chunk", in: ev("kind", "chunks", "seq", 3, "last", 3, "chunks", []any{chunk}, "chunk", chunk), wantErr: ErrMalformed},
		{name: "a status with chunks", in: ev("kind", "status", "seq", 3, "status", status, "chunks", []any{chunk}), wantErr: ErrMalformed},
		{name: "a chunk with last", in: ev("kind", "chunk", "seq", 3, "chunk", chunk, "last", 3), wantErr: ErrMalformed},
		{name: "a chunk with empty chunks", in: ev("kind", "chunk", "seq", 3, "chunk", chunk, "chunks", []any{}), wantErr: ErrMalformed},
		{name: "a bad chunk inside", in: ev("kind", "chunks", "seq", 3, "last", 4, "chunks", []any{chunk, map[string]any{"type": "text", "extra": 1}}), wantErr: ErrMalformed},
		{name: "two statuses", in: ev("kind", "statuses", "seq", 1, "last", 2, "statuses", []any{map[string]any{"state": "accepted"}, map[string]any{"state": "routed"}})},
		{name: "one status as statuses", in: ev("kind", "statuses", "seq", 1, "last", 1, "statuses", []any{status}), wantErr: ErrMalformed},
		{name: "statuses disagreeing with last", in: ev("kind", "statuses", "seq", 1, "last", 3, "statuses", []any{status, status}), wantErr: ErrMalformed},
		{name: "statuses at seq 0", in: ev("kind", "statuses", "seq", 0, "last", 1, "statuses", []any{status, status}), wantErr: ErrMalformed},
		{name: "a terminal status in statuses", in: ev("kind", "statuses", "seq", 1, "last", 2, "statuses", []any{status, map[string]any{"state": "succeeded"}}), wantErr: ErrMalformed},
		{name: "statuses with a status", in: ev("kind", "statuses", "seq", 1, "last", 2, "statuses", []any{status, status}, "status", status), wantErr: ErrMalformed},
		{name: "statuses with chunks", in: ev("kind", "statuses", "seq", 1, "last", 2, "statuses", []any{status, status}, "chunks", []any{chunk}), wantErr: ErrMalformed},
		{name: "a status with statuses", in: ev("kind", "status", "seq", 3, "status", status, "statuses", []any{status, status}), wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode[Event](mustMarshal(t, tt.in))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if n := uint64(len(got.Chunks) + len(got.Statuses)); got.LastSeq()-got.Seq+1 != n {
					t.Errorf("seqs %d to %d for %d items", got.Seq, got.LastSeq(), n)
				}
				var seqs []uint64
				for e := range got.Expand() {
					if e.Kind != KindChunk && e.Kind != KindStatus || (e.Chunk == nil) == (e.Status == nil) {
						t.Errorf("expanded to a %s event %+v", e.Kind, e)
					}
					seqs = append(seqs, e.Seq)
				}
				if uint64(len(seqs)) != got.LastSeq()-got.Seq+1 || seqs[0] != got.Seq || seqs[len(seqs)-1] != got.LastSeq() {
					t.Errorf("expanded to seqs %v, want %d to %d", seqs, got.Seq, got.LastSeq())
				}
				return
			}
			checkOneSentinel(t, err, tt.wantErr)
		})
	}
}

func ExampleEvent_Expand() {
	var b ChunkBatch
	for _, s := range []string{"Hel", "lo"} {
		if _, err := b.Add(&Chunk{Type: ChunkText, Content: s, IsDelta: true}, 64<<10); err != nil {
			panic(err)
		}
	}
	raw, err := b.Encode("run-1", 4, 1700000000000000000)
	if err != nil {
		panic(err)
	}
	ev, err := Decode[Event](raw)
	if err != nil {
		panic(err)
	}
	fmt.Println(ev.Kind, ev.Seq, ev.LastSeq())
	for e := range ev.Expand() {
		fmt.Println(e.Kind, e.Seq, e.Chunk.Content)
	}
	// Output:
	// chunks 4 5
	// chunk 4 Hel
	// chunk 5 lo
}
