package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// The sample messages below are fully populated so that a round trip
// exercises every field. Values inside map[string]any and any fields are
// strings, bools, float64s, nested maps and slices only: msgpack decodes a
// small integer into an int8, which would not compare equal to an int.

func ptr[T any](v T) *T { return &v }

func samplePin() Pin {
	return Pin{
		Provider:        "fixture",
		Model:           "fixture-1",
		ProfileHash:     "sha256:0f1e",
		RegistryVersion: "fixture@sha256:aa11",
		Pricing:         map[string]string{"input": "0.000003", "output": "0.000015"},
	}
}

func sampleUsage() *Usage {
	return &Usage{InputTokens: 12, OutputTokens: 340, CacheReadTokens: 5, CacheWriteTokens: 6, ReasoningTokens: 70000}
}

func sampleError() *Error {
	return &Error{Class: ProviderProcessError, Message: "exit status 3", Retryable: true, ReturnCode: ptr(3), StderrTail: "boom\n"}
}

func sampleChunks() []Chunk {
	return []Chunk{
		{Type: ChunkSystem, Metadata: Metadata{
			Provider: "fixture", Model: "fixture-1", SessionID: "sess-1", ProviderSessionID: "psess-1",
			Capabilities: &Capabilities{Transport: TransportInProcess, Resumable: true, EmitsToolEvents: true, ReportsUsage: true, ResumeField: "resume"},
		}},
		{Type: ChunkThinking, Content: "hmm", IsDelta: true},
		{Type: ChunkText, Content: "héllo ✓", IsDelta: true},
		{Type: ChunkToolUse, ToolName: "echo", ToolID: "toolu_1", ToolInput: map[string]any{
			"text": "hi", "flag": true, "ratio": 0.5, "nested": map[string]any{"list": []any{"a", "b"}},
		}},
		{Type: ChunkToolResult, ToolID: "toolu_1", ToolOutput: map[string]any{"out": "hi"}, IsError: true},
		{Type: ChunkToolResult, ToolID: "toolu_2", ToolOutput: "plain text"},
		{Type: ChunkResult, Content: "done", Metadata: Metadata{
			Usage: sampleUsage(), TotalCostUSD: ptr(0.0125), Cost: "0.012500", NumTurns: ptr(2),
			DurationMS: ptr(int64(1500)), DurationAPIMS: ptr(int64(1200)), StopReason: "end_turn",
		}},
		{Type: ChunkError, Content: "quota exceeded", IsError: true, Metadata: Metadata{ErrorClass: ProviderQuotaError}},
	}
}

func sampleRunRequest() RunRequest {
	req, err := msgpack.Marshal(map[string]any{"prompt": "hello", "delay_ms": 5})
	if err != nil {
		panic(err)
	}
	return RunRequest{
		V: Version, RunID: "run-1", Tenant: "acme", Principal: "alice", Profile: "fixture/fixture-1",
		Request:      req,
		Runtime:      map[string]any{"workspace": "/srv/ws", "env": map[string]any{"A": "b"}},
		Conversation: "conv-1", DeadlineMS: 60000,
		Labels: map[string]string{"team": "infra"},
	}
}

func sampleWork() Work {
	rr := sampleRunRequest()
	return Work{
		V: Version, RunID: rr.RunID, Tenant: rr.Tenant, Principal: rr.Principal, Adapter: "fixture",
		Request: rr.Request, Runtime: rr.Runtime, Pin: samplePin(), Conversation: rr.Conversation,
		SessionID: "sess-1", Deadline: 1700000000000, Policy: AttemptPolicy{MaxAttempts: DefaultMaxAttempts},
	}
}

func sampleStatusEvent() Event {
	pin := samplePin()
	return Event{V: Version, RunID: "run-1", Seq: 9, TS: 1700000000123456789, Kind: KindStatus, Status: &Status{
		State: StateFailed, Pin: &pin, Error: sampleError(), Attempt: 2,
		Summary: &Summary{Chunks: 7, Usage: sampleUsage(), Cost: "0.01", TotalCostUSD: ptr(0.01), DurationMS: 2500},
	}}
}

func sampleChunkEvents() []Event {
	var out []Event
	for i, c := range sampleChunks() {
		out = append(out, Event{V: Version, RunID: "run-1", Seq: uint64(i + 1), TS: int64(i), Kind: KindChunk, Chunk: &c})
	}
	return out
}

// sampleBatchEvents are chunks events: two chunks, and every sample chunk.
func sampleBatchEvents() []Event {
	cs := sampleChunks()
	return []Event{
		{V: BatchVersion, RunID: "run-1", Seq: 4, TS: 1700000000123456789, Kind: KindChunks, Last: 5, Chunks: cs[2:4]},
		{V: BatchVersion, RunID: "run-1", Seq: 2, TS: 1700000000123456789, Kind: KindChunks, Last: uint64(len(cs)) + 1, Chunks: cs},
	}
}

func sampleRunRecord() RunRecord {
	pin := samplePin()
	return RunRecord{
		V: Version, RunID: "run-1", Tenant: "acme", Principal: "alice", Profile: "fixture", Adapter: "fixture",
		Conversation: "conv-1", RequestDigest: "sha256:beef", Pin: &pin, State: StateRunning, Owner: "runner-a",
		Committed: true, Attempt: 1, Deadline: 1700000060000, Consent: true, ConsentRev: 7,
		Request: sampleRunRequest().Request, Labels: map[string]string{"team": "infra"}, Error: sampleError(),
		Created: 1700000000000, Updated: 1700000001000,
	}
}

func sampleLease() Lease {
	return Lease{V: Version, RunID: "run-1", Tenant: "acme", Owner: "runner-a"}
}

func sampleCancelReply() CancelReply {
	return CancelReply{V: Version, RunID: "run-1", State: StateCancelled, Cancelled: true, Ended: false,
		Error: &Error{Class: AgenticOperationUnsupported, Message: "no"}}
}

// sampleMessages returns a valid encoding of every message type, by name.
func sampleMessages(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	add := func(name string, v any) {
		b, err := Marshal(v)
		if err != nil {
			t.Fatalf("Marshal(%s): %v", name, err)
		}
		out[name] = b
	}
	add("runrequest", sampleRunRequest())
	add("runrequest-minimal", RunRequest{V: Version, RunID: "r", Tenant: "t"})
	add("work", sampleWork())
	add("event-status", sampleStatusEvent())
	for _, e := range sampleChunkEvents() {
		add(fmt.Sprintf("event-chunk-%d-%s", e.Seq, e.Chunk.Type), e)
	}
	for _, e := range sampleBatchEvents() {
		add(fmt.Sprintf("event-chunks-%d-%d", e.Seq, e.Last), e)
	}
	add("runrecord", sampleRunRecord())
	add("lease", sampleLease())
	add("cancelreply", sampleCancelReply())
	return out
}

func roundTrip[T Versioned](t *testing.T, in T) {
	t.Helper()
	b, err := Marshal(in)
	if err != nil {
		t.Fatalf("Marshal(%T): %v", in, err)
	}
	got, err := Decode[T](b)
	if err != nil {
		t.Fatalf("Decode[%T]: %v", in, err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Errorf("round trip of %T:\n got %#v\nwant %#v", in, got, in)
	}
	// Encoding is deterministic for the same value.
	again, err := Marshal(got)
	if err != nil {
		t.Fatalf("re-Marshal(%T): %v", in, err)
	}
	if len(again) != len(b) {
		t.Errorf("re-encoding %T: %d bytes, first encoding %d", in, len(again), len(b))
	}
}

func TestRoundTrip(t *testing.T) {
	t.Run("RunRequest", func(t *testing.T) { roundTrip(t, sampleRunRequest()) })
	t.Run("RunRequest/minimal", func(t *testing.T) { roundTrip(t, RunRequest{V: Version, RunID: "r"}) })
	t.Run("Work", func(t *testing.T) { roundTrip(t, sampleWork()) })
	t.Run("Event/status", func(t *testing.T) { roundTrip(t, sampleStatusEvent()) })
	for _, e := range sampleChunkEvents() {
		t.Run("Event/chunk/"+string(e.Chunk.Type), func(t *testing.T) { roundTrip(t, e) })
	}
	for _, e := range sampleBatchEvents() {
		t.Run(fmt.Sprintf("Event/chunks/%d-%d", e.Seq, e.Last), func(t *testing.T) { roundTrip(t, e) })
	}
	t.Run("RunRecord", func(t *testing.T) { roundTrip(t, sampleRunRecord()) })
	t.Run("Lease", func(t *testing.T) { roundTrip(t, sampleLease()) })
	t.Run("CancelReply", func(t *testing.T) { roundTrip(t, sampleCancelReply()) })
	t.Run("Consent", func(t *testing.T) {
		roundTrip(t, Consent{V: Version, Tenant: "acme", Principal: "alice", Granted: true, WithdrawnRev: 4, Updated: 1700000000000})
	})
	t.Run("ExportRecord", func(t *testing.T) {
		roundTrip(t, ExportRecord{V: Version, Tenant: "acme", RunID: "run-1", Principal: "alice", Object: "acme/run-1/ab.json",
			SHA256: "ab", Size: 10, Stored: true, ConsentRev: 3, Created: 1700000000000, Expires: 1700000060000})
	})
	t.Run("RedactionRules", func(t *testing.T) {
		roundTrip(t, RedactionRules{V: Version, Tenant: "acme", Rules: []RedactionRule{{Name: "ticket", Pattern: "TKT-[0-9]{6}"}}, Updated: 1})
	})
}

func TestDecodeStrictRoundTrip(t *testing.T) {
	// The unversioned pieces decode with DecodeStrict.
	for _, c := range sampleChunks() {
		b, err := Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var got Chunk
		if err := DecodeStrict(b, &got); err != nil {
			t.Fatalf("DecodeStrict(%s chunk): %v", c.Type, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("chunk round trip:\n got %#v\nwant %#v", got, c)
		}
	}
	b, err := Marshal(sampleError())
	if err != nil {
		t.Fatal(err)
	}
	var got Error
	if err := DecodeStrict(b, &got); err != nil {
		t.Fatal(err)
	}
	if want := sampleError(); !reflect.DeepEqual(&got, want) {
		t.Errorf("error round trip: got %#v, want %#v", got, want)
	}
}

func TestDecodeWireNames(t *testing.T) {
	// The keys on the wire are the snake_case names of docs/contract.md §3, with v.
	b, err := Marshal(sampleRunRequest())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := msgpack.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"v", "run_id", "tenant", "principal", "profile", "request", "runtime", "conversation", "deadline_ms", "labels"} {
		if _, ok := m[k]; !ok {
			t.Errorf("encoded RunRequest lacks key %q (has %v)", k, keys(m))
		}
	}
	if len(m) != 10 {
		t.Errorf("encoded RunRequest has %d keys, want 10: %v", len(m), keys(m))
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// mustMarshal encodes v with the plain msgpack encoder, to build messages
// that Marshal's typed values cannot express.
func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkOneSentinel fails unless err matches exactly one decoding sentinel,
// and that one is want.
func checkOneSentinel(t testing.TB, err, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want %v", want)
	}
	n := 0
	for _, s := range []error{ErrMalformed, ErrTooLarge, ErrVersion} {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 || !errors.Is(err, want) {
		t.Fatalf("got error %v, want exactly %v", err, want)
	}
}

func header(code byte, n uint32, size int) []byte {
	b := []byte{code}
	switch size {
	case 1:
		return append(b, byte(n))
	case 2:
		return binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		return binary.BigEndian.AppendUint32(b, n)
	}
}

// withField appends one more key/value pair to a valid fixmap-encoded map.
func withField(t testing.TB, msg []byte, key string, rawValue []byte) []byte {
	t.Helper()
	if msg[0]&0xf0 != 0x80 || msg[0]&0x0f == 0x0f {
		t.Fatalf("withField needs a fixmap with room, got 0x%02x", msg[0])
	}
	out := []byte{msg[0] + 1}
	out = append(out, msg[1:]...)
	out = append(out, mustMarshal(t, key)...)
	return append(out, rawValue...)
}

func TestDecodeErrors(t *testing.T) {
	lease := mustMarshal(t, map[string]any{"v": 1, "run_id": "r", "tenant": "t", "owner": "o"})
	huge := uint32(1<<32 - 1)
	tests := []struct {
		name    string
		in      []byte
		wantErr error
	}{
		{name: "nil", in: nil, wantErr: ErrMalformed},
		{name: "garbage text", in: []byte("hello, world"), wantErr: ErrMalformed},
		{name: "reserved byte", in: []byte{0xc1}, wantErr: ErrMalformed},
		{name: "json", in: []byte(`{"v":1,"run_id":"r"}`), wantErr: ErrMalformed},
		{name: "top level array", in: mustMarshal(t, []any{1, "r"}), wantErr: ErrMalformed},
		{name: "top level string", in: mustMarshal(t, "lease"), wantErr: ErrMalformed},
		{name: "top level nil", in: []byte{0xc0}, wantErr: ErrMalformed},
		{name: "trailing byte", in: append(bytes.Clone(lease), 0xc0), wantErr: ErrMalformed},
		{name: "two messages", in: append(bytes.Clone(lease), lease...), wantErr: ErrMalformed},
		{name: "oversized", in: oversized(), wantErr: ErrTooLarge},
		{name: "map32 claims 2^32-1 pairs", in: append(header(0xdf, huge, 4), 0xa1, 'v', 0x01), wantErr: ErrMalformed},
		{name: "map16 claims 65535 pairs", in: append(header(0xde, 0xffff, 2), 0xa1, 'v', 0x01), wantErr: ErrMalformed},
		{name: "array32 value claims 2^32-1", in: withField(t, lease, "x", append(header(0xdd, huge, 4), 1, 2, 3)), wantErr: ErrMalformed},
		{name: "str32 value claims 2^32-1", in: withField(t, mustMarshal(t, map[string]any{"v": 1}), "run_id", append(header(0xdb, huge, 4), 'a', 'b')), wantErr: ErrMalformed},
		{name: "str32 key claims 2^32-1", in: append([]byte{0x81}, append(header(0xdb, huge, 4), 'v', 1)...), wantErr: ErrMalformed},
		{name: "bin32 claims 2^32-1", in: withField(t, lease, "x", append(header(0xc6, huge, 4), 0)), wantErr: ErrMalformed},
		{name: "ext32 claims 2^32-1", in: withField(t, lease, "x", append(header(0xc9, huge, 4), 1, 0)), wantErr: ErrMalformed},
		{name: "str8 truncated", in: withField(t, lease, "x", []byte{0xd9, 10, 'a'}), wantErr: ErrMalformed},
		{name: "length header truncated", in: []byte{0x81, 0xa1, 'v', 0xdb, 0x00}, wantErr: ErrMalformed},
		{name: "version 4", in: mustMarshal(t, map[string]any{"v": 4, "run_id": "r", "tenant": "t", "owner": "o"}), wantErr: ErrVersion},
		{name: "version missing", in: mustMarshal(t, map[string]any{"run_id": "r", "tenant": "t", "owner": "o"}), wantErr: ErrVersion},
		{name: "version 0", in: mustMarshal(t, map[string]any{"v": 0}), wantErr: ErrVersion},
		{name: "unknown field", in: withField(t, lease, "color", mustMarshal(t, "red")), wantErr: ErrMalformed},
		{name: "wrong type", in: mustMarshal(t, map[string]any{"v": 1, "run_id": 7}), wantErr: ErrMalformed},
		{name: "version wrong type", in: mustMarshal(t, map[string]any{"v": "1"}), wantErr: ErrMalformed},
		{name: "non-string key", in: []byte{0x81, 0x01, 0x01}, wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode[Lease](tt.in)
			checkOneSentinel(t, err, tt.wantErr)
		})
	}
}

func oversized() []byte {
	b := make([]byte, MaxMessageSize+1)
	b[0] = 0x81
	return b
}

func TestDecodeNestedErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]any
		decode  func([]byte) error
		wantErr error
	}{
		{
			name: "unknown metadata key in chunk",
			in: map[string]any{"v": 1, "run_id": "r", "seq": 1, "ts": 1, "kind": "chunk", "chunk": map[string]any{
				"type": "system", "is_error": false, "is_delta": false,
				"metadata": map[string]any{"provider": "x", "raw_event": map[string]any{"type": "message_start"}},
			}},
			decode:  func(b []byte) error { _, err := Decode[Event](b); return err },
			wantErr: ErrMalformed,
		},
		{
			name: "unknown chunk field",
			in: map[string]any{"v": 1, "run_id": "r", "kind": "chunk", "chunk": map[string]any{
				"type": "text", "content": "hi", "vendor_event": "x",
			}},
			decode:  func(b []byte) error { _, err := Decode[Event](b); return err },
			wantErr: ErrMalformed,
		},
		{
			name: "unknown usage field",
			in: map[string]any{"v": 1, "run_id": "r", "kind": "status", "status": map[string]any{
				"state": "succeeded", "summary": map[string]any{"chunks": 1, "usage": map[string]any{"input_tokens": 1, "bonus": 2}},
			}},
			decode:  func(b []byte) error { _, err := Decode[Event](b); return err },
			wantErr: ErrMalformed,
		},
		{
			name: "unknown error field",
			in: map[string]any{"v": 1, "run_id": "r", "error": map[string]any{
				"class": "ProviderError", "message": "m", "traceback": "...",
			}},
			decode:  func(b []byte) error { _, err := Decode[CancelReply](b); return err },
			wantErr: ErrMalformed,
		},
		{
			name:    "unknown pin field in work",
			in:      map[string]any{"v": 1, "run_id": "r", "pin": map[string]any{"provider": "p", "api_key": "k"}},
			decode:  func(b []byte) error { _, err := Decode[Work](b); return err },
			wantErr: ErrMalformed,
		},
		{
			name:    "chunk version missing",
			in:      map[string]any{"run_id": "r", "kind": "chunk", "chunk": map[string]any{"type": "text"}},
			decode:  func(b []byte) error { _, err := Decode[Event](b); return err },
			wantErr: ErrVersion,
		},
		{
			name:    "labels with a non-string value",
			in:      map[string]any{"v": 1, "run_id": "r", "labels": map[string]any{"a": []any{"b"}}},
			decode:  func(b []byte) error { _, err := Decode[RunRequest](b); return err },
			wantErr: ErrMalformed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkOneSentinel(t, tt.decode(mustMarshal(t, tt.in)), tt.wantErr)
		})
	}
}

// withRuntime is a RunRequest of v 1 and run_id "r" encoded by hand, with
// runtime (its encoding) as its runtime field.
func withRuntime(t *testing.T, runtime ...byte) []byte {
	t.Helper()
	in := []byte{0x83}
	in = append(in, mustMarshal(t, "v")...)
	in = append(in, 0x01)
	in = append(in, mustMarshal(t, "run_id")...)
	in = append(in, mustMarshal(t, "r")...)
	in = append(in, mustMarshal(t, "runtime")...)
	return append(in, runtime...)
}

func TestDecodeNonStringKeyInRuntime(t *testing.T) {
	// runtime = {"a": {1: 2}}: nested maps must have string keys, so that
	// every decoded value can be re-encoded as JSON.
	_, err := Decode[RunRequest](withRuntime(t, 0x81, 0xa1, 'a', 0x81, 0x01, 0x02))
	checkOneSentinel(t, err, ErrMalformed)
}

func TestDecodeTruncated(t *testing.T) {
	for name, msg := range sampleMessages(t) {
		t.Run(name, func(t *testing.T) {
			for i := range len(msg) {
				prefix := msg[:i]
				var err error
				switch {
				case strings.HasPrefix(name, "runrequest"):
					_, err = Decode[RunRequest](prefix)
				case name == "work":
					_, err = Decode[Work](prefix)
				case strings.HasPrefix(name, "event"):
					_, err = Decode[Event](prefix)
				case name == "runrecord":
					_, err = Decode[RunRecord](prefix)
				case name == "lease":
					_, err = Decode[Lease](prefix)
				case name == "cancelreply":
					_, err = Decode[CancelReply](prefix)
				default:
					t.Fatalf("no decoder for sample %q", name)
				}
				if err == nil || !errors.Is(err, ErrMalformed) {
					t.Fatalf("prefix of %d/%d bytes: got %v, want ErrMalformed", i, len(msg), err)
				}
				if err := Scan(prefix); !errors.Is(err, ErrMalformed) {
					t.Fatalf("Scan(prefix of %d/%d bytes): got %v, want ErrMalformed", i, len(msg), err)
				}
			}
		})
	}
}

// nested returns depth arrays each holding the next, the innermost holding
// inner (a single encoded value), or empty when inner is nil.
func nested(depth int, inner []byte) []byte {
	b := bytes.Repeat([]byte{0x91}, depth)
	if inner == nil {
		b[depth-1] = 0x90
		return b
	}
	return append(b, inner...)
}

func TestScanDepth(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		wantErr error
	}{
		{name: "MaxDepth arrays", in: nested(MaxDepth, []byte{0xc0})},
		{name: "MaxDepth arrays, innermost empty", in: nested(MaxDepth, nil)},
		{name: "MaxDepth+1 arrays", in: nested(MaxDepth+1, []byte{0xc0}), wantErr: ErrMalformed},
		{name: "MaxDepth+1 arrays, innermost empty", in: nested(MaxDepth+1, nil), wantErr: ErrMalformed},
		{name: "MaxDepth+1 maps, innermost empty", in: append(bytes.Repeat([]byte{0x81, 0xa1, 'k'}, MaxDepth), 0x80), wantErr: ErrMalformed},
		{name: "MaxDepth maps", in: append(bytes.Repeat([]byte{0x81, 0xa1, 'k'}, MaxDepth), 0x01)},
		{name: "very deep", in: nested(100000, []byte{0xc0}), wantErr: ErrMalformed},
		{name: "wide is fine", in: append(header(0xdc, 1000, 2), bytes.Repeat([]byte{0x90}, 1000)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Scan(tt.in)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Scan: got %v, want nil", err)
				}
				return
			}
			checkOneSentinel(t, err, tt.wantErr)
		})
	}
}

func TestDecodeDepth(t *testing.T) {
	// runtime is at depth 2 (the message itself is depth 1), so a value
	// nested d-2 arrays deep inside it makes the message d deep.
	build := func(depth int) []byte {
		return withRuntime(t, append([]byte{0x81, 0xa1, 'k'}, nested(depth-2, []byte{0xa1, 'x'})...)...)
	}
	got, err := Decode[RunRequest](build(MaxDepth))
	if err != nil {
		t.Fatalf("Decode at MaxDepth: %v", err)
	}
	if _, err := Marshal(got); err != nil {
		t.Fatalf("re-Marshal at MaxDepth: %v", err)
	}
	_, err = Decode[RunRequest](build(MaxDepth + 1))
	checkOneSentinel(t, err, ErrMalformed)
}

func TestScanValid(t *testing.T) {
	// Every msgpack type Scan knows, each as one complete value.
	vals := []any{
		nil, true, false, 0, -1, 127, 128, -33, 1 << 20, -(1 << 40), uint64(1 << 63), float32(1.5), 2.5,
		"", strings.Repeat("s", 31), strings.Repeat("s", 200), strings.Repeat("s", 70000),
		[]byte{}, bytes.Repeat([]byte{1}, 300), bytes.Repeat([]byte{1}, 70000),
		[]any{}, make([]any, 20), map[string]any{}, map[string]any{"a": map[string]any{"b": []any{1, "c"}}},
	}
	for _, v := range vals {
		b := mustMarshal(t, v)
		if err := Scan(b); err != nil {
			t.Errorf("Scan(%T %.20v): %v", v, v, err)
		}
	}
	// Ext types: fixext 1..16, ext8/16/32.
	for _, b := range [][]byte{
		{0xd4, 1, 0}, {0xd5, 1, 0, 0}, {0xd6, 1, 0, 0, 0, 0}, append([]byte{0xd7, 1}, make([]byte, 8)...),
		append([]byte{0xd8, 1}, make([]byte, 16)...), {0xc7, 2, 1, 0, 0}, {0xc8, 0, 1, 1, 0}, {0xc9, 0, 0, 0, 1, 1, 0},
	} {
		if err := Scan(b); err != nil {
			t.Errorf("Scan(% x): %v", b, err)
		}
		if err := Scan(b[:len(b)-1]); !errors.Is(err, ErrMalformed) {
			t.Errorf("Scan(% x): got %v, want ErrMalformed", b[:len(b)-1], err)
		}
	}
}

func TestMarshalTooLarge(t *testing.T) {
	c := Chunk{Type: ChunkText, Content: strings.Repeat("x", MaxMessageSize)}
	_, err := Marshal(Event{V: Version, RunID: "r", Kind: KindChunk, Chunk: &c})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Marshal of an oversized event: got %v, want ErrTooLarge", err)
	}
}

func TestMarshalConcurrent(t *testing.T) {
	// Marshal pools its encoders; concurrent use must not mix buffers. (Map
	// keys are encoded in Go's map order, so compare decoded values.)
	want := sampleStatusEvent()
	done := make(chan error, 8)
	for range 8 {
		go func() {
			for range 200 {
				b, err := Marshal(sampleStatusEvent())
				if err != nil {
					done <- err
					return
				}
				got, err := Decode[Event](b)
				if err == nil && !reflect.DeepEqual(got, want) {
					err = errors.New("decoded event differs")
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestEventTerminal(t *testing.T) {
	tests := []struct {
		name string
		in   Event
		want bool
	}{
		{name: "failed status", in: sampleStatusEvent(), want: true},
		{name: "running status", in: Event{Kind: KindStatus, Status: &Status{State: StateRunning}}},
		{name: "status kind without status", in: Event{Kind: KindStatus}},
		{name: "chunk", in: sampleChunkEvents()[0]},
	}
	for _, tt := range tests {
		if got := tt.in.Terminal(); got != tt.want {
			t.Errorf("%s: Terminal() = %t, want %t", tt.name, got, tt.want)
		}
	}
}

func TestChunkTypeValid(t *testing.T) {
	for _, c := range []ChunkType{ChunkSystem, ChunkThinking, ChunkText, ChunkToolUse, ChunkToolResult, ChunkResult, ChunkError} {
		if !c.Valid() {
			t.Errorf("%q.Valid() = false", c)
		}
	}
	for _, c := range []ChunkType{"", "Text", "raw", "message_start"} {
		if c.Valid() {
			t.Errorf("%q.Valid() = true", c)
		}
	}
}
