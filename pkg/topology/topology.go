// Package topology creates or updates every JetStream stream, key-value
// bucket and object store of docs/contract.md §2. Ensure is idempotent, so
// whichever service starts first creates the topology and the others find it.
package topology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("invalid topology config")

// DefaultRunRetention is how long an ended run's record is kept when
// Config.RunRetention is zero.
const DefaultRunRetention = 7 * 24 * time.Hour

// RetentionMetadata is the key, in the runs bucket's stream metadata, of
// the retention of ended runs' records (a time.Duration string).
const RetentionMetadata = "agentmesh_run_retention"

// Config sizes the resources. The zero value is completed by Ensure with the
// defaults noted on each field.
type Config struct {
	Names subject.Names
	// Replicas of every stream and bucket (default 1; 3 on a cluster).
	Replicas int
	// EventsMaxAge is how long run events are kept (default 24h).
	EventsMaxAge time.Duration
	// EventsDuplicates is the dedupe window of events (default 2m).
	EventsDuplicates time.Duration
	// WorkQueueMax bounds the queued work of one adapter over all tenants
	// (default 1024). The router enforces it (pkg/router); it is here so
	// every service reads one value, and so the tenant bound can be
	// checked against it.
	WorkQueueMax int64
	// WorkQueueTenantMax bounds the queued work of one tenant for one
	// adapter (default 256, at most WorkQueueMax): the stream's per-subject
	// limit on agentmesh.work.<transport>.<adapter>.<tenant>, discarding
	// new work, which the router reports as AdmissionRejected. One
	// tenant's burst fills only its own queue.
	WorkQueueTenantMax int64
	// LeaseTTL is how long a lease lives without a heartbeat (default 30s).
	LeaseTTL time.Duration
	// RunRetention is how long a run's record is kept once the run ended
	// (default DefaultRunRetention; at least 1s and at least EventsMaxAge,
	// so a run id cannot be used again while its old events are kept).
	// The terminal record is written with it as its per-message TTL
	// (pkg/runs); a record of a run that has not ended never expires. It
	// is kept in the runs bucket's metadata, so every service writes with
	// the value the bucket was last ensured with (RunRetention reads it).
	RunRetention time.Duration
	// ArtifactRetention is how long a run's artifacts, a pushed workspace
	// snapshot and a conversation's head are kept (default
	// DefaultArtifactRetention, at least 1m). A stored artifact's record
	// is written expiring that long after it was stored, and the sweeper
	// removes it, bytes first (pkg/artifacts); the snapshots' object
	// store and the heads bucket have it as their max age, counted from a
	// snapshot's last push and a head's last write. It is kept in the
	// artifacts bucket's metadata (ArtifactRetention reads it).
	ArtifactRetention time.Duration
	// Storage of every resource (default file).
	Storage jetstream.StorageType
	// Log is where Ensure logs that it waits for JetStream (a cluster
	// forming or recovering); nil: it waits without a word.
	Log *slog.Logger
}

// DefaultArtifactRetention is how long artifacts, snapshots and heads are
// kept when Config.ArtifactRetention is zero.
const DefaultArtifactRetention = 7 * 24 * time.Hour

// ArtifactRetentionMetadata is the key, in the artifacts bucket's stream
// metadata, of the artifacts' retention (a time.Duration string).
const ArtifactRetentionMetadata = "agentmesh_artifact_retention"

func (c *Config) setDefaults() {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.EventsMaxAge == 0 {
		c.EventsMaxAge = 24 * time.Hour
	}
	if c.EventsDuplicates == 0 {
		c.EventsDuplicates = 2 * time.Minute
	}
	if c.WorkQueueMax == 0 {
		c.WorkQueueMax = 1024
	}
	if c.WorkQueueTenantMax == 0 {
		c.WorkQueueTenantMax = min(256, c.WorkQueueMax)
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 30 * time.Second
	}
	if c.RunRetention == 0 {
		c.RunRetention = DefaultRunRetention
	}
	if c.ArtifactRetention == 0 {
		c.ArtifactRetention = DefaultArtifactRetention
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("%w: replicas must be 1 to 5, got %d", ErrInvalidConfig, c.Replicas)
	case c.EventsDuplicates > c.EventsMaxAge:
		return fmt.Errorf("%w: events dedupe window %s exceeds events max age %s", ErrInvalidConfig, c.EventsDuplicates, c.EventsMaxAge)
	case c.WorkQueueMax < 1:
		return fmt.Errorf("%w: work queue max must be > 0, got %d", ErrInvalidConfig, c.WorkQueueMax)
	case c.WorkQueueTenantMax < 1 || c.WorkQueueTenantMax > c.WorkQueueMax:
		return fmt.Errorf("%w: work queue tenant max must be in [1, work queue max %d], got %d", ErrInvalidConfig, c.WorkQueueMax, c.WorkQueueTenantMax)
	case c.LeaseTTL < time.Second:
		return fmt.Errorf("%w: lease TTL must be at least 1s, got %s", ErrInvalidConfig, c.LeaseTTL)
	case c.RunRetention < time.Second || c.RunRetention < c.EventsMaxAge:
		return fmt.Errorf("%w: run retention must be at least 1s and at least the events max age %s, got %s", ErrInvalidConfig, c.EventsMaxAge, c.RunRetention)
	case c.ArtifactRetention < time.Minute:
		return fmt.Errorf("%w: artifact retention must be at least 1m, got %s", ErrInvalidConfig, c.ArtifactRetention)
	}
	if c.Names.Prefix != "" {
		if err := subject.ValidToken("prefix", c.Names.Prefix); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
	}
	return nil
}

// Ensure creates or updates every resource. It is idempotent and safe to
// call concurrently from several processes. It blocks until all resources
// exist or ctx ends: while JetStream is not ready (a cluster forming or
// recovering, no server reachable: jsretry.NotYet) it tries again with
// backoff, logging the wait on cfg.Log (jsretry.Await). Each request keeps
// the JetStream API's timeout. An invalid Config (ErrInvalidConfig) or an
// error that is not NotYet, such as a stream that exists with a config
// the server will not change, is returned at once.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	_, err := jsretry.Await(ctx, js.Conn(), cfg.Log, "topology", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, ensure(ctx, js, cfg)
	})
	return err
}

// ensure is one attempt of Ensure, on a valid Config with its defaults.
func ensure(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	n := cfg.Names
	// The submit stream keeps no dedupe window: JetStream's is
	// stream-wide, keyed by Nats-Msg-Id alone, so within it one tenant's
	// submission would suppress another's of the same id (a v1 submitter's
	// bare run id, or any id a submitter sets). The run record, keyed
	// <tenant>.<run_id>, is what makes a submission idempotent
	// (docs/contract.md §4.1). JetStream lets only a stream that sources
	// another go without a window, so the submit stream sources an empty
	// anchor stream, through a filter that takes nothing from it.
	streams := []jetstream.StreamConfig{{
		Name:       n.SubmitAnchorStream(),
		Subjects:   []string{n.SubmitAnchor()},
		MaxMsgs:    1,
		Duplicates: 2 * time.Minute, // the server's default, stated so that Ensure finds it unchanged
		Storage:    cfg.Storage,
		Replicas:   cfg.Replicas,
	}, {
		Name:      n.SubmitStream(),
		Subjects:  []string{n.SubmitAll()},
		Retention: jetstream.WorkQueuePolicy,
		Sources:   []*jetstream.StreamSource{{Name: n.SubmitAnchorStream(), FilterSubject: n.SubmitAnchor() + ".none"}},
		Storage:   cfg.Storage,
		Replicas:  cfg.Replicas,
	}, {
		Name:                 n.WorkStream(),
		Subjects:             []string{n.WorkAll()},
		Retention:            jetstream.WorkQueuePolicy,
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
		MaxMsgsPerSubject:    cfg.WorkQueueTenantMax,
		Duplicates:           2 * time.Minute,
		Storage:              cfg.Storage,
		Replicas:             cfg.Replicas,
	}, {
		Name:        n.EventsStream(),
		Subjects:    []string{n.EventsAll()},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      cfg.EventsMaxAge,
		Duplicates:  cfg.EventsDuplicates,
		Storage:     cfg.Storage,
		Replicas:    cfg.Replicas,
		AllowDirect: true,
	}}
	for _, sc := range streams {
		if err := ensureStream(ctx, js, sc); err != nil {
			return fmt.Errorf("ensure stream %s: %w", sc.Name, err)
		}
	}
	if err := awaitSources(ctx, js, n.SubmitStream()); err != nil {
		return fmt.Errorf("ensure stream %s: its source: %w", n.SubmitStream(), err)
	}
	// The runs bucket allows per-message TTLs (nats-server 2.11): an ended
	// run's record is written with the retention as its TTL (pkg/runs). It
	// has no subject delete markers: an expired record simply is not there
	// any more, as if it never was (docs/contract.md §4.12).
	buckets := []struct {
		jetstream.KeyValueConfig
		msgTTL bool
	}{
		{jetstream.KeyValueConfig{Bucket: n.RunsBucket(), History: 1, Description: "run records",
			Metadata: map[string]string{RetentionMetadata: cfg.RunRetention.String()}}, true},
		{jetstream.KeyValueConfig{Bucket: n.SessionsBucket(), History: 1, Description: "confirmed provider session per conversation"}, false},
		{jetstream.KeyValueConfig{Bucket: n.CheckpointsBucket(), History: 1, Description: "pin and provider-only continuation state per conversation"}, false},
		{jetstream.KeyValueConfig{Bucket: n.LeasesBucket(), History: 1, TTL: cfg.LeaseTTL, LimitMarkerTTL: cfg.LeaseTTL, Description: "heartbeats of running runs"}, false},
		{jetstream.KeyValueConfig{Bucket: n.ConsentBucket(), History: 1, Description: "export consent per principal"}, false},
		{jetstream.KeyValueConfig{Bucket: n.ExportsBucket(), History: 1, Description: "trajectory export metadata"}, false},
		{jetstream.KeyValueConfig{Bucket: n.RedactionBucket(), History: 1, Description: "tenant redaction rules"}, false},
		{jetstream.KeyValueConfig{Bucket: n.APIKeysBucket(), History: 1, Description: "HTTP gateway API keys, by the SHA-256 of each key"}, false},
		{jetstream.KeyValueConfig{Bucket: n.TurnsBucket(), History: 1, Description: "HTTP gateway turns: the mesh conversation of each response and history"}, false},
		// The spend ledger (docs/contract.md §12): the per-run entries are
		// folded into the rollups within moments, and kept SpendEntryAge
		// as the source of truth for a writer that was away; the rollups
		// and the limits are kept.
		{jetstream.KeyValueConfig{Bucket: n.SpendBucket(), History: 1, TTL: SpendEntryAge, Description: "spend of each ended run"}, false},
		{jetstream.KeyValueConfig{Bucket: n.LedgerBucket(), History: 1, Description: "spend rollups per tenant and UTC day"}, false},
		{jetstream.KeyValueConfig{Bucket: n.LimitsBucket(), History: 1, Description: "budgets, concurrency quotas and the runs admitted under them"}, false},
		{jetstream.KeyValueConfig{Bucket: n.ArtifactsBucket(), History: 1, Description: "records of runs' artifacts",
			Metadata: map[string]string{ArtifactRetentionMetadata: cfg.ArtifactRetention.String()}}, false},
		{jetstream.KeyValueConfig{Bucket: n.HeadsBucket(), History: 1, TTL: cfg.ArtifactRetention, Description: "what each conversation's next turn starts from"}, false},
		// A conversation's log of runs lives as long as run events do:
		// past that its turns are gone anyway.
		{jetstream.KeyValueConfig{Bucket: n.ConversationsBucket(), History: 1, TTL: cfg.EventsMaxAge, Description: "the runs of each conversation, in order"}, false},
	}
	for _, b := range buckets {
		kc := b.KeyValueConfig
		kc.Storage, kc.Replicas = cfg.Storage, cfg.Replicas
		if err := ensureBucket(ctx, js, kc, b.msgTTL); err != nil {
			return fmt.Errorf("ensure bucket %s: %w", kc.Bucket, err)
		}
	}
	stores := []jetstream.ObjectStoreConfig{
		{Bucket: n.TrajectoryStore(), Description: "redacted trajectories"},
		{Bucket: n.ArtifactStore(), Description: "bytes of runs' artifacts"},
		{Bucket: n.SnapshotStore(), Description: "workspace snapshots clients pushed", TTL: cfg.ArtifactRetention},
	}
	for _, oc := range stores {
		oc.Storage, oc.Replicas = cfg.Storage, cfg.Replicas
		if err := ensureObjectStore(ctx, js, oc); err != nil {
			return fmt.Errorf("ensure object store %s: %w", oc.Bucket, err)
		}
	}
	return nil
}

// ensureObjectStore is ensureStream for an object store: it creates the
// store, or updates it when its max age differs (the only setting of one
// that changes with the configuration).
func ensureObjectStore(ctx context.Context, js jetstream.JetStream, want jetstream.ObjectStoreConfig) error {
	obs, err := js.ObjectStore(ctx, want.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateOrUpdateObjectStore(ctx, want)
		return err
	}
	if err != nil {
		return err
	}
	st, err := obs.Status(ctx)
	if err != nil {
		return err
	}
	if st.TTL() == want.TTL {
		return nil
	}
	_, err = js.CreateOrUpdateObjectStore(ctx, want)
	return err
}

// SpendEntryAge is how long a run's spend entry is kept in the spend
// bucket: far longer than a ledger writer takes to fold it, and longer
// than the longest budget period.
const SpendEntryAge = 40 * 24 * time.Hour

// ensureStream creates the stream, or updates it only when a setting we
// own differs: services start concurrently, and a needless update of a
// stream others are already using is work (and, in nats-server 2.15, races
// with consumer creation under the race detector).
func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) error {
	st, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err = js.CreateOrUpdateStream(ctx, want); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("info: %w", err)
	}
	have := st.CachedInfo().Config
	if slices.Equal(have.Subjects, want.Subjects) && have.Retention == want.Retention && have.Discard == want.Discard &&
		have.DiscardNewPerSubject == want.DiscardNewPerSubject && unlimited(have.MaxMsgsPerSubject) == unlimited(want.MaxMsgsPerSubject) &&
		have.Duplicates == want.Duplicates && have.MaxAge == want.MaxAge && have.Storage == want.Storage &&
		have.Replicas == want.Replicas && have.AllowDirect == want.AllowDirect {
		return nil
	}
	if _, err = js.CreateOrUpdateStream(ctx, want); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	return nil
}

// awaitSources waits until every source of the stream name is active.
// The server sets a source up (on a stream's creation, and on its own
// start) in a goroutine that waits for the source's consumer with nothing
// but a 30 s timer (nats-server 2.15), so a server stopped meanwhile
// leaves it running that long; once Ensure has returned, none waits.
func awaitSources(ctx context.Context, js jetstream.JetStream, name string) error {
	for {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return err
		}
		active := true
		for _, si := range st.CachedInfo().Sources {
			active = active && si.Active >= 0
		}
		if active {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// unlimited folds the server's -1 and the config's 0, both "no limit".
func unlimited(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// ensureBucket is ensureStream for a key-value bucket. With msgTTL the
// bucket's stream also allows per-message TTLs (Nats-TTL) but has no
// subject delete markers, which a KeyValueConfig cannot say (its
// LimitMarkerTTL turns on both): such a bucket is created create-only and
// then updated as a stream. The server allows turning message TTLs on for
// an existing stream, never off, so an update through
// CreateOrUpdateKeyValue, which would send them off, is never made for it.
func ensureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig, msgTTL bool) error {
	kv, err := js.KeyValue(ctx, want.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if !msgTTL {
			_, err = js.CreateOrUpdateKeyValue(ctx, want)
			return err
		}
		kv, err = js.CreateKeyValue(ctx, want)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, want.Bucket) // another process created it meanwhile
		}
	}
	if err != nil {
		return err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return err
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		if msgTTL {
			return fmt.Errorf("bucket %s: status %T carries no stream config", want.Bucket, st)
		}
		_, err = js.CreateOrUpdateKeyValue(ctx, want)
		return err
	}
	have := bs.Config()
	same := have.History == max(want.History, 1) && have.TTL == want.TTL && have.LimitMarkerTTL == want.LimitMarkerTTL &&
		have.Storage == want.Storage && have.Replicas == max(want.Replicas, 1) && have.Description == want.Description &&
		hasMetadata(have.Metadata, want.Metadata)
	if !msgTTL {
		if same {
			return nil
		}
		_, err = js.CreateOrUpdateKeyValue(ctx, want)
		return err
	}
	sc := bs.StreamInfo().Config
	if same && sc.AllowMsgTTL {
		return nil
	}
	// What CreateOrUpdateKeyValue would set of the settings we own, and
	// message TTLs on.
	sc.Description, sc.MaxMsgsPerSubject, sc.MaxAge = want.Description, int64(max(want.History, 1)), want.TTL
	sc.Storage, sc.Replicas, sc.SubjectDeleteMarkerTTL = want.Storage, max(want.Replicas, 1), want.LimitMarkerTTL
	sc.Duplicates = 2 * time.Minute
	if want.TTL > 0 && want.TTL < sc.Duplicates {
		sc.Duplicates = want.TTL
	}
	sc.AllowMsgTTL = true
	md := make(map[string]string, len(sc.Metadata)+len(want.Metadata))
	maps.Copy(md, sc.Metadata)
	maps.Copy(md, want.Metadata)
	sc.Metadata = md
	_, err = js.UpdateStream(ctx, sc)
	return err
}

// hasMetadata reports whether have holds every entry of want (the server
// adds entries of its own).
func hasMetadata(have, want map[string]string) bool {
	for k, v := range want {
		if w, ok := have[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// RunRetention reads how long an ended run's record is kept, as the runs
// bucket was last ensured with, so every service writes ended records
// with the same TTL. It is 0, records being kept for ever, when the
// bucket does not allow per-message TTLs (it was last ensured by a version
// without retention). It blocks for one stream info request.
func RunRetention(ctx context.Context, js jetstream.JetStream, n subject.Names) (time.Duration, error) {
	st, err := js.Stream(ctx, "KV_"+n.RunsBucket())
	if err != nil {
		return 0, fmt.Errorf("open bucket %s: %w", n.RunsBucket(), err)
	}
	sc := st.CachedInfo().Config
	v, ok := sc.Metadata[RetentionMetadata]
	if !sc.AllowMsgTTL || !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("bucket %s: metadata %s = %q is not a retention of at least 1s", n.RunsBucket(), RetentionMetadata, v)
	}
	return d, nil
}

// ArtifactRetention reads how long a stored artifact is kept, as the
// artifacts bucket was last ensured with, so every writer of artifacts
// writes the same expiry. It blocks for one stream info request.
func ArtifactRetention(ctx context.Context, js jetstream.JetStream, n subject.Names) (time.Duration, error) {
	st, err := js.Stream(ctx, "KV_"+n.ArtifactsBucket())
	if err != nil {
		return 0, fmt.Errorf("open bucket %s: %w", n.ArtifactsBucket(), err)
	}
	v := st.CachedInfo().Config.Metadata[ArtifactRetentionMetadata]
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Minute {
		return 0, fmt.Errorf("bucket %s: metadata %s = %q is not a retention of at least 1m", n.ArtifactsBucket(), ArtifactRetentionMetadata, v)
	}
	return d, nil
}

// LeaseTTL reads the lease TTL the leases bucket was created with, so every
// service heartbeats and sweeps against the same value.
func LeaseTTL(ctx context.Context, js jetstream.JetStream, n subject.Names) (time.Duration, error) {
	kv, err := js.KeyValue(ctx, n.LeasesBucket())
	if err != nil {
		return 0, fmt.Errorf("open bucket %s: %w", n.LeasesBucket(), err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("status of bucket %s: %w", n.LeasesBucket(), err)
	}
	if st.TTL() <= 0 {
		return 0, fmt.Errorf("bucket %s has no TTL", n.LeasesBucket())
	}
	return st.TTL(), nil
}
