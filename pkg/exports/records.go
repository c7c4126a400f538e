package exports

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentmesh/agentmesh/pkg/jsretry"
	"github.com/agentmesh/agentmesh/pkg/leader"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotFound is returned for a run that has no export record.
var ErrNotFound = errors.New("export not found")

// ErrChanged is returned by a conditional write or delete whose record
// another writer changed since it was read.
var ErrChanged = errors.New("export record changed since it was read")

// Bytes is what the records need of the trajectory store
// (pkg/exporter/trajstore.Store): deleting a name that is absent is success.
type Bytes interface {
	Delete(ctx context.Context, name string) error
	Exists(ctx context.Context, name string) (bool, error)
}

// Entry is an export record with the revision it was read at.
type Entry struct {
	Record wire.ExportRecord
	Rev    uint64
}

// Records reads and writes the agentmesh_exports bucket.
type Records struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	bucket string
}

// Open returns the records of names' exports bucket, which
// topology.Ensure creates.
func Open(ctx context.Context, js jetstream.JetStream, names subject.Names) (*Records, error) {
	kv, err := js.KeyValue(ctx, names.ExportsBucket())
	if err != nil {
		return nil, fmt.Errorf("exports bucket %s: %w", names.ExportsBucket(), err)
	}
	return &Records{js: js, kv: kv, bucket: names.ExportsBucket()}, nil
}

// Get reads the run's export record from the bucket's stream leader.
func (r *Records) Get(ctx context.Context, tenant, runID string) (Entry, error) {
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("run_id", runID)); err != nil {
		return Entry{}, err
	}
	return r.get(ctx, subject.RunKey(tenant, runID))
}

func (r *Records) get(ctx context.Context, key string) (Entry, error) {
	type read struct {
		b   []byte
		rev uint64
	}
	got, err := jsretry.Do(ctx, func(ctx context.Context) (read, error) {
		b, rev, err := leader.KeyValue(ctx, r.js, r.bucket, key)
		return read{b, rev}, err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Entry{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("read export %s: %w", key, err)
	}
	rec, err := wire.Decode[wire.ExportRecord](got.b)
	if err != nil {
		return Entry{}, fmt.Errorf("export %s: %w", key, err)
	}
	return Entry{Record: rec, Rev: got.rev}, nil
}

// List returns every export record, of one tenant if tenant is not
// empty, sorted by tenant and run id. A record deleted while it is listed
// is left out.
func (r *Records) List(ctx context.Context, tenant string) ([]Entry, error) {
	if tenant != "" {
		if err := subject.ValidToken("tenant", tenant); err != nil {
			return nil, err
		}
	}
	keys, err := jsretry.Do(ctx, func(ctx context.Context) ([]string, error) {
		if tenant != "" {
			lister, err := r.kv.ListKeysFiltered(ctx, tenant+".*")
			if err != nil {
				return nil, err
			}
			return collect(lister)
		}
		lister, err := r.kv.ListKeys(ctx)
		if err != nil {
			return nil, err
		}
		return collect(lister)
	})
	if err != nil {
		return nil, fmt.Errorf("list exports: %w", err)
	}
	slices.Sort(keys)
	out := make([]Entry, 0, len(keys))
	for _, k := range keys {
		e, err := r.get(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func collect(l jetstream.KeyLister) ([]string, error) {
	var keys []string
	for k := range l.Keys() {
		keys = append(keys, k)
	}
	// The listing ends by itself once it has every key; stopping it then
	// only reports the subscription gone.
	_ = l.Stop()
	return keys, nil
}

// Begin writes rec, not yet stored, as the run's record: it creates the
// record, or replaces an unstored one read at rev (an exporter that died
// half way, or one that built other bytes). It returns the new revision.
// A record created or changed by another writer meanwhile is ErrChanged.
func (r *Records) Begin(ctx context.Context, rec wire.ExportRecord, rev uint64) (uint64, error) {
	rec.V, rec.Stored = wire.Version, false
	return r.write(ctx, rec, rev)
}

// Finish marks the record read at rev stored, with its created and
// expires times, and returns the new revision (ErrChanged if another
// writer changed it).
func (r *Records) Finish(ctx context.Context, rec wire.ExportRecord, rev uint64) (uint64, error) {
	rec.V, rec.Stored = wire.Version, true
	return r.write(ctx, rec, rev)
}

func (r *Records) write(ctx context.Context, rec wire.ExportRecord, rev uint64) (uint64, error) {
	key := subject.RunKey(rec.Tenant, rec.RunID)
	b, err := wire.Marshal(&rec)
	if err != nil {
		return 0, err
	}
	var tried bool // an attempt failed in a way that may have been applied
	n, err := jsretry.Do(ctx, func(ctx context.Context) (uint64, error) {
		var n uint64
		var err error
		if rev == 0 {
			n, err = r.kv.Create(ctx, key, b)
		} else {
			n, err = r.kv.Update(ctx, key, b, rev)
		}
		tried = tried || jsretry.Transient(err)
		return n, err
	})
	if conflict(err) {
		if tried {
			// An earlier attempt may have written it and lost its reply.
			if e, gerr := r.get(ctx, key); gerr == nil && sameRecord(e.Record, rec) {
				return e.Rev, nil
			}
		}
		return 0, fmt.Errorf("%w: %s", ErrChanged, key)
	}
	if err != nil {
		return 0, fmt.Errorf("write export %s: %w", key, err)
	}
	return n, nil
}

func sameRecord(a, b wire.ExportRecord) bool { return a == b }

func conflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
}

// Remove removes an export in two phases: it deletes the bytes, checks
// they are gone, and only then deletes the record, on the revision it was
// read at. A failed byte delete keeps the record for the next sweep. It
// reports whether this call removed the record: of several sweepers
// removing one export, exactly one does (the others get ErrChanged or
// find it gone).
func (r *Records) Remove(ctx context.Context, store Bytes, e Entry) (bool, error) {
	key := subject.RunKey(e.Record.Tenant, e.Record.RunID)
	if e.Record.Object != "" {
		if err := store.Delete(ctx, e.Record.Object); err != nil {
			return false, fmt.Errorf("delete the bytes of export %s (%s): %w", key, e.Record.Object, err)
		}
		still, err := store.Exists(ctx, e.Record.Object)
		if err != nil {
			return false, fmt.Errorf("check the bytes of export %s are gone: %w", key, err)
		}
		if still {
			return false, fmt.Errorf("the bytes of export %s (%s) are still stored after their delete", key, e.Record.Object)
		}
	}
	var tried bool // an attempt failed in a way that may have been applied
	_, err := jsretry.Do(ctx, func(ctx context.Context) (struct{}, error) {
		err := r.kv.Purge(ctx, key, jetstream.LastRevision(e.Rev))
		tried = tried || jsretry.Transient(err)
		return struct{}{}, err
	})
	switch {
	case err == nil:
		return true, nil
	case conflict(err):
		if tried {
			// An earlier attempt may have purged it and lost its reply.
			if _, gerr := r.get(ctx, key); errors.Is(gerr, ErrNotFound) {
				return true, nil
			}
		}
		return false, fmt.Errorf("%w: %s", ErrChanged, key)
	}
	return false, fmt.Errorf("delete export record %s: %w", key, err)
}

// Key is a record's key, <tenant>.<run_id>.
func Key(rec wire.ExportRecord) string { return subject.RunKey(rec.Tenant, rec.RunID) }
