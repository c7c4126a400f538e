// Package storetest is the conformance suite every trajstore.Store passes,
// and Faulty, a Store wrapper that injects failures for the tests of the
// Store's users (the exporter, the sweeper).
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
)

// Inspector is what a store's test may add to the Store it gives Run, so
// that the suite checks what the backend holds and not only what the Store
// answers.
type Inspector interface {
	// Entries lists what the backend holds, one string per stored piece
	// (a file, a chunk subject, a meta subject), each naming the piece's
	// identity so that a rewritten piece gives a different string: two
	// copies of one object, or one object written twice, show.
	Entries(ctx context.Context) ([]string, error)
}

// timeout bounds each subtest's calls.
const timeout = 30 * time.Second

// Run runs the conformance suite against the stores newStore makes, one
// fresh and empty store per subtest. newStore may register cleanups with
// its t. When the Store also implements Inspector, the subtests that say
// "one object" check the backend.
func Run(t *testing.T, newStore func(t *testing.T) trajstore.Store) {
	t.Helper()
	tests := []struct {
		name string
		f    func(t *testing.T, ctx context.Context, s trajstore.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Empty", testEmpty},
		{"GetMissing", testGetMissing},
		{"Exists", testExists},
		{"PutTwiceSameBytes", testPutTwiceSameBytes},
		{"PutConflict", testPutConflict},
		{"DeleteThenGet", testDeleteThenGet},
		{"DeleteMissing", testDeleteMissing},
		{"DeleteThenPutAgain", testDeleteThenPutAgain},
		{"ConcurrentPuts", testConcurrentPuts(newStore)},
		{"InvalidNames", testInvalidNames},
		{"Large", testLarge},
		{"ContextCancelled", testContextCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			tt.f(t, ctx, newStore(t))
		})
	}
}

// object is a trajectory-like body and its name.
func object(t *testing.T, runID string, size int) (string, []byte) {
	t.Helper()
	data := make([]byte, size)
	_, _ = rand.Read(data)
	name, err := trajstore.NameFor("tenant-1", runID, data)
	if err != nil {
		t.Fatal(err)
	}
	return name, data
}

func mustPut(t *testing.T, ctx context.Context, s trajstore.Store, name string, data []byte) {
	t.Helper()
	if err := s.Put(ctx, name, data); err != nil {
		t.Fatalf("Put(%s) = %v", name, err)
	}
}

func wantBytes(t *testing.T, ctx context.Context, s trajstore.Store, name string, want []byte) {
	t.Helper()
	got, err := s.Get(ctx, name)
	if err != nil {
		t.Fatalf("Get(%s) = %v", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%s) = %d bytes, want the %d put", name, len(got), len(want))
	}
}

func wantExists(t *testing.T, ctx context.Context, s trajstore.Store, name string, want bool) {
	t.Helper()
	got, err := s.Exists(ctx, name)
	if err != nil || got != want {
		t.Fatalf("Exists(%s) = %t, %v; want %t", name, got, err, want)
	}
}

func wantNotFound(t *testing.T, ctx context.Context, s trajstore.Store, name string) {
	t.Helper()
	got, err := s.Get(ctx, name)
	if !errors.Is(err, trajstore.ErrNotFound) {
		t.Fatalf("Get(%s) = %d bytes, %v; want ErrNotFound", name, len(got), err)
	}
}

// entries is the backend's listing, or nil when s is no Inspector.
func entries(t *testing.T, ctx context.Context, s trajstore.Store) []string {
	t.Helper()
	in, ok := s.(Inspector)
	if !ok {
		return nil
	}
	e, err := in.Entries(ctx)
	if err != nil {
		t.Fatalf("Entries = %v", err)
	}
	slices.Sort(e)
	return e
}

func testRoundTrip(t *testing.T, ctx context.Context, s trajstore.Store) {
	name, data := object(t, "run-1", 4096)
	other, otherData := object(t, "run-2", 100)
	mustPut(t, ctx, s, name, data)
	mustPut(t, ctx, s, other, otherData)
	want := bytes.Clone(data)
	data[0] ^= 0xff // the store holds its own copy
	wantBytes(t, ctx, s, name, want)
	wantBytes(t, ctx, s, other, otherData)
	got, _ := s.Get(ctx, name)
	got[0] ^= 0xff // and hands out the caller's
	wantBytes(t, ctx, s, name, want)
}

func testEmpty(t *testing.T, ctx context.Context, s trajstore.Store) {
	name, data := object(t, "run-1", 0)
	mustPut(t, ctx, s, name, data)
	wantBytes(t, ctx, s, name, nil)
	wantExists(t, ctx, s, name, true)
}

func testGetMissing(t *testing.T, ctx context.Context, s trajstore.Store) {
	name, data := object(t, "run-1", 10)
	wantNotFound(t, ctx, s, name)
	// Another name of the same run stored: still not found.
	other, _ := object(t, "run-1", 10)
	mustPut(t, ctx, s, other, data)
	wantNotFound(t, ctx, s, name)
}

func testExists(t *testing.T, ctx context.Context, s trajstore.Store) {
	name, data := object(t, "run-1", 10)
	wantExists(t, ctx, s, name, false)
	mustPut(t, ctx, s, name, data)
	wantExists(t, ctx, s, name, true)
	if err := s.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	wantExists(t, ctx, s, name, false)
}

func testPutTwiceSameBytes(t *testing.T, ctx context.Context, s trajstore.Store) {
	name, data := object(t, "run-1", 1000)
	mustPut(t, ctx, s, name, data)
	before := entries(t, ctx, s)
	mustPut(t, ctx, s, name, bytes.Clone(data))
	wantBytes(t, ctx, s, name, data)
	if after := entries(t, ctx, s); !slices.Equal(before, after) {
		t.Fatalf("the second Put of the same bytes changed the backend:\nbefore %q\nafter  %q", before, after)
	}
}

func testPutConflict(t *testing.T, ctx context.Context, s trajstore.Store) {
	name, data := object(t, "run-1", 1000)
	mustPut(t, ctx, s, name, data)
	before := entries(t, ctx, s)
	other := bytes.Clone(data)
	other[len(other)-1] ^= 1
	err := s.Put(ctx, name, other)
	var ce *trajstore.ConflictError
	if !errors.Is(err, trajstore.ErrConflict) || !errors.As(err, &ce) {
		t.Fatalf("Put of other bytes = %v, want a *ConflictError", err)
	}
	if ce.Name != name || ce.StoredSHA256 != trajstore.SHA256(data) || ce.PutSHA256 != trajstore.SHA256(other) {
		t.Errorf("conflict = %+v, want name %s, stored %s, put %s", ce, name, trajstore.SHA256(data), trajstore.SHA256(other))
	}
	wantBytes(t, ctx, s, name, data)
	if after := entries(t, ctx, s); !slices.Equal(before, after) {
		t.Fatalf("a refused Put changed the backend:\nbefore %q\nafter  %q", before, after)
	}
}

func testDeleteThenGet(t *testing.T, ctx context.Context, s trajstore.Store) {
	name, data := object(t, "run-1", 1000)
	keep, keepData := object(t, "run-1", 1000)
	mustPut(t, ctx, s, name, data)
	mustPut(t, ctx, s, keep, keepData)
	if err := s.Delete(ctx, name); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	wantNotFound(t, ctx, s, name)
	wantBytes(t, ctx, s, keep, keepData) // the run's other object stays
	if err := s.Delete(ctx, name); err != nil {
		t.Fatalf("second Delete = %v, want nil", err)
	}
}

func testDeleteMissing(t *testing.T, ctx context.Context, s trajstore.Store) {
	name, _ := object(t, "run-1", 10)
	if err := s.Delete(ctx, name); err != nil {
		t.Fatalf("Delete of an absent name = %v, want nil", err)
	}
	wantExists(t, ctx, s, name, false)
}

func testDeleteThenPutAgain(t *testing.T, ctx context.Context, s trajstore.Store) {
	name, data := object(t, "run-1", 1000)
	mustPut(t, ctx, s, name, data)
	if err := s.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	mustPut(t, ctx, s, name, data)
	wantBytes(t, ctx, s, name, data)
}

func testConcurrentPuts(newStore func(t *testing.T) trajstore.Store) func(t *testing.T, ctx context.Context, s trajstore.Store) {
	return func(t *testing.T, ctx context.Context, s trajstore.Store) {
		const writers = 8
		name, data := object(t, "run-1", 300_000) // several object store chunks
		var wg sync.WaitGroup
		errs := make([]error, writers)
		start := make(chan struct{})
		for i := range writers {
			wg.Go(func() {
				<-start
				errs[i] = s.Put(ctx, name, bytes.Clone(data))
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent Puts: %v", err)
		}
		wantBytes(t, ctx, s, name, data)
		got := entries(t, ctx, s)
		if got == nil {
			return
		}
		// One Put of the same object into a fresh store is what one
		// object looks like in this backend.
		ref := newStore(t)
		mustPut(t, ctx, ref, name, data)
		if want := entries(t, ctx, ref); len(got) != len(want) {
			t.Fatalf("after %d concurrent Puts the backend holds %q; one object is %q", writers, got, want)
		}
	}
}

func testInvalidNames(t *testing.T, ctx context.Context, s trajstore.Store) {
	sha := strings.Repeat("ab", 32)
	bad := []string{
		"",
		"/",
		"tenant-1",
		"tenant-1/run-1",
		"tenant-1/run-1/" + sha,              // no extension
		"tenant-1/run-1/" + sha + ".txt",     // wrong extension
		"tenant-1/run-1/" + sha + ".json/",   // trailing separator
		"/tenant-1/run-1/" + sha + ".json",   // absolute
		"../run-1/" + sha + ".json",          // traversal
		"tenant-1/../" + sha + ".json",       // traversal
		"tenant-1/run-1/../../../etc/passwd", // traversal
		"./run-1/" + sha + ".json",           // dot element
		"tenant-1//run-1/" + sha + ".json",   // empty element
		"tenant-1/run-1/x/" + sha + ".json",  // extra element
		"tenant-1\\run-1/" + sha + ".json",   // another separator
		"tenant.1/run-1/" + sha + ".json",    // not a subject token
		"tenant-1/run 1/" + sha + ".json",    // space
		"tenant-1/run-1/" + strings.ToUpper(sha) + ".json",
		"tenant-1/run-1/" + sha[:63] + ".json",   // short digest
		"tenant-1/run-1/" + sha + "a.json",       // long digest
		"tenant-1/run-1/" + sha[:62] + "zz.json", // not hex
		strings.Repeat("t", 65) + "/run-1/" + sha + ".json",
		"tenant-1/run-1/" + sha + ".json\x00",
	}
	for _, name := range bad {
		ops := map[string]error{
			"Put":    s.Put(ctx, name, []byte("x")),
			"Delete": s.Delete(ctx, name),
		}
		_, ops["Get"] = s.Get(ctx, name)
		_, ops["Exists"] = s.Exists(ctx, name)
		for op, err := range ops {
			var ne *trajstore.NameError
			if !errors.Is(err, trajstore.ErrInvalidName) || !errors.As(err, &ne) {
				t.Errorf("%s(%q) = %v, want a *NameError", op, name, err)
			}
		}
	}
	// A refused Put stored nothing anywhere.
	if e := entries(t, ctx, s); len(e) != 0 {
		t.Errorf("refused names left %q in the backend", e)
	}
}

func testLarge(t *testing.T, ctx context.Context, s trajstore.Store) {
	name, data := object(t, "run-1", 5<<20) // over a NATS max payload
	mustPut(t, ctx, s, name, data)
	wantBytes(t, ctx, s, name, data)
	mustPut(t, ctx, s, name, data)
	if err := s.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, ctx, s, name)
}

func testContextCancelled(t *testing.T, ctx context.Context, s trajstore.Store) {
	name, data := object(t, "run-1", 1000)
	stored, storedData := object(t, "run-2", 1000)
	mustPut(t, ctx, s, stored, storedData)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Put(cctx, name, data); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := s.Get(cctx, stored); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := s.Exists(cctx, stored); !errors.Is(err, context.Canceled) {
		t.Errorf("Exists with a cancelled context = %v, want context.Canceled", err)
	}
	if err := s.Delete(cctx, stored); !errors.Is(err, context.Canceled) {
		t.Errorf("Delete with a cancelled context = %v, want context.Canceled", err)
	}
	// The cancelled calls changed nothing.
	wantExists(t, ctx, s, name, false)
	wantBytes(t, ctx, s, stored, storedData)
}
