package trajstore

import (
	"context"
	"sync"
)

// nameLocks serializes the writers of one name in one process, waiting for
// a lock no longer than the caller's context. An entry lives while someone
// holds or waits for it.
type nameLocks struct {
	mu sync.Mutex
	m  map[string]*nameLock
}

type nameLock struct {
	sem  chan struct{} // holds one token while locked
	refs int           // holders and waiters
}

func newNameLocks() *nameLocks { return &nameLocks{m: make(map[string]*nameLock)} }

// lock blocks until name is locked for the caller, or ctx ends. The
// returned function unlocks it and must be called exactly once.
func (l *nameLocks) lock(ctx context.Context, name string) (func(), error) {
	l.mu.Lock()
	e := l.m[name]
	if e == nil {
		e = &nameLock{sem: make(chan struct{}, 1)}
		l.m[name] = e
	}
	e.refs++
	l.mu.Unlock()
	select {
	case e.sem <- struct{}{}:
		return func() { <-e.sem; l.release(name, e) }, nil
	case <-ctx.Done():
		l.release(name, e)
		return nil, ctx.Err()
	}
}

func (l *nameLocks) release(name string, e *nameLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(l.m, name)
	}
}
