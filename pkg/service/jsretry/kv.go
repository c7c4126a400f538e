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
