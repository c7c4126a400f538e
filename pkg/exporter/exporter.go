// Package exporter turns ended, consented runs into redacted,
// content-addressed trajectories (docs/contract.md §7).
//
// An exporter follows every write of the run records through a durable
// consumer shared by all exporters (runs.Store.Follow). For a record that
// is terminal and stamped consented, it reads the run's events from seq 1,
// builds the trajectory (pkg/exporter/trajectory) through the tenant's redaction
// (pkg/exporter/redact: the built-in detectors and the tenant's rules, watched so a
// change applies without a restart), and stores it in three steps: an
// unstored export record naming the object, the bytes, then the record
// marked stored with its expiry. A crash between the steps leaves either
// nothing the sweeper cannot finish (an unstored record is swept as
// abandoned) or an export the redelivery completes. Exporting the same run
// twice (two exporters, a redelivery, a restart) gives one object and one
// record.
//
// Consent is revalidated around the write: a principal that withdrew
// after the run's stamped grant (by KV revision) is not exported, and an
// export whose withdrawal raced it is removed by the exporter itself right
// after it is stored, so no sweep that follows the withdrawal leaves it.
package exporter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
)

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("invalid exporter config")

// Config configures an Exporter. The exporter service reads it from its
// environment (AGENTMESH_EXPORTER_WORKERS, ...): the tags name the
// variables, and Validate's problems are reported under them
// (service.LoadConfig).
type Config struct {
	// Retention is how long an export is kept (default
	// exports.DefaultRetention).
	Retention time.Duration `ignored:"true"`
	// Workers is how many runs one exporter exports at once (default 4).
	Workers int `split_words:"true" desc:"runs exported at once (default 4)"`
	// AckWait is the ack wait of the shared consumer (default 60s); an
	// export in progress keeps its delivery with in-progress acks.
	AckWait time.Duration `split_words:"true" desc:"ack wait of the exporters' shared consumer of the run records (default 60s)"`
	// Metadata is added to the exporter's micro service info.
	Metadata map[string]string `ignored:"true"`
}

func (c *Config) setDefaults() {
	if c.Retention == 0 {
		c.Retention = exports.DefaultRetention
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.AckWait == 0 {
		c.AckWait = 60 * time.Second
	}
}

// Validate reports every field that is invalid once the defaults are
// filled in, each a *service.FieldError wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	c.setDefaults()
	bad := service.FieldErrors{Sentinel: ErrInvalidConfig}
	if c.Retention < time.Second {
		bad.Add("Retention", "must be at least 1s, got %s", c.Retention)
	}
	if c.Workers < 1 {
		bad.Add("Workers", "must be > 0, got %d", c.Workers)
	}
	if c.AckWait < time.Second {
		bad.Add("AckWait", "must be at least 1s, got %s", c.AckWait)
	}
	return bad.Err()
}

// Outcome is what exporting one ended, consented run came to.
type Outcome string

// The outcomes, also the values of the agentmesh_exports_total label.
const (
	Exported   Outcome = "exported"   // stored now
	Duplicate  Outcome = "duplicate"  // already exported
	Withdrawn  Outcome = "withdrawn"  // consent withdrawn before or while exporting: not kept
	Incomplete Outcome = "incomplete" // its events aged out (or never were whole): not exported
	Failed     Outcome = "failed"     // an error; the delivery is retried
)

// Exporter exports trajectories. Build it with New and run it with Run.
type Exporter struct {
	d       service.Deps
	cfg     Config
	runs    *runs.Store
	records *exports.Records
	consent *consent.Store
	rules   *Rules
	store   trajstore.Store
	now     func() time.Time
}

// New binds an exporter to the topology, which must exist, storing
// trajectories in store. While JetStream is not ready (a cluster forming
// or recovering) it waits, logging that (jsretry.Await), until ctx ends.
func New(ctx context.Context, d service.Deps, store trajstore.Store, cfg Config) (*Exporter, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	x, err := jsretry.Await(ctx, d.NC, d.Log, "exporter", func(ctx context.Context) (*Exporter, error) {
		return bind(ctx, d, store, cfg)
	})
	if err != nil {
		return nil, err
	}
	registerMetrics(d.Metrics)
	return x, nil
}

// bind is one attempt of New.
func bind(ctx context.Context, d service.Deps, store trajstore.Store, cfg Config) (*Exporter, error) {
	rs, err := runs.Open(ctx, d)
	if err != nil {
		return nil, err
	}
	records, err := exports.Open(ctx, d.JS, d.Names)
	if err != nil {
		return nil, err
	}
	grants, err := consent.Open(ctx, d.JS, d.Names)
	if err != nil {
		return nil, err
	}
	rules, err := OpenRules(ctx, d.JS, d.Names)
	if err != nil {
		return nil, err
	}
	return &Exporter{d: d, cfg: cfg, runs: rs, records: records, consent: grants, rules: rules, store: store, now: time.Now}, nil
}

// Run exports until ctx ends, then finishes the exports in hand and
// returns.
func (x *Exporter) Run(ctx context.Context) error {
	svc, err := service.Register(x.d.NC, "agentmesh-exporter", "exports trajectories of ended, consented runs",
		service.Metadata(x.cfg.Metadata, "export", "enabled"))
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	stopRules, err := x.WatchRules(ctx)
	if err != nil {
		return err
	}
	defer stopRules()
	cons, err := x.runs.Follow(ctx, x.d.Names.ExporterConsumer(), x.cfg.AckWait, 4*x.cfg.Workers)
	if err != nil {
		return err
	}
	x.d.Health.Add("exporter", service.ConnCheck(x.d.NC))
	return service.Consume(ctx, cons, x.d.Names.ExporterConsumer(), x.cfg.Workers, x.d.Log, x.handle)
}

// WatchRules loads the tenants' redaction rules and keeps them current
// until stop is called or ctx ends; Run does it. Export needs it: without
// the rules it exports nothing.
// It waits while JetStream is not ready (jsretry.Await) until ctx ends.
func (x *Exporter) WatchRules(ctx context.Context) (stop func(), err error) {
	return jsretry.Await(ctx, x.d.NC, x.d.Log, "redaction rules", func(ctx context.Context) (func(), error) {
		return x.rules.Watch(ctx, x.d.Log)
	})
}

// handle exports the run of one record write, if it is an ended,
// consented run, and settles the delivery: acked unless the export
// failed, which is retried with a growing delay.
func (x *Exporter) handle(ctx context.Context, msg jetstream.Msg) {
	got, err := runs.DecodeRecorded(msg)
	if err != nil {
		// Not a record this build can read: nothing to export from it.
		x.d.Log.Error("undecodable run record; not exported", "subject", msg.Subject(), "err", err)
		x.d.Metrics.Dropped.WithLabelValues("exporter", "undecodable").Inc()
		_ = msg.Term()
		return
	}
	rec := got.Record
	if got.Deleted || !rec.Consent || !rec.State.Terminal() {
		_ = msg.Ack()
		return
	}
	keep := time.NewTicker(x.cfg.AckWait / 3)
	done := make(chan struct{})
	var beating sync.WaitGroup
	beating.Go(func() {
		for {
			select {
			case <-keep.C:
				_ = msg.InProgress()
			case <-done:
				return
			}
		}
	})
	outcome, err := x.Export(ctx, rec)
	close(done)
	beating.Wait() // no in-progress ack after the settle below
	keep.Stop()
	x.d.Metrics.Exports.WithLabelValues(string(outcome)).Inc()
	if err != nil {
		n := uint64(1)
		if md, merr := msg.Metadata(); merr == nil {
			n = md.NumDelivered
		}
		delay := min(time.Duration(n)*time.Second, 30*time.Second)
		x.d.Log.Warn("export failed; retrying", "tenant", rec.Tenant, "run_id", rec.RunID, "delivery", n, "retry_in", delay, "err", err)
		_ = msg.NakWithDelay(delay)
		return
	}
	_ = msg.Ack()
}

// Export exports one ended run stamped consented and says what came of
// it; a non-nil error comes with Failed. It is safe to call for the same
// run from several exporters at once.
func (x *Exporter) Export(ctx context.Context, rec wire.RunRecord) (Outcome, error) {
	log := x.d.Log.With("tenant", rec.Tenant, "run_id", rec.RunID)
	c, err := x.consent.Get(ctx, rec.Tenant, rec.Principal)
	if err != nil {
		return Failed, err
	}
	if c.WithdrawnSince(rec.ConsentRev) {
		log.Info("not exported: consent withdrawn since the run was accepted", "principal", rec.Principal)
		return Withdrawn, nil
	}
	evs, err := x.readEvents(ctx, rec.Tenant, rec.RunID)
	if err != nil {
		return Failed, err
	}
	var req map[string]any
	if len(rec.Request) > 0 {
		if err := msgpack.Unmarshal(rec.Request, &req); err != nil {
			// The router stamps the request as it was submitted; one that
			// is not a map was rejected and has no fields to keep.
			req = nil
		}
	}
	red, err := x.rules.For(rec.Tenant)
	if err != nil {
		return Failed, err
	}
	data, sum, err := trajectory.Build(trajectory.Input{Record: rec, Request: req, Labels: rec.Labels, Events: evs}, session{red.Session()})
	if errors.Is(err, trajectory.ErrIncomplete) {
		log.Warn("not exported: the run's events are incomplete (aged out of the events stream?)", "events", len(evs), "err", err)
		return Incomplete, nil
	}
	if err != nil {
		return Failed, fmt.Errorf("build trajectory of %s.%s: %w", rec.Tenant, rec.RunID, err)
	}
	name, err := trajstore.Name(rec.Tenant, rec.RunID, sum)
	if err != nil {
		return Failed, err
	}
	xr := wire.ExportRecord{Tenant: rec.Tenant, RunID: rec.RunID, Principal: rec.Principal,
		Object: name, SHA256: sum, Size: int64(len(data)), ConsentRev: rec.ConsentRev}
	for attempt := 1; ; attempt++ {
		outcome, err := x.store1(ctx, xr, data)
		if errors.Is(err, exports.ErrChanged) && attempt < 8 {
			continue // another exporter moved the record on: look again
		}
		if err != nil || outcome != Exported {
			return outcome, err
		}
		break
	}
	// Locked revalidation: a withdrawal that raced this export removes it
	// now, before any later sweep could miss it.
	c, err = x.consent.Get(ctx, rec.Tenant, rec.Principal)
	if err != nil {
		return Failed, err
	}
	if c.WithdrawnSince(rec.ConsentRev) {
		e, err := x.records.Get(ctx, rec.Tenant, rec.RunID)
		if err != nil {
			return Failed, err
		}
		if _, err := x.records.Remove(ctx, x.store, e); err != nil && !errors.Is(err, exports.ErrChanged) {
			return Failed, err
		}
		log.Info("export removed: consent withdrawn while it was written", "principal", rec.Principal)
		return Withdrawn, nil
	}
	x.d.Metrics.ExportLag.Observe(x.now().Sub(time.UnixMilli(rec.Updated)).Seconds())
	log.Info("exported", "object", name, "size", len(data))
	return Exported, nil
}

// store1 makes one pass at storing xr: the unstored record, the bytes,
// the stored record. ErrChanged means another writer changed the record
// in between.
func (x *Exporter) store1(ctx context.Context, xr wire.ExportRecord, data []byte) (Outcome, error) {
	e, err := x.records.Get(ctx, xr.Tenant, xr.RunID)
	var rev uint64
	switch {
	case errors.Is(err, exports.ErrNotFound):
		if rev, err = x.records.Begin(ctx, xr, 0); err != nil {
			return Failed, err
		}
	case err != nil:
		return Failed, err
	case e.Record.Stored:
		return Duplicate, nil
	case e.Record.Object == xr.Object:
		rev = e.Rev // another exporter is writing the same bytes: both may
	default:
		// An earlier attempt built other bytes (the tenant's rules
		// changed) and stopped half way: its bytes go first.
		if err := x.store.Delete(ctx, e.Record.Object); err != nil {
			return Failed, err
		}
		if rev, err = x.records.Begin(ctx, xr, e.Rev); err != nil {
			return Failed, err
		}
	}
	if err := x.store.Put(ctx, xr.Object, data); err != nil {
		return Failed, fmt.Errorf("store %s: %w", xr.Object, err)
	}
	now := x.now()
	xr.Created, xr.Expires = now.UnixMilli(), now.Add(x.cfg.Retention).UnixMilli()
	if _, err := x.records.Finish(ctx, xr, rev); err != nil {
		return Failed, err
	}
	return Exported, nil
}

// readEvents reads every event of the run, from seq 1, on an ephemeral
// consumer: as many as the stream holds for the run when the consumer is
// created (the run has ended, so nothing is added after). It returns them
// one per seq, as a client reads them (see single).
func (x *Exporter) readEvents(ctx context.Context, tenant, runID string) ([]wire.Event, error) {
	stream := x.d.Names.EventsStream()
	cons, err := jsretry.Do(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return x.d.JS.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
			FilterSubject:     x.d.Names.Events(tenant, runID),
			DeliverPolicy:     jetstream.DeliverAllPolicy,
			AckPolicy:         jetstream.AckNonePolicy,
			InactiveThreshold: 30 * time.Second,
			Replicas:          1,
			MemoryStorage:     true,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read events of %s.%s: %w", tenant, runID, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = x.d.JS.DeleteConsumer(dctx, stream, cons.CachedInfo().Name)
		cancel()
	}()
	want := cons.CachedInfo().NumPending
	evs := make([]wire.Event, 0, want)
	for uint64(len(evs)) < want {
		batch, err := cons.Fetch(int(min(want-uint64(len(evs)), 512)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("read events of %s.%s: %w", tenant, runID, err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			ev, err := wire.Decode[wire.Event](msg.Data())
			if err != nil {
				return nil, fmt.Errorf("event %d of %s.%s: %w", len(evs)+1, tenant, runID, err)
			}
			evs = append(evs, ev)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, fmt.Errorf("read events of %s.%s: %w", tenant, runID, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("read events of %s.%s: %d of %d read, then nothing", tenant, runID, len(evs), want)
		}
	}
	return single(evs), nil
}

// single returns the events stored as evs one per seq, in seq order: a
// batch of chunks (wire.KindChunks) becomes one chunk event per seq, and
// of a seq stored twice (a batch retried through a leader election is
// stored after the one that follows it; two writers' batches may
// overlap) the first stored is kept, as client.Events yields it.
func single(evs []wire.Event) []wire.Event {
	out := make([]wire.Event, 0, len(evs))
	for i := range evs {
		for e := range evs[i].Expand() {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b wire.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	return slices.CompactFunc(out, func(a, b wire.Event) bool { return a.Seq == b.Seq })
}

// OpenStore returns the trajectory store the settings name: the local
// directory AGENT_ARTIFACT_ROOT when set, else the JetStream object store
// agentmesh_trajectories (which topology.Ensure creates).
func OpenStore(ctx context.Context, js jetstream.JetStream, names subject.Names, settings exports.Settings) (trajstore.Store, error) {
	if settings.ArtifactRoot != "" {
		return trajstore.NewDirStore(settings.ArtifactRoot)
	}
	obj, err := js.ObjectStore(ctx, names.TrajectoryStore())
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", names.TrajectoryStore(), err)
	}
	return trajstore.NewObjectStore(js, obj), nil
}

// Idle registers a disabled exporter with the services framework, so it
// is seen running, and waits for ctx: with export disabled there is
// nothing to export (no run is stamped consented).
func Idle(ctx context.Context, d service.Deps, metadata map[string]string) error {
	svc, err := service.Register(d.NC, "agentmesh-exporter", "exports trajectories of ended, consented runs (disabled)",
		service.Metadata(metadata, "export", "disabled"))
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	d.Health.Add("exporter", service.ConnCheck(d.NC))
	d.Log.Info("trajectory export is disabled (" + exports.EnvEnabled + "=1 enables it); the exporter idles")
	<-ctx.Done()
	return nil
}
