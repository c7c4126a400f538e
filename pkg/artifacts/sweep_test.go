package artifacts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exports"
)

var errInjected = errors.New("injected byte delete failure")

// watchedBytes passes deletes to the store's bytes, failing the first
// fail of them before they reach it, and records for each delete whether
// the artifact's record was still there when its bytes were deleted.
type watchedBytes struct {
	exports.Bytes
	s *Store

	mu             sync.Mutex
	fail           int
	deletes        int
	recordsPresent []bool
}

func (w *watchedBytes) Delete(ctx context.Context, name string) error {
	w.mu.Lock()
	w.deletes++
	failing := w.fail > 0
	if failing {
		w.fail--
	}
	w.mu.Unlock()
	parts := strings.Split(name, "/") // <tenant>/<run_id>/<name>/<sha256>
	_, err := w.s.get(ctx, recordKey(parts[0], parts[1], parts[2]))
	w.mu.Lock()
	w.recordsPresent = append(w.recordsPresent, err == nil)
	w.mu.Unlock()
	if failing {
		return fmt.Errorf("delete %s: %w", name, errInjected)
	}
	return w.Bytes.Delete(ctx, name)
}

func TestSweepRemovesBytesThenRecords(t *testing.T) {
	s, _ := newStore(t, Config{})
	ctx := context.Background()
	ref, err := s.Put(ctx, "acme", "run-1", "patch", strings.NewReader("the change"))
	if err != nil {
		t.Fatal(err)
	}
	w := &watchedBytes{Bytes: s.Bytes(), s: s}
	tests := []struct {
		name string
		now  time.Time
		want exports.Result
	}{
		{name: "within the retention", now: time.Now(), want: exports.Result{Kept: 1}},
		{name: "past the retention", now: time.Now().Add(s.Retention() + time.Minute), want: exports.Result{Swept: 1}},
		{name: "nothing left", now: time.Now().Add(s.Retention() + time.Minute), want: exports.Result{}},
	}
	for _, tt := range tests {
		sw := &Sweeper{Store: s, Bytes: w, Now: func() time.Time { return tt.now }}
		got, err := sw.Sweep(ctx)
		if err != nil || got != tt.want {
			t.Fatalf("%s: sweep = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
	if len(w.recordsPresent) != 1 || !w.recordsPresent[0] {
		t.Fatalf("record present at each byte delete = %v, want [true]: bytes go first", w.recordsPresent)
	}
	if ok, err := s.bytes.Exists(ctx, ref.Name); err != nil || ok {
		t.Fatalf("bytes exist after the sweep = %v, %v", ok, err)
	}
	if recs, err := s.Records(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("records after the sweep = %+v, %v; want none", recs, err)
	}
}

func TestSweepRetriesAFailedByteDelete(t *testing.T) {
	s, _ := newStore(t, Config{})
	ctx := context.Background()
	ref, err := s.Put(ctx, "acme", "run-1", "patch", strings.NewReader("the change"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Withdraw(ctx, "acme", "run-1"); err != nil {
		t.Fatal(err)
	}
	w := &watchedBytes{Bytes: s.Bytes(), s: s, fail: 1}
	sw := &Sweeper{Store: s, Bytes: w}

	res, err := sw.Sweep(ctx)
	if !errors.Is(err, errInjected) || res != (exports.Result{Failed: 1, Pending: 1}) {
		t.Fatalf("first sweep = %+v, %v; want one failed and pending, with the injected error", res, err)
	}
	recs, err := s.Records(ctx)
	if err != nil || len(recs) != 1 || !recs[0].Withdrawn {
		t.Fatalf("records after the failed delete = %+v, %v; want the withdrawn record kept", recs, err)
	}
	if ok, err := s.bytes.Exists(ctx, ref.Name); err != nil || !ok {
		t.Fatalf("bytes exist after the failed delete = %v, %v; want kept", ok, err)
	}

	res, err = sw.Sweep(ctx)
	if err != nil || res != (exports.Result{Swept: 1}) {
		t.Fatalf("second sweep = %+v, %v; want it swept", res, err)
	}
	if w.deletes != 2 {
		t.Fatalf("byte deletes = %d, want 2 (the failed one, then its retry)", w.deletes)
	}
	if ok, err := s.bytes.Exists(ctx, ref.Name); err != nil || ok {
		t.Fatalf("bytes exist after the retry = %v, %v; want gone", ok, err)
	}
	if recs, err := s.Records(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("records after the retry = %+v, %v; want none", recs, err)
	}
}

func TestSweepRemovesAnAbandonedWrite(t *testing.T) {
	s, _ := newStore(t, Config{})
	ctx := context.Background()
	// A writer that stored its bytes and died before it marked its record
	// stored.
	began := time.Now()
	s.now = func() time.Time { return began }
	sp, err := spool("", strings.NewReader("half"), 100, "artifact patch")
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	rec := Record{Tenant: "acme", RunID: "run-1", Name: "patch", SHA256: sp.hex(), Size: sp.size,
		Object: "acme/run-1/patch/" + sp.hex(), Began: began.UnixMilli()}
	if _, err := s.write(ctx, rec, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.bytes.put(ctx, rec.Object, sp, false); err != nil {
		t.Fatal(err)
	}
	if list, err := s.List(ctx, "acme", "run-1"); err != nil || len(list) != 0 {
		t.Fatalf("list of an unstored artifact = %+v, %v; want none", list, err)
	}
	for _, tt := range []struct {
		after time.Duration
		want  exports.Result
	}{
		{after: time.Minute, want: exports.Result{Kept: 1}},
		{after: exports.DefaultAbandonAfter, want: exports.Result{Swept: 1}},
	} {
		sw := &Sweeper{Store: s, Now: func() time.Time { return began.Add(tt.after) }}
		if got, err := sw.Sweep(ctx); err != nil || got != tt.want {
			t.Fatalf("sweep %s after the write began = %+v, %v; want %+v", tt.after, got, err, tt.want)
		}
	}
	if ok, err := s.bytes.Exists(ctx, rec.Object); err != nil || ok {
		t.Fatalf("abandoned bytes exist = %v, %v; want gone", ok, err)
	}
}
