package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore/storetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func dirStore(t testing.TB) trajstore.Store {
	t.Helper()
	s, err := trajstore.NewDirStore(filepath.Join(t.TempDir(), "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// With no failure set, a Faulty is its Store.
func TestFaultyConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) trajstore.Store { return &storetest.Faulty{Store: dirStore(t)} })
}

func stored(t *testing.T, f *storetest.Faulty) string {
	t.Helper()
	data := []byte(`{"v":1}`)
	name, _ := trajstore.NameFor("tenant-1", "run-1", data)
	if err := f.Store.Put(context.Background(), name, data); err != nil {
		t.Fatal(err)
	}
	return name
}

func exists(t *testing.T, f *storetest.Faulty, name string) bool {
	t.Helper()
	ok, err := f.Store.Exists(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestFaultyFailNextDelete(t *testing.T) {
	ctx := context.Background()
	f := &storetest.Faulty{Store: dirStore(t)}
	name := stored(t, f)
	f.FailNext(storetest.OpDelete, 1)
	if err := f.Delete(ctx, name); !errors.Is(err, storetest.ErrInjected) {
		t.Fatalf("first Delete = %v, want ErrInjected", err)
	}
	if !exists(t, f, name) {
		t.Fatal("a Delete failed before the store removed the object")
	}
	if err := f.Delete(ctx, name); err != nil {
		t.Fatalf("second Delete = %v", err)
	}
	if exists(t, f, name) {
		t.Fatal("the second Delete left the object")
	}
	if got := f.Calls(storetest.OpDelete); got != 2 {
		t.Errorf("Calls(delete) = %d, want 2", got)
	}
}

func TestFaultyFailNextAfter(t *testing.T) {
	ctx := context.Background()
	f := &storetest.Faulty{Store: dirStore(t)}
	name := stored(t, f)
	f.FailNextAfter(storetest.OpDelete, 1)
	if err := f.Delete(ctx, name); !errors.Is(err, storetest.ErrInjected) {
		t.Fatalf("Delete = %v, want ErrInjected", err)
	}
	if exists(t, f, name) {
		t.Fatal("a Delete failed after the store answered, but the object is still there")
	}
	data := []byte("after")
	other, _ := trajstore.NameFor("tenant-1", "run-1", data)
	f.FailNextAfter(storetest.OpPut, 1)
	if err := f.Put(ctx, other, data); !errors.Is(err, storetest.ErrInjected) {
		t.Fatalf("Put = %v, want ErrInjected", err)
	}
	if !exists(t, f, other) {
		t.Fatal("the Put that failed after the store answered did not store")
	}
}

func TestFaultyEachOp(t *testing.T) {
	ctx := context.Background()
	f := &storetest.Faulty{Store: dirStore(t)}
	name := stored(t, f)
	calls := map[storetest.Op]func() error{
		storetest.OpPut:    func() error { return f.Put(ctx, name, []byte(`{"v":1}`)) },
		storetest.OpGet:    func() error { _, err := f.Get(ctx, name); return err },
		storetest.OpExists: func() error { _, err := f.Exists(ctx, name); return err },
		storetest.OpDelete: func() error { return f.Delete(ctx, name) },
	}
	for _, op := range []storetest.Op{storetest.OpPut, storetest.OpGet, storetest.OpExists, storetest.OpDelete} {
		f.FailNext(op, 2)
		for i := range 2 {
			if err := calls[op](); !errors.Is(err, storetest.ErrInjected) {
				t.Errorf("%s call %d = %v, want ErrInjected", op, i, err)
			}
		}
		if err := calls[op](); err != nil {
			t.Errorf("%s after the failures = %v", op, err)
		}
		if f.Pending(op) != 0 || f.Calls(op) != 3 {
			t.Errorf("%s: pending %d, calls %d; want 0 and 3", op, f.Pending(op), f.Calls(op))
		}
	}
}

// Each injected failure is taken by exactly one of many concurrent calls.
func TestFaultyConcurrent(t *testing.T) {
	ctx := context.Background()
	f := &storetest.Faulty{Store: dirStore(t)}
	name := stored(t, f)
	f.FailNext(storetest.OpGet, 5)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for range 20 {
		wg.Go(func() {
			_, err := f.Get(ctx, name)
			if errors.Is(err, storetest.ErrInjected) {
				mu.Lock()
				failed++
				mu.Unlock()
			} else if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if failed != 5 || f.Calls(storetest.OpGet) != 20 {
		t.Fatalf("%d of %d Gets failed, want 5 of 20", failed, f.Calls(storetest.OpGet))
	}
}

// A sweep whose byte delete fails once keeps its record, and the next
// sweep removes the bytes.
func ExampleFaulty() {
	tmp, _ := os.MkdirTemp("", "storetest-example-")
	defer os.RemoveAll(tmp)
	s, _ := trajstore.NewDirStore(filepath.Join(tmp, "artifacts"))
	f := &storetest.Faulty{Store: s}
	ctx := context.Background()
	data := []byte(`{"v":1}`)
	name, _ := trajstore.NameFor("acme", "run-42", data)
	_ = f.Put(ctx, name, data)

	f.FailNext(storetest.OpDelete, 1)
	err := f.Delete(ctx, name)
	fmt.Println(errors.Is(err, storetest.ErrInjected))
	ok, _ := f.Exists(ctx, name)
	fmt.Println(ok)
	fmt.Println(f.Delete(ctx, name))
	ok, _ = f.Exists(ctx, name)
	fmt.Println(ok)
	// Output:
	// true
	// true
	// <nil>
	// false
}
