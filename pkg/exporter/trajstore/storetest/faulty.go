package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
)

// ErrInjected is the error Faulty returns for a failure it was told to
// inject.
var ErrInjected = errors.New("injected store failure")

// Op is a Store method.
type Op int

// The Store methods.
const (
	OpPut Op = iota
	OpGet
	OpDelete
	OpExists
	numOps
)

func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpGet:
		return "get"
	case OpDelete:
		return "delete"
	case OpExists:
		return "exists"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Faulty is a trajstore.Store that passes each call to Store, except the
// calls it was told to fail, which return an error wrapping ErrInjected.
// FailNext fails calls before they reach Store (the delete did not
// happen); FailNextAfter lets them reach Store and then fails them (the
// delete happened but its answer was lost). It counts the calls of each
// Op, failed or not.
//
// Use a *Faulty; its zero value with Store set is ready. It is safe for
// concurrent use: each injected failure is taken by exactly one call.
type Faulty struct {
	Store trajstore.Store

	mu     sync.Mutex
	before [numOps]int
	after  [numOps]int
	calls  [numOps]int
}

// FailNext makes the next n calls of op fail without reaching Store. It
// adds to failures already set.
func (f *Faulty) FailNext(op Op, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.before[op] += n
}

// FailNextAfter makes the next n calls of op reach Store and then fail,
// whatever Store answered. It adds to failures already set.
func (f *Faulty) FailNextAfter(op Op, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.after[op] += n
}

// Calls is how many calls of op were made, failed ones included.
func (f *Faulty) Calls(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Pending is how many injected failures of op no call has taken yet.
func (f *Faulty) Pending(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.before[op] + f.after[op]
}

// take counts a call of op and says whether it fails before or after
// reaching Store.
func (f *Faulty) take(op Op) (before, after bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	if f.before[op] > 0 {
		f.before[op]--
		return true, false
	}
	if f.after[op] > 0 {
		f.after[op]--
		return false, true
	}
	return false, false
}

func injected(op Op, name string, after bool) error {
	if after {
		return fmt.Errorf("%s %s: %w (after the store's answer)", op, name, ErrInjected)
	}
	return fmt.Errorf("%s %s: %w", op, name, ErrInjected)
}

// Put implements trajstore.Store.
func (f *Faulty) Put(ctx context.Context, name string, data []byte) error {
	before, after := f.take(OpPut)
	if before {
		return injected(OpPut, name, false)
	}
	err := f.Store.Put(ctx, name, data)
	if after {
		return injected(OpPut, name, true)
	}
	return err
}

// Get implements trajstore.Store.
func (f *Faulty) Get(ctx context.Context, name string) ([]byte, error) {
	before, after := f.take(OpGet)
	if before {
		return nil, injected(OpGet, name, false)
	}
	data, err := f.Store.Get(ctx, name)
	if after {
		return nil, injected(OpGet, name, true)
	}
	return data, err
}

// Delete implements trajstore.Store.
func (f *Faulty) Delete(ctx context.Context, name string) error {
	before, after := f.take(OpDelete)
	if before {
		return injected(OpDelete, name, false)
	}
	err := f.Store.Delete(ctx, name)
	if after {
		return injected(OpDelete, name, true)
	}
	return err
}

// Exists implements trajstore.Store.
func (f *Faulty) Exists(ctx context.Context, name string) (bool, error) {
	before, after := f.take(OpExists)
	if before {
		return false, injected(OpExists, name, false)
	}
	ok, err := f.Store.Exists(ctx, name)
	if after {
		return false, injected(OpExists, name, true)
	}
	return ok, err
}

// Entries passes to Store's Entries when it is an Inspector, so that the
// suite checks the backend through a Faulty too; otherwise it returns nil.
func (f *Faulty) Entries(ctx context.Context) ([]string, error) {
	if in, ok := f.Store.(Inspector); ok {
		return in.Entries(ctx)
	}
	return nil, nil
}

var _ trajstore.Store = (*Faulty)(nil)
