package artifacts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Default limits.
const (
	DefaultSnapshotLimit int64 = 64 << 20 // a pushed workspace snapshot
	DefaultArtifactLimit int64 = 64 << 20 // one artifact of a run
)

// MaxNameLen bounds an artifact's name.
const MaxNameLen = 128

// Config configures a Store. Its zero value with Names set is complete.
type Config struct {
	Names subject.Names
	// SnapshotLimit bounds a snapshot pushed or opened (default
	// DefaultSnapshotLimit).
	SnapshotLimit int64
	// ArtifactLimit bounds one artifact put (default DefaultArtifactLimit).
	ArtifactLimit int64
	// TempDir is where bytes are spooled, within their limit, before they
	// are written (default os.TempDir()).
	TempDir string
}

// Store reads and writes snapshots, artifacts and heads. It is safe for
// concurrent use; every method blocks until JetStream answered or ctx
// ended.
type Store struct {
	js        jetstream.JetStream
	cfg       Config
	records   jetstream.KeyValue
	heads     jetstream.KeyValue
	bytes     *objects
	snapshots *objects
	retention time.Duration
	now       func() time.Time
}

// Open opens the store of names' buckets, which topology.Ensure creates,
// with the default limits.
func Open(ctx context.Context, js jetstream.JetStream, names subject.Names) (*Store, error) {
	return OpenConfig(ctx, js, Config{Names: names})
}

// OpenConfig is Open with cfg's limits. It reads the artifact retention the
// buckets were ensured with (topology.ArtifactRetention).
func OpenConfig(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	if cfg.SnapshotLimit <= 0 {
		cfg.SnapshotLimit = DefaultSnapshotLimit
	}
	if cfg.ArtifactLimit <= 0 {
		cfg.ArtifactLimit = DefaultArtifactLimit
	}
	n := cfg.Names
	s := &Store{js: js, cfg: cfg, now: time.Now}
	var err error
	if s.records, err = js.KeyValue(ctx, n.ArtifactsBucket()); err != nil {
		return nil, fmt.Errorf("artifacts bucket %s: %w", n.ArtifactsBucket(), err)
	}
	if s.heads, err = js.KeyValue(ctx, n.HeadsBucket()); err != nil {
		return nil, fmt.Errorf("heads bucket %s: %w", n.HeadsBucket(), err)
	}
	if s.bytes, err = openObjects(ctx, js, n.ArtifactStore()); err != nil {
		return nil, err
	}
	if s.snapshots, err = openObjects(ctx, js, n.SnapshotStore()); err != nil {
		return nil, err
	}
	if s.retention, err = topology.ArtifactRetention(ctx, js, n); err != nil {
		return nil, err
	}
	return s, nil
}

// Retention is how long a stored artifact is kept.
func (s *Store) Retention() time.Duration { return s.retention }

// Record is a run's artifact as its record says.
type Record struct {
	Tenant string `json:"tenant"`
	RunID  string `json:"run_id"`
	// Name is the artifact's name within the run, such as "patch".
	Name string `json:"name"`
	// Object is the name of its bytes in the artifact store:
	// <tenant>/<run_id>/<name>/<sha256>.
	Object string `json:"object"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Stored is set once the bytes are completely stored.
	Stored bool `json:"stored"`
	// Began is when the write began (unix ms): a record unstored for long
	// is one whose writer died half way.
	Began int64 `json:"began"`
	// Created and Expires are set when it is stored (unix ms).
	Created int64 `json:"created,omitempty"`
	Expires int64 `json:"expires,omitempty"`
	// Withdrawn marks it for removal by the next sweep.
	Withdrawn bool `json:"withdrawn,omitempty"`
	// Replaces is the object of an earlier put of the name this write
	// replaces, deleted before the new bytes are stored.
	Replaces string `json:"replaces,omitempty"`
	// Rev is the record's revision when it was read.
	Rev uint64 `json:"-"`
}

// Ref is the record as a status names it.
func (r Record) Ref() wire.ArtifactRef {
	return wire.ArtifactRef{Name: r.Object, SHA256: r.SHA256, Size: r.Size}
}

// Key is the record's key, <tenant>.<run_id>.<name>.
func (r Record) Key() string { return recordKey(r.Tenant, r.RunID, r.Name) }

func recordKey(tenant, runID, name string) string { return subject.RunKey(tenant, runID) + "." + name }

// objects returns the objects the record may claim.
func (r Record) objects() []string {
	var out []string
	for _, o := range []string{r.Replaces, r.Object} {
		if o != "" && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// ValidName checks an artifact name: 1 to MaxNameLen characters of
// [A-Za-z0-9_.-], neither starting nor ending with "." and without "..".
func ValidName(name string) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("%w: name must be 1 to %d characters, got %d", ErrInvalidName, MaxNameLen, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("%w: name %q has %q at %d; allowed are [A-Za-z0-9_.-]", ErrInvalidName, name, c, i)
		}
	}
	if name[0] == '.' || name[len(name)-1] == '.' || strings.Contains(name, "..") {
		return fmt.Errorf("%w: name %q starts or ends with \".\" or holds \"..\"", ErrInvalidName, name)
	}
	return nil
}

func validRun(tenant, runID string) error {
	return errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("run_id", runID))
}

// Put stores r as the run's artifact name, in two phases: the record is
// written unstored, then the bytes, then the record is marked stored,
// expiring after the retention. The bytes are first read to a temporary
// file within the artifact limit: over it, Put fails with a
// *TooLargeError having written nothing. Putting the same bytes again is a
// no-op success; other bytes replace the earlier ones (their record goes
// unstored while they are replaced). A failed Put leaves at most an
// unstored record, which the sweep removes with its bytes once abandoned.
func (s *Store) Put(ctx context.Context, tenant, runID, name string, r io.Reader) (wire.ArtifactRef, error) {
	if err := errors.Join(validRun(tenant, runID), ValidName(name)); err != nil {
		return wire.ArtifactRef{}, err
	}
	sp, err := spool(s.cfg.TempDir, r, s.cfg.ArtifactLimit, "artifact "+name)
	if err != nil {
		return wire.ArtifactRef{}, err
	}
	defer sp.close()
	rec := Record{Tenant: tenant, RunID: runID, Name: name, SHA256: sp.hex(), Size: sp.size,
		Object: tenant + "/" + runID + "/" + name + "/" + sp.hex()}
	old, err := s.get(ctx, rec.Key())
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return wire.ArtifactRef{}, err
	case old.Stored && !old.Withdrawn && old.Object == rec.Object:
		return old.Ref(), nil
	case old.Withdrawn:
		return wire.ArtifactRef{}, fmt.Errorf("put %s: %w: the run's artifacts are withdrawn", rec.Key(), ErrChanged)
	default:
		if old.Replaces != "" && old.Replaces != rec.Object && old.Replaces != old.Object {
			// An earlier replacement died half way: its old bytes are no
			// one's.
			if err := s.bytes.Delete(ctx, old.Replaces); err != nil {
				return wire.ArtifactRef{}, err
			}
		}
		if old.Object != rec.Object {
			rec.Replaces = old.Object
		}
	}
	rec.Began = s.now().UnixMilli()
	rev, err := s.write(ctx, rec, old.Rev)
	if err != nil {
		return wire.ArtifactRef{}, err
	}
	if rec.Replaces != "" {
		if err := s.bytes.Delete(ctx, rec.Replaces); err != nil {
			return wire.ArtifactRef{}, err
		}
		rec.Replaces = ""
	}
	if err := s.bytes.put(ctx, rec.Object, sp, false); err != nil {
		return wire.ArtifactRef{}, err
	}
	now := s.now()
	rec.Stored, rec.Created, rec.Expires = true, now.UnixMilli(), now.Add(s.retention).UnixMilli()
	if _, err := s.write(ctx, rec, rev); err != nil {
		return wire.ArtifactRef{}, err
	}
	return rec.Ref(), nil
}

// write creates rec (rev 0) or replaces the record read at rev, and returns
// the new revision; ErrChanged if another writer changed it meanwhile.
func (s *Store) write(ctx context.Context, rec Record, rev uint64) (uint64, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	key := rec.Key()
	n, err := jsretry.Write(ctx, s.records, key, b, rev, func() (uint64, bool) {
		got, gerr := s.get(ctx, key)
		return got.Rev, gerr == nil && sameRecord(got, rec)
	})
	if errors.Is(err, jsretry.ErrConflict) {
		return 0, fmt.Errorf("%w: %s", ErrChanged, key)
	}
	if err != nil {
		return 0, fmt.Errorf("write artifact record %s: %w", key, err)
	}
	return n, nil
}

func sameRecord(a, b Record) bool {
	a.Rev, b.Rev = 0, 0
	return a == b
}

func (s *Store) get(ctx context.Context, key string) (Record, error) {
	e, err := jsretry.Do(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
		return s.records.Get(ctx, key)
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return Record{}, fmt.Errorf("read artifact record %s: %w", key, err)
	}
	var rec Record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return Record{}, fmt.Errorf("artifact record %s: %w", key, err)
	}
	rec.Rev = e.Revision()
	return rec, nil
}

// list returns the records whose keys match filter, sorted by key. A
// record deleted while it is listed is left out.
func (s *Store) list(ctx context.Context, filter string) ([]Record, error) {
	out, _, err := s.listN(ctx, filter, 0, nil)
	return out, err
}

// listN is list of at most limit records (0: every one, sorted by key)
// that keep accepts (nil: all), in the order they were last written. A
// bounded listing reads no more than tenantScan(limit) keys, so its cost
// does not grow with the bucket; more says some were left (or not
// examined).
func (s *Store) listN(ctx context.Context, filter string, limit int, keep func(Record) bool) (out []Record, more bool, err error) {
	n := 0
	if limit > 0 {
		n = tenantScan(limit)
	}
	keys, err := jsretry.Keys(ctx, s.records, filter, n)
	if err != nil {
		return nil, false, fmt.Errorf("list artifact records %s: %w", filter, err)
	}
	if limit == 0 {
		slices.Sort(keys)
	}
	out = make([]Record, 0, len(keys))
	for _, k := range keys {
		rec, err := s.get(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if keep != nil && !keep(rec) {
			continue
		}
		if limit > 0 && len(out) == limit {
			return out, true, nil
		}
		out = append(out, rec)
	}
	return out, n > 0 && len(keys) == n, nil
}

// tenantScan is how many keys a listing of limit records examines: the
// records past the limit that tell there are more, and room for records
// not kept (an artifact being written, or withdrawn and not yet swept).
func tenantScan(limit int) int { return 4*limit + 16 }

// Tenant returns up to limit (at least 1) of tenant's stored artifacts,
// or every tenant's when tenant is "", in the order they were last
// written (the oldest, the soonest to expire, first), and whether there
// are more: it examines at most tenantScan(limit) records.
func (s *Store) Tenant(ctx context.Context, tenant string, limit int) ([]Record, bool, error) {
	filter := ">"
	if tenant != "" {
		if err := subject.ValidToken("tenant", tenant); err != nil {
			return nil, false, err
		}
		filter = tenant + ".>"
	}
	return s.listN(ctx, filter, max(limit, 1), func(r Record) bool { return r.Stored && !r.Withdrawn })
}

// List returns the run's stored artifacts, sorted by name: those written
// completely and not withdrawn.
func (s *Store) List(ctx context.Context, tenant, runID string) ([]Record, error) {
	if err := validRun(tenant, runID); err != nil {
		return nil, err
	}
	all, err := s.list(ctx, subject.RunKey(tenant, runID)+".>")
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(r Record) bool { return !r.Stored || r.Withdrawn }), nil
}

// Records returns every artifact record, stored or not, withdrawn or not,
// sorted by key: what a sweep looks at.
func (s *Store) Records(ctx context.Context) ([]Record, error) {
	return s.list(ctx, ">")
}

// Open returns a reader of the run's artifact name and its record. The
// reader fails with ErrCorrupt at the end of bytes whose SHA-256 or length
// is not the record's; the caller closes it, and ctx must last while it
// reads. An artifact not stored or withdrawn is ErrNotFound.
func (s *Store) Open(ctx context.Context, tenant, runID, name string) (io.ReadCloser, Record, error) {
	if err := errors.Join(validRun(tenant, runID), ValidName(name)); err != nil {
		return nil, Record{}, err
	}
	rec, err := s.get(ctx, recordKey(tenant, runID, name))
	if err != nil {
		return nil, Record{}, err
	}
	if !rec.Stored || rec.Withdrawn {
		return nil, Record{}, fmt.Errorf("%w: %s is not stored", ErrNotFound, rec.Key())
	}
	rc, err := s.bytes.open(ctx, rec.Object, rec.SHA256, rec.Size)
	if err != nil {
		return nil, Record{}, err
	}
	return rc, rec, nil
}

// Withdraw marks every artifact of the run for removal: they are no longer
// listed or opened, and the next sweep deletes their bytes, then their
// records. It is idempotent; a run without artifacts is success.
func (s *Store) Withdraw(ctx context.Context, tenant, runID string) error {
	if err := validRun(tenant, runID); err != nil {
		return err
	}
	for range 5 {
		all, err := s.list(ctx, subject.RunKey(tenant, runID)+".>")
		if err != nil {
			return err
		}
		var changed bool
		for _, rec := range all {
			if rec.Withdrawn {
				continue
			}
			rec.Withdrawn = true
			if _, err := s.write(ctx, rec, rec.Rev); errors.Is(err, ErrChanged) {
				changed = true // a writer moved it on: read again
			} else if err != nil {
				return err
			}
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("withdraw %s: %w five times in a row", subject.RunKey(tenant, runID), ErrChanged)
}
