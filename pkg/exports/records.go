package exports

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/service/leader"
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
	out, _, err := r.ListN(ctx, tenant, 0)
	return out, err
}

// ListN is List of at most limit records (0: every one, sorted by tenant
// and run id), in the order they were last written (the oldest, the
// soonest to expire, first): it lists no more than limit+1 keys and reads
// the records only up to the limit, so its cost does not grow with the
// bucket; more says some were left.
func (r *Records) ListN(ctx context.Context, tenant string, limit int) (out []Entry, more bool, err error) {
	filter := ">"
	if tenant != "" {
		if err := subject.ValidToken("tenant", tenant); err != nil {
			return nil, false, err
		}
		filter = tenant + ".*"
	}
	n := 0
	if limit > 0 {
		n = limit + 1
	}
	keys, err := jsretry.Keys(ctx, r.kv, filter, n)
	if err != nil {
		return nil, false, fmt.Errorf("list exports: %w", err)
	}
	if limit == 0 {
		slices.Sort(keys)
	}
	out = make([]Entry, 0, len(keys))
	for _, k := range keys {
		if limit > 0 && len(out) == limit {
			return out, true, nil
		}
		e, err := r.get(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		out = append(out, e)
	}
	return out, false, nil
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
	n, err := jsretry.Write(ctx, r.kv, key, b, rev, func() (uint64, bool) {
		e, gerr := r.get(ctx, key)
		return e.Rev, gerr == nil && sameRecord(e.Record, rec)
	})
	if errors.Is(err, jsretry.ErrConflict) {
		return 0, fmt.Errorf("%w: %s", ErrChanged, key)
	}
	if err != nil {
		return 0, fmt.Errorf("write export %s: %w", key, err)
	}
	return n, nil
}

func sameRecord(a, b wire.ExportRecord) bool { return a == b }

// Remove removes an export in two phases: it deletes the bytes, checks
// they are gone, and only then deletes the record, on the revision it was
// read at. A failed byte delete keeps the record for the next sweep. It
// reports whether this call removed the record: of several sweepers
// removing one export, exactly one does (the others get ErrChanged or
// find it gone).
func (r *Records) Remove(ctx context.Context, store Bytes, e Entry) (bool, error) {
	key := subject.RunKey(e.Record.Tenant, e.Record.RunID)
	rm := Removal{What: "export " + key, Store: store, KV: r.kv, Key: key, Rev: e.Rev, Changed: ErrChanged,
		Gone: func() bool {
			_, err := r.get(ctx, key)
			return errors.Is(err, ErrNotFound)
		}}
	if e.Record.Object != "" {
		rm.Objects = []string{e.Record.Object}
	}
	return rm.Do(ctx)
}

// Removal is one two-phase removal of an expiring record and the bytes it
// claims, whatever their origin (a trajectory export, a run's artifact).
type Removal struct {
	What    string   // what is removed, for errors: "export acme.run-1"
	Store   Bytes    // where the bytes are
	Objects []string // the bytes' names in Store
	KV      jetstream.KeyValue
	Key     string // the record's key in KV
	Rev     uint64 // the revision the record was read at
	Changed error  // the sentinel a record changed since Rev is wrapped in
	// Gone reports whether the record is gone; it is asked only after a
	// purge attempt that may have been applied lost its answer.
	Gone func() bool
}

// Do deletes the bytes, checks they are gone, and only then purges the
// record, at Rev. A failed byte delete keeps the record. It reports
// whether this call removed the record.
func (rm Removal) Do(ctx context.Context) (bool, error) {
	for _, name := range rm.Objects {
		if err := DeleteBytes(ctx, rm.Store, rm.What, name); err != nil {
			return false, err
		}
	}
	err := jsretry.Purge(ctx, rm.KV, rm.Key, rm.Rev, rm.Gone)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jsretry.ErrConflict):
		return false, fmt.Errorf("%w: %s", rm.Changed, rm.Key)
	}
	return false, fmt.Errorf("delete the record of %s: %w", rm.What, err)
}

// DeleteBytes is the first phase of a removal: it deletes the bytes name of
// what (an export, an artifact) from store and checks they are gone.
func DeleteBytes(ctx context.Context, store Bytes, what, name string) error {
	if err := store.Delete(ctx, name); err != nil {
		return fmt.Errorf("delete the bytes of %s (%s): %w", what, name, err)
	}
	still, err := store.Exists(ctx, name)
	if err != nil {
		return fmt.Errorf("check the bytes of %s are gone: %w", what, err)
	}
	if still {
		return fmt.Errorf("the bytes of %s (%s) are still stored after their delete", what, name)
	}
	return nil
}

// Key is a record's key, <tenant>.<run_id>.
func Key(rec wire.ExportRecord) string { return subject.RunKey(rec.Tenant, rec.RunID) }
