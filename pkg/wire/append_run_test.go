package wire

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// randomRunValues holds the random makers of the run messages' fields.
type randomRunValues struct{ r *rand.Rand }

// str is empty a third of the time, else of a length around a string
// header's edges (31/32, 255/256) or below.
func (v randomRunValues) str() string {
	switch v.r.IntN(6) {
	case 0, 1:
		return ""
	case 2:
		return strings.Repeat("x", []int{31, 32, 255, 256, 65535, 65536}[v.r.IntN(6)])
	}
	return strings.Repeat("é", v.r.IntN(40))
}

// num is zero a fifth of the time, else at an integer width's edge or
// anywhere in the int64 range.
func (v randomRunValues) num() int64 {
	edges := []int64{1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	switch v.r.IntN(5) {
	case 0:
		return 0
	case 1, 2:
		return edges[v.r.IntN(len(edges))]
	}
	return int64(v.r.Uint64())
}

func (v randomRunValues) strings() map[string]string {
	switch v.r.IntN(3) {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	m := map[string]string{}
	for range 1 + v.r.IntN(20) {
		m[v.str()] = v.str()
	}
	return m
}

func (v randomRunValues) raw() []byte {
	switch v.r.IntN(3) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b, err := Marshal(map[string]any{"prompt": v.str(), "n": v.num()})
	if err != nil {
		panic(err)
	}
	return b
}

func (v randomRunValues) pin() Pin {
	return Pin{Provider: v.str(), Model: v.str(), ProfileHash: v.str(), RegistryVersion: v.str(), Pricing: v.strings()}
}

func (v randomRunValues) record() RunRecord {
	r := v.r
	rec := RunRecord{
		V: int(v.num()), RunID: v.str(), Tenant: v.str(), Principal: v.str(), Profile: v.str(), Adapter: v.str(),
		Conversation: v.str(), RequestDigest: v.str(), State: State(v.str()), Owner: v.str(), Committed: r.IntN(2) == 0,
		Attempt: int(v.num()), Deadline: v.num(), Consent: r.IntN(2) == 0, ConsentRev: uint64(v.num()),
		Request: v.raw(), Labels: v.strings(), Cost: v.str(), Created: v.num(), Updated: v.num(),
	}
	if r.IntN(2) == 0 {
		p := v.pin()
		rec.Pin = &p
	}
	if r.IntN(2) == 0 {
		rec.Usage = &Usage{InputTokens: v.num(), OutputTokens: v.num(), CacheReadTokens: v.num(), CacheWriteTokens: v.num(), ReasoningTokens: v.num()}
	}
	if r.IntN(3) == 0 {
		rc := int(v.num())
		rec.Error = &Error{Class: Class(v.str()), Message: v.str(), Retryable: r.IntN(2) == 0, StderrTail: v.str()}
		if r.IntN(2) == 0 {
			rec.Error.ReturnCode = &rc
		}
	}
	return rec
}

func (v randomRunValues) work() Work {
	r := v.r
	wk := Work{
		V: int(v.num()), RunID: v.str(), Tenant: v.str(), Principal: v.str(), Adapter: v.str(), Profile: v.str(),
		Request: v.raw(), Pin: v.pin(), Conversation: v.str(), SessionID: v.str(), Deadline: v.num(),
		Policy: AttemptPolicy{MaxAttempts: int(v.num()), StallAfterMS: v.num()},
	}
	switch r.IntN(3) {
	case 0:
		wk.Runtime = map[string]any{}
	case 1:
		wk.Runtime = map[string]any{"cwd": v.str(), "z": v.num(), "a": []any{v.str(), true}}
	}
	if r.IntN(3) != 0 {
		wk.Handoff = &Handoff{Record: v.record(), Rev: uint64(v.num()), Seq: uint64(v.num()), StreamSeq: uint64(v.num())}
	}
	for i := range r.IntN(3) { // short strings: the work stays under the message bound
		wk.Fallback = append(wk.Fallback, Fallback{Profile: "fb" + strconv.Itoa(i), Adapter: "a", Transport: TransportRemote,
			Pin:    Pin{Provider: "a", Model: "m", Pricing: map[string]string{"input": "0.5"}},
			Policy: AttemptPolicy{MaxAttempts: int(v.num()), StallAfterMS: v.num()}})
	}
	switch r.IntN(3) {
	case 0:
		wk.Workspace = &WorkspaceSource{Git: &GitSource{URL: v.str(), Ref: v.str()}}
	case 1:
		wk.Workspace = &WorkspaceSource{Snapshot: v.str()}
	}
	return wk
}

// TestAppendRunSameAsMarshal: Marshal's fast path for records and work
// (AppendRunRecord, AppendWork) writes exactly the reflective encoder's
// bytes, for zero values and random ones at the encoding's edges.
func TestAppendRunSameAsMarshal(t *testing.T) {
	v := randomRunValues{rand.New(rand.NewPCG(3, 4))}
	records := []RunRecord{{}, {V: Version, State: StateRouted, Pin: &Pin{}}}
	works := []Work{{}, {V: Version, Handoff: &Handoff{}}}
	for range 3000 {
		records = append(records, v.record())
		works = append(works, v.work())
	}
	appendsAsMarshal(t, "record", records, AppendRunRecord)
	appendsAsMarshal(t, "work", works, AppendWork)
}

// appendsAsMarshal fails unless appendFn, after a prefix, and Marshal
// write each of vals as the reflective encoder does.
func appendsAsMarshal[T any](t *testing.T, what string, vals []T, appendFn func([]byte, *T) ([]byte, error)) {
	t.Helper()
	prefix := []byte("prefix")
	for i := range vals {
		want, err := marshalValue(&vals[i])
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendFn(bytes.Clone(prefix), &vals[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Fatalf("%s %d %+v:\n append  % x\n marshal % x", what, i, vals[i], got[len(prefix):], want)
		}
		if m, err := Marshal(&vals[i]); err != nil || !bytes.Equal(m, want) {
			t.Fatalf("%s %d: Marshal = % x, %v; want % x", what, i, m, err, want)
		}
	}
}

// A value the reflective encoder refuses is refused by the fast path too,
// with dst as it was, and Marshal names the message it was encoding.
func TestAppendRunRefusesWhatMarshalRefuses(t *testing.T) {
	wk := Work{V: Version, Runtime: map[string]any{"ch": make(chan int)}}
	if _, err := marshalValue(&wk); err == nil {
		t.Fatal("the reflective encoder took a channel")
	}
	dst := []byte("keep")
	got, err := AppendWork(dst, &wk)
	if err == nil || !bytes.Equal(got, dst) {
		t.Fatalf("AppendWork = %q, %v; want %q and an error", got, err, dst)
	}
	if _, err := Marshal(&wk); err == nil || !strings.Contains(err.Error(), "*wire.Work") {
		t.Fatalf("Marshal = %v, want an error naming *wire.Work", err)
	}
	big := RunRecord{Request: bytes.Repeat([]byte{0xc0}, MaxMessageSize)}
	if _, err := Marshal(&big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Marshal of a record over MaxMessageSize = %v, want ErrTooLarge", err)
	}
}

// Decoding what the fast path wrote gives the value back.
func TestAppendRunDecodes(t *testing.T) {
	v := randomRunValues{rand.New(rand.NewPCG(5, 6))}
	for range 200 {
		wk := v.work()
		wk.V, wk.Runtime = VersionOf(&wk), nil
		if wk.Handoff != nil {
			wk.Handoff.Record.V = Version
		}
		b, err := Marshal(&wk)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode[Work](b)
		if err != nil {
			t.Fatal(err)
		}
		norm := func(w *Work) {
			if len(w.Request) == 0 {
				w.Request = nil
			}
			if len(w.Pin.Pricing) == 0 {
				w.Pin.Pricing = nil
			}
			for i := range w.Fallback {
				if len(w.Fallback[i].Pin.Pricing) == 0 {
					w.Fallback[i].Pin.Pricing = nil
				}
			}
			if h := w.Handoff; h != nil {
				if len(h.Record.Request) == 0 {
					h.Record.Request = nil
				}
				if len(h.Record.Labels) == 0 {
					h.Record.Labels = nil
				}
				if h.Record.Pin != nil && len(h.Record.Pin.Pricing) == 0 {
					h.Record.Pin.Pricing = nil
				}
			}
		}
		norm(&wk)
		norm(&got)
		if !reflect.DeepEqual(got, wk) {
			t.Fatalf("decoded\n %+v\nwant\n %+v", got, wk)
		}
	}
}

// requestSameAsReflective is sameAsReflective for the run request fast
// path.
func requestSameAsReflective(t *testing.T, b []byte) bool {
	t.Helper()
	return sameAsReflective(t, b, decodeRunRequest)
}

// TestDecodeRunRequestSameAsReflective: the fast path reads the requests
// client.Submit writes (and takes them), and whatever else it takes it
// reads as the reflective decoder does; what it leaves (runtime, nil, an
// unknown field) the reflective decoder reads.
func TestDecodeRunRequestSameAsReflective(t *testing.T) {
	v := randomRunValues{rand.New(rand.NewPCG(9, 10))}
	taken := 0
	for i := range 3000 {
		q := RunRequest{
			V: int(v.num()), RunID: v.str(), Tenant: v.str(), Principal: v.str(), Profile: v.str(), Request: v.raw(),
			Conversation: v.str(), DeadlineMS: v.num(), Labels: v.strings(),
		}
		if i%4 == 0 {
			q.Runtime = map[string]any{"cwd": v.str()}
		}
		b, err := Marshal(&q)
		if err != nil {
			t.Fatal(err)
		}
		took := requestSameAsReflective(t, b)
		if took {
			taken++
		}
		if len(q.Runtime) == 0 && !took {
			t.Fatalf("the fast path left a request without runtime: % x", b)
		}
		if len(q.Runtime) > 0 && took {
			t.Fatalf("the fast path took a request with runtime: % x", b)
		}
	}
	if taken < 1000 {
		t.Fatalf("the fast path took %d requests", taken)
	}
	// Decode itself, on both paths, gives what was encoded.
	for _, q := range []RunRequest{
		{V: Version, RunID: "r1", Tenant: "t", Principal: "p", Profile: "fixture", Request: []byte{0x81, 0xa1, 'a', 0x01}, Labels: map[string]string{"k": "v"}},
		{V: Version, RunID: "r2", Tenant: "t", Runtime: map[string]any{"cwd": "/tmp"}},
	} {
		b, err := Marshal(&q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode[RunRequest](b)
		if err != nil || !reflect.DeepEqual(got, q) {
			t.Fatalf("Decode = %+v, %v; want %+v", got, err, q)
		}
	}
	if _, err := Decode[RunRequest]([]byte{0x81, 0xa1, 'v', 0x04}); !errors.Is(err, ErrVersion) {
		t.Fatalf("Decode of v=4 = %v, want ErrVersion", err)
	}
	// Hand-made variants: a repeated field, an unknown one, nil in each
	// kind of field, a bin string, a signed deadline, an empty label map,
	// a request of every container and width, map16 headers, trailing
	// bytes, and a request cut short.
	for _, raw := range [][]byte{
		{0x82, 0xa1, 'v', 0x01, 0xa1, 'v', 0x01},
		{0x81, 0xa1, 'x', 0x01},
		{0x81, 0xa6, 'r', 'u', 'n', '_', 'i', 'd', 0xc0},
		{0x81, 0xa7, 'r', 'e', 'q', 'u', 'e', 's', 't', 0xc0},
		{0x81, 0xa6, 'l', 'a', 'b', 'e', 'l', 's', 0xc0},
		{0x81, 0xa6, 'l', 'a', 'b', 'e', 'l', 's', 0x80},
		{0x81, 0xa6, 'l', 'a', 'b', 'e', 'l', 's', 0x82, 0xa1, 'a', 0xa1, 'b', 0xa1, 'a', 0xa1, 'c'},
		{0x81, 0xa6, 'l', 'a', 'b', 'e', 'l', 's', 0x81, 0xa1, 'a', 0x01},
		{0x81, 0xa6, 'r', 'u', 'n', '_', 'i', 'd', 0xc4, 0x01, 'r'},
		{0x81, 0xab, 'd', 'e', 'a', 'd', 'l', 'i', 'n', 'e', '_', 'm', 's', 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0},
		{0x81, 0xab, 'd', 'e', 'a', 'd', 'l', 'i', 'n', 'e', '_', 'm', 's', 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0},
		{0x81, 0xa7, 'r', 'e', 'q', 'u', 'e', 's', 't', 0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xc7, 0x01, 0x05, 0xff},
		{0x81, 0xa7, 'r', 'e', 'q', 'u', 'e', 's', 't', 0xdc, 0x00, 0x01, 0xde, 0x00, 0x01, 0xa1, 'k', 0xc4, 0x01, 'b'},
		{0x81, 0xa7, 'r', 'e', 'q', 'u', 'e', 's', 't', 0xd6, 0xff, 0, 0, 0, 0},
		{0x81, 0xa7, 'r', 'e', 'q', 'u', 'e', 's', 't', 0xa3, 'a', 'b', 'c'},
		{0xde, 0x00, 0x01, 0xa1, 'v', 0x01},
		{0x81, 0xa1, 'v', 0x01, 0x00},
		{0x81, 0xa7, 'r', 'e', 'q', 'u', 'e', 's', 't', 0x92, 0x01},
	} {
		requestSameAsReflective(t, raw)
	}
}
