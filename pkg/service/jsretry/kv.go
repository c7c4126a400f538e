package jsretry

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrConflict is a conditional key-value write or purge that found the key
// created, changed or deleted by another writer since it was read.
var ErrConflict = errors.New("key changed since it was read")

// Conflict reports whether err is JetStream refusing a conditional write:
// the key exists (a create) or is at another revision (an update, a purge).
func Conflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
}

// Write creates key with b (rev 0) or updates the key read at rev, through
// transient errors (Do), and returns the new revision. A conflict is
// ErrConflict, unless an earlier attempt failed in a way that may have
// been applied and applied (called then) finds b stored: it returns the
// key's revision and true when it does.
func Write(ctx context.Context, kv jetstream.KeyValue, key string, b []byte, rev uint64, applied func() (uint64, bool)) (uint64, error) {
	var tried bool // an attempt failed in a way that may have been applied
	n, err := Do(ctx, func(ctx context.Context) (uint64, error) {
		var n uint64
		var err error
		if rev == 0 {
			n, err = kv.Create(ctx, key, b)
		} else {
			n, err = kv.Update(ctx, key, b, rev)
		}
		tried = tried || Transient(err)
		return n, err
	})
	if Conflict(err) {
		if tried {
			// An earlier attempt may have written it and lost its reply.
			if got, ok := applied(); ok {
				return got, nil
			}
		}
		return 0, ErrConflict
	}
	return n, err
}

// Purge purges key at revision rev, through transient errors (Do). A
// conflict is ErrConflict, unless an earlier attempt failed in a way that
// may have been applied and gone (called then) finds the key gone: then the
// purge is taken as done.
func Purge(ctx context.Context, kv jetstream.KeyValue, key string, rev uint64, gone func() bool) error {
	var tried bool // an attempt failed in a way that may have been applied
	_, err := Do(ctx, func(ctx context.Context) (struct{}, error) {
		err := kv.Purge(ctx, key, jetstream.LastRevision(rev))
		tried = tried || Transient(err)
		return struct{}{}, err
	})
	if Conflict(err) {
		if tried && gone() {
			return nil
		}
		return ErrConflict
	}
	return err
}

// Keys lists the keys of kv that filter matches, in the order they were
// last written, through transient errors (Do): at most n of them (0:
// every one), reading no further than the n-th, so a bounded listing costs
// what it lists, not what the bucket holds. No key is ErrNoKeysFound's
// empty list, not an error.
func Keys(ctx context.Context, kv jetstream.KeyValue, filter string, n int) ([]string, error) {
	keys, err := Do(ctx, func(ctx context.Context) ([]string, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		l, err := kv.ListKeysFiltered(ctx, filter)
		if err != nil {
			return nil, err
		}
		var keys []string
		for k := range l.Keys() {
			keys = append(keys, k)
			if n > 0 && len(keys) == n {
				break
			}
		}
		// The lister's goroutine ends once the context does; what it
		// still hands over meanwhile is drained, so it never blocks.
		cancel()
		for range l.Keys() {
		}
		_ = l.Stop()
		return keys, nil
	})
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	return keys, err
}
