package wire

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// edgeChunks are chunks at the encoder's edges: every string header size,
// every integer width on both sides of zero, empty and absent values.
func edgeChunks() []Chunk {
	var out []Chunk
	for _, n := range []int{0, 1, 31, 32, 255, 256, 65535, 65536} {
		s := strings.Repeat("x", n)
		out = append(out, Chunk{Type: ChunkText, Content: s}, Chunk{Type: ChunkToolUse, ToolName: s, ToolID: s},
			Chunk{Type: ChunkSystem, Metadata: Metadata{Provider: s, Model: s, SessionID: s, ProviderSessionID: s, Cost: s, StopReason: s}})
	}
	for _, n := range []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64} {
		turns := int(n)
		out = append(out, Chunk{Type: ChunkResult, Metadata: Metadata{
			Usage:    &Usage{InputTokens: n, OutputTokens: -n, CacheReadTokens: n, CacheWriteTokens: n / 2, ReasoningTokens: n / 3},
			NumTurns: &turns, DurationMS: &n, DurationAPIMS: &n, TotalCostUSD: ptr(float64(n) / 7),
		}})
	}
	zero := 0.0
	out = append(out,
		Chunk{},
		Chunk{Type: ChunkResult, Metadata: Metadata{Usage: &Usage{}, TotalCostUSD: &zero, NumTurns: ptr(0), DurationMS: ptr(int64(0))}},
		Chunk{Type: ChunkResult, Metadata: Metadata{TotalCostUSD: ptr(math.Inf(-1))}},
		Chunk{Type: ChunkSystem, Metadata: Metadata{Capabilities: &Capabilities{}}},
		Chunk{Type: ChunkToolUse, ToolInput: map[string]any{}},                                                // empty: left out
		Chunk{Type: ChunkToolResult, ToolOutput: ""},                                                          // present: a non-nil any
		Chunk{Type: ChunkToolResult, ToolOutput: []any{1, "a", nil, 2.5}},                                     // an array
		Chunk{Type: ChunkToolResult, ToolOutput: map[string]any{"b": 1, "a": map[string]any{"z": 1, "y": 2}}}, // sorted keys
		Chunk{Type: ChunkError, Content: "x", IsError: true, IsDelta: true, Metadata: Metadata{ErrorClass: ProviderError}},
	)
	return out
}

// randomChunk is a chunk with each field set or left empty at random.
func randomChunk(r *rand.Rand) Chunk {
	str := func() string {
		if r.IntN(3) == 0 {
			return ""
		}
		return strings.Repeat("é", r.IntN(200))
	}
	num := func() int64 { return r.Int64N(1<<40) - 1<<39 }
	var c Chunk
	c.Type = []ChunkType{ChunkSystem, ChunkThinking, ChunkText, ChunkToolUse, ChunkToolResult, ChunkResult, ChunkError}[r.IntN(7)]
	c.Content, c.ToolName, c.ToolID = str(), str(), str()
	if r.IntN(3) == 0 {
		c.ToolInput = map[string]any{"k": str(), "n": num(), "f": r.Float64()}
	}
	if r.IntN(3) == 0 {
		c.ToolOutput = str()
	}
	c.IsError, c.IsDelta = r.IntN(2) == 0, r.IntN(2) == 0
	m := &c.Metadata
	m.Provider, m.Model, m.SessionID, m.ProviderSessionID, m.Cost, m.StopReason = str(), str(), str(), str(), str(), str()
	m.ErrorClass = Class(str())
	if r.IntN(2) == 0 {
		m.Capabilities = &Capabilities{Transport: Transport(str()), Resumable: r.IntN(2) == 0, ResumeField: str()}
	}
	if r.IntN(2) == 0 {
		m.Usage = &Usage{InputTokens: num(), OutputTokens: num(), CacheReadTokens: num() * int64(r.IntN(2))}
	}
	if r.IntN(2) == 0 {
		m.TotalCostUSD = ptr(r.Float64())
	}
	if r.IntN(2) == 0 {
		m.NumTurns = ptr(int(num()))
	}
	if r.IntN(2) == 0 {
		m.DurationMS, m.DurationAPIMS = ptr(num()), ptr(num())
	}
	return c
}

// TestAppendChunkSameAsMarshal: the append encoder writes exactly
// Marshal's bytes, for the sample chunks, the edge cases and random ones.
func TestAppendChunkSameAsMarshal(t *testing.T) {
	chunks := append(sampleChunks(), edgeChunks()...)
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		chunks = append(chunks, randomChunk(r))
	}
	prefix := []byte("prefix")
	for i := range chunks {
		c := &chunks[i]
		want, err := Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendChunk(bytes.Clone(prefix), c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Fatalf("chunk %d %+v:\n append  % x\n marshal % x", i, c, got[len(prefix):], want)
		}
	}
}

func TestAppendChunkRefusesWhatMarshalRefuses(t *testing.T) {
	c := Chunk{Type: ChunkToolUse, ToolInput: map[string]any{"ch": make(chan int)}}
	if _, err := Marshal(&c); err == nil {
		t.Fatal("Marshal took a channel")
	}
	dst := []byte("kept")
	got, err := AppendChunk(dst, &c)
	if err == nil || string(got) != "kept" {
		t.Fatalf("AppendChunk = %q, %v; want the input back and an error", got, err)
	}
}

// TestChunkBatchEncodeSameAsMarshal: a batch's event is the bytes Marshal
// gives for the same Event, with one chunk, with 15 and 16 (the array
// header's two sizes), and with a run id and seqs of every integer width.
func TestChunkBatchEncodeSameAsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 15, 16, 100} {
		for _, first := range []uint64{1, 127, 128, 1 << 16, 1 << 33} {
			var b ChunkBatch
			chunks := make([]Chunk, n)
			for i := range chunks {
				chunks[i] = randomChunk(r)
				if added, err := b.Add(&chunks[i], MaxMessageSize); err != nil || !added {
					t.Fatal(added, err)
				}
			}
			runID, ts := strings.Repeat("r", 40), -r.Int64()
			got, err := b.Encode(runID, first, ts)
			if err != nil {
				t.Fatal(err)
			}
			ev := Event{V: Version, RunID: runID, Seq: first, TS: ts, Kind: KindChunks, Last: first + uint64(n) - 1, Chunks: chunks}
			if n == 1 {
				ev = Event{V: Version, RunID: runID, Seq: first, TS: ts, Kind: KindChunk, Chunk: &chunks[0]}
			}
			ev.V = VersionOf(&ev) // a batch is BatchVersion at least
			want, err := Marshal(&ev)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%d chunks from %d:\n encode  % x\n marshal % x", n, first, got, want)
			}
		}
	}
}

func BenchmarkChunkBatchAdd(b *testing.B) {
	c := Chunk{Type: ChunkText, Content: strings.Repeat("x", 64)}
	var batch ChunkBatch
	b.ReportAllocs()
	for b.Loop() {
		if batch.Size() > 60<<10 {
			batch.Reset()
		}
		if _, err := batch.Add(&c, 64<<10); err != nil {
			b.Fatal(err)
		}
	}
}

// sameAsReflective fails unless the fast path fast, where it takes b,
// reads what the reflective decoder reads; it reports whether it took b.
func sameAsReflective[T any](t *testing.T, b []byte, fast func([]byte, *T) bool) bool {
	t.Helper()
	if len(b) > MaxMessageSize || Scan(b) != nil {
		return false
	}
	var got T
	if !fast(b, &got) {
		return false
	}
	var slow T
	if err := decodeStrict(b, &slow); err != nil {
		t.Fatalf("the fast path took % x, which the reflective decoder refuses: %v", b, err)
	}
	if !reflect.DeepEqual(got, slow) {
		t.Fatalf("% x:\n fast       %+v\n reflective %+v", b, got, slow)
	}
	return true
}

// eventSameAsReflective is sameAsReflective for the chunk event fast path.
func eventSameAsReflective(t *testing.T, b []byte) bool {
	t.Helper()
	return sameAsReflective(t, b, decodeChunkEvent)
}

// TestDecodeChunkEventSameAsReflective: the fast path reads chunk and
// chunks events of text chunks (and takes them: it is not a path never
// taken), and whatever else it takes it reads as the reflective decoder
// does; what it leaves (statuses, tool input, usage) the reflective
// decoder reads.
func TestDecodeChunkEventSameAsReflective(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	chunks := append(sampleChunks(), edgeChunks()...)
	for range 500 {
		chunks = append(chunks, randomChunk(r))
	}
	taken := 0
	for i := range chunks {
		c := &chunks[i]
		one, err := Marshal(&Event{V: Version, RunID: "run-1", Seq: uint64(i + 1), TS: r.Int64() - r.Int64(), Kind: KindChunk, Chunk: c})
		if err != nil {
			t.Fatal(err)
		}
		if eventSameAsReflective(t, one) {
			taken++
		}
		if c.Metadata.Usage == nil && c.Metadata.Capabilities == nil && c.ToolInput == nil && c.ToolOutput == nil &&
			c.Metadata.TotalCostUSD == nil && c.Metadata.NumTurns == nil && c.Metadata.DurationMS == nil && c.Metadata.DurationAPIMS == nil &&
			!eventSameAsReflective(t, one) {
			t.Errorf("the fast path left a plain chunk event: %+v", c)
		}
	}
	if taken < 10 {
		t.Fatalf("the fast path took %d events", taken)
	}
	var b ChunkBatch
	text := Chunk{Type: ChunkText, Content: strings.Repeat("x", 64)}
	for range 300 {
		if _, err := b.Add(&text, MaxMessageSize); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := b.Encode("run-2", 1<<40, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !eventSameAsReflective(t, batch) {
		t.Fatal("the fast path left a batch of text chunks")
	}
	for _, msg := range sampleMessages(t) {
		eventSameAsReflective(t, msg)
	}
	st, err := Marshal(&Event{V: Version, RunID: "r", Seq: 1, Kind: KindStatus, Status: &Status{State: StateRunning}})
	if err != nil {
		t.Fatal(err)
	}
	if eventSameAsReflective(t, st) {
		t.Fatal("the fast path took a status event")
	}
	// Hand-made variants: a repeated field, an unknown one, nil, a signed
	// seq, a bin string, map16 headers.
	for _, raw := range [][]byte{
		{0x82, 0xa1, 'v', 0x01, 0xa1, 'v', 0x01},
		{0x81, 0xa1, 'x', 0x01},
		{0x81, 0xa6, 'r', 'u', 'n', '_', 'i', 'd', 0xc0},
		{0x81, 0xa3, 's', 'e', 'q', 0xd0, 0x05},
		{0x81, 0xa6, 'r', 'u', 'n', '_', 'i', 'd', 0xc4, 0x01, 'r'},
		{0xde, 0x00, 0x01, 0xa2, 't', 's', 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0},
		{0x81, 0xa2, 't', 's', 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0},
		{0x81, 0xa5, 'c', 'h', 'u', 'n', 'k', 0x81, 0xa8, 'm', 'e', 't', 'a', 'd', 'a', 't', 'a', 0x80},
	} {
		eventSameAsReflective(t, raw)
	}
}
