// Package runs owns a run's lifecycle: it creates, routes and ends runs
// and holds runners' leases, and it is the only code that writes the
// agentmesh_runs and agentmesh_leases buckets. The router, the runner
// host and the sweeper change a run only through a Store.
//
// # The ending protocol
//
// A run ends in exactly one way (Store.End):
//
//  1. its terminal status is published on the run's events, fenced with
//     Nats-Expected-Last-Subject-Sequence after the writer's last event, so
//     of two writers racing to end a run exactly one succeeds (the other
//     gets events.ErrFenced and publishes nothing more);
//  2. then the run's record is set to the terminal state, with the runner
//     that held it, its attempt and whether it had output (a
//     compare-and-set loop that never overwrites another terminal state).
//
// The event stream is the truth; the record follows it. A writer that dies
// between 1 and 2 leaves a record that says the run is still going while
// its events say it ended: whoever next acts on the run (a runner given
// its work again, a cancel, the sweeper's reconcile) finds the terminal
// event and repairs the record (Store.Repair).
//
// # Retention and the live runs
//
// A record is written terminal with the retention the runs bucket was
// ensured with as its per-message TTL (topology.RunRetention), so an
// ended run's record expires and then reads as not found; a record of a
// run that has not ended never expires.
//
// A run whose record is not terminal always has a message that is not
// acknowledged yet: its submission, until the router dispatched it (or
// ended it rejected and recorded that), then its work item, which the
// runner holding the run keeps in progress until the run's end is
// recorded. The work stream is therefore the index of the runs that have
// not ended (Store.Dispatched lists it), and the sweeper's reconcile
// reads only those, so its work does not grow with the runs that ended;
// no write of its own marks a run live. For that, End reports a record
// it could not write (ErrUnrecorded) and its callers do not acknowledge
// the message that ended the run: its redelivery repairs the record.
//
// # Who holds a run
//
// A run's record is written twice: when the router creates it (already
// routed) and when the run ends. In between, the run's events say where
// it is: a runner stamps every event of its attempt with its id, the
// epoch of its lease and the attempt (wire.RunnerHeader), so the run's
// last stored message (events.Tail) says which runner holds it, in which
// attempt, and whether it has published output (WithTail gives the
// record as the tail says it is now). A runner holds one lease for all
// its runs (HoldRunner, key runner.<id>); a run is in its hands while the
// lease is held under the epoch its events carry (RunnerHeld).
//
// Every status that changes who holds a run is fenced: a runner's running
// status (its claim of an attempt) and its first chunk (the first-output
// boundary), so neither can land after another writer ended the run.
package runs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/service/leader"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

var (
	// ErrExists is returned by Create for a run id the tenant already used.
	ErrExists = errors.New("run already exists")
	// ErrNotFound is returned for a run that has no record.
	ErrNotFound = errors.New("run not found")
	// ErrChanged is returned when a run's record changed since it was read:
	// another writer acted on the run; read it again.
	ErrChanged = errors.New("run record changed")
	// ErrUnrecorded is returned by End when the terminal status is stored
	// but the record could not be set to it: the run has ended, and the
	// caller keeps the message that ended it unacknowledged so that its
	// redelivery repairs the record (see the package comment).
	ErrUnrecorded = errors.New("run ended; its record is not updated yet")
)

// casRetries bounds the compare-and-set loops that re-read a record.
const casRetries = 32

// opTimeout bounds one store operation, its retries through a leader
// election included, when the caller's context has no deadline of its own.
const opTimeout = 30 * time.Second

// retry runs one store operation through a leader election: each attempt
// bounded by jsretry.AttemptTimeout, retried while the error is one a
// failover produces, until ctx (or opTimeout) ends. tried, when not nil, is
// set once an attempt failed in a way that may still have been applied.
func retry[T any](ctx context.Context, tried *bool, f func(context.Context) (T, error)) (T, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opTimeout)
		defer cancel()
	}
	return jsretry.Do(ctx, func(ctx context.Context) (T, error) {
		v, err := f(ctx)
		if err != nil && tried != nil && jsretry.Transient(err) {
			*tried = true
		}
		return v, err
	})
}

// entry is a key's value and revision as the bucket's stream leader has
// them (pkg/service/leader): never a lagging replica's, since what is read here
// decides a run's next state.
type entry struct {
	value []byte
	rev   uint64
}

func (s *Store) read(ctx context.Context, bucket, key string) (entry, error) {
	return retry(ctx, nil, func(ctx context.Context) (entry, error) {
		v, rev, err := leader.KeyValue(ctx, s.js, bucket, key)
		return entry{v, rev}, err
	})
}

// errConflict is cas's answer when another writer's value is stored over
// the revision it wrote on.
var errConflict = errors.New("another writer's value is stored")

// cas writes b under key over revision rev (0: create) through a leader
// election, and decides a refused write on what the bucket's stream
// leader has stored: a newer revision holding b is this write's own
// earlier attempt, whose reply was lost; another newer revision is
// errConflict. No newer revision at all means the write the leader
// refused this one for is still being replicated (this one's own earlier
// attempt, or another writer's), or was lost with a leader that died
// before committing it: neither is decided yet, so cas waits and writes
// again. A leader checks the expected revision against writes it has
// proposed but not yet committed, so such a refusal is not a conflict.
// A ttl > 0 writes an update (rev > 0) with that per-message TTL
// (updateTTL), decided by the same rules.
func (s *Store) cas(ctx context.Context, kv jetstream.KeyValue, bucket, key string, b []byte, rev uint64, ttl time.Duration) (uint64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opTimeout)
		defer cancel()
	}
	var wait jsretry.Backoff
	tried := false
	for {
		next, err := retry(ctx, &tried, func(ctx context.Context) (uint64, error) {
			switch {
			case rev == 0:
				return kv.Create(ctx, key, b)
			case ttl > 0:
				return s.updateTTL(ctx, bucket, key, b, rev, ttl)
			}
			return kv.Update(ctx, key, b, rev)
		})
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return next, err
		}
		e, err := s.read(ctx, bucket, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			e = entry{}
		case err != nil:
			return 0, err
		}
		if e.rev > rev {
			if tried && bytes.Equal(e.value, b) {
				return e.rev, nil
			}
			return 0, errConflict
		}
		if err := wait.Wait(ctx); err != nil {
			return 0, fmt.Errorf("write %s: refused, and nothing newer than revision %d is stored: %w", key, rev, err)
		}
		tried = true // an earlier attempt may yet be stored
	}
}

// updateTTL is kv.Update with a per-message TTL, which the key-value API
// offers only to a create: the same message on the key's subject (the
// services use the default JetStream API prefix, see service.Connect),
// fenced on the key's revision, with a Nats-TTL header. A refusal for the
// revision is ErrKeyRevisionMismatch, as from kv.Update.
func (s *Store) updateTTL(ctx context.Context, bucket, key string, b []byte, rev uint64, ttl time.Duration) (uint64, error) {
	m := &nats.Msg{Subject: "$KV." + bucket + "." + key, Header: nats.Header{}, Data: b}
	ack, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return 0, fmt.Errorf("%w: %w", err, jetstream.ErrKeyRevisionMismatch)
		}
		return 0, err
	}
	return ack.Sequence, nil
}

// Run is a run's record at one revision.
type Run struct {
	Record wire.RunRecord
	Rev    uint64
}

// Key is the run's key: <tenant>.<run_id>.
func (r Run) Key() string { return subject.RunKey(r.Record.Tenant, r.Record.RunID) }

// adapterLabel is the adapter label of the run's metrics.
func (r Run) adapterLabel() string {
	if r.Record.Adapter == "" {
		return "none"
	}
	return r.Record.Adapter
}

// Store reads and writes run records and leases. It is safe for concurrent
// use.
type Store struct {
	js         jetstream.JetStream
	runsName   string // the runs bucket
	leasesName string // the leases bucket
	runs       jetstream.KeyValue
	leases     jetstream.KeyValue
	work       jetstream.Stream // the work stream: the runs dispatched and not ended
	log        *events.Log
	ttl        time.Duration
	retention  time.Duration // TTL of a terminal record; 0: kept for ever
	logger     *slog.Logger
	metrics    *service.Metrics
}

// Open binds a store to the topology, which must exist.
func Open(ctx context.Context, d service.Deps) (*Store, error) {
	s := &Store{js: d.JS, runsName: d.Names.RunsBucket(), leasesName: d.Names.LeasesBucket(), logger: d.Log, metrics: d.Metrics}
	var err error
	if s.runs, err = d.JS.KeyValue(ctx, d.Names.RunsBucket()); err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", d.Names.RunsBucket(), err)
	}
	if s.leases, err = d.JS.KeyValue(ctx, d.Names.LeasesBucket()); err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", d.Names.LeasesBucket(), err)
	}
	if s.work, err = d.JS.Stream(ctx, d.Names.WorkStream()); err != nil {
		return nil, fmt.Errorf("open stream %s: %w", d.Names.WorkStream(), err)
	}
	if s.retention, err = topology.RunRetention(ctx, d.JS, d.Names); err != nil {
		return nil, err
	}
	if s.ttl, err = topology.LeaseTTL(ctx, d.JS, d.Names); err != nil {
		return nil, err
	}
	if s.log, err = events.NewLog(ctx, d.JS, d.Names); err != nil {
		return nil, err
	}
	return s, nil
}

// Events is the event log the store ends runs on.
func (s *Store) Events() *events.Log { return s.log }

// LeaseTTL is the TTL the leases bucket was created with.
func (s *Store) LeaseTTL() time.Duration { return s.ttl }

// Retention is how long an ended run's record is kept, as the runs bucket
// was ensured with when the store was opened (0: for ever).
func (s *Store) Retention() time.Duration { return s.retention }

// Get reads a run's record.
func (s *Store) Get(ctx context.Context, tenant, runID string) (Run, error) {
	return s.GetKey(ctx, subject.RunKey(tenant, runID))
}

// GetKey reads the record under key (<tenant>.<run_id>).
func (s *Store) GetKey(ctx context.Context, key string) (Run, error) {
	e, err := s.read(ctx, s.runsName, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Run{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return Run{}, fmt.Errorf("read run record %s: %w", key, err)
	}
	rec, err := wire.Decode[wire.RunRecord](e.value)
	if err != nil {
		return Run{}, fmt.Errorf("decode run record %s: %w", key, err)
	}
	return Run{Record: rec, Rev: e.rev}, nil
}

// Create writes the record of a new run in state accepted, or routed when
// rec says so (a router that validated the run before writing anything
// records it routed at once, with its pin, adapter and deadline). It
// returns ErrExists if the tenant already has a run with that id.
func (s *Store) Create(ctx context.Context, rec wire.RunRecord) (Run, error) {
	switch rec.State {
	case "":
		rec.State = wire.StateAccepted
	case wire.StateAccepted, wire.StateRouted:
	default:
		return Run{}, fmt.Errorf("create run record %s: state %s, want accepted or routed", subject.RunKey(rec.Tenant, rec.RunID), rec.State)
	}
	rec.V, rec.Updated = wire.Version, time.Now().UnixMilli()
	b, err := wire.Marshal(&rec)
	if err != nil {
		return Run{}, err
	}
	key := subject.RunKey(rec.Tenant, rec.RunID)
	rev, err := s.cas(ctx, s.runs, s.runsName, key, b, 0, 0)
	switch {
	case errors.Is(err, errConflict):
		return Run{}, fmt.Errorf("%w: %s", ErrExists, key)
	case err != nil:
		return Run{}, fmt.Errorf("create run record %s: %w", key, err)
	}
	return Run{Record: rec, Rev: rev}, nil
}

// Dispatched lists the keys (<tenant>.<run_id>) of the runs whose work
// item is in the work stream, as its leader has them: every run that was
// dispatched and has not ended (and, until a runner takes its work, a
// run cancelled while queued). It reads one message per run listed, plus
// one, in stream order; a key appears once for each work item of the
// run. Work whose Nats-Msg-Id names no run is left out.
func (s *Store) Dispatched(ctx context.Context) ([]string, error) {
	var keys []string
	all := s.work.CachedInfo().Config.Subjects
	filter := ">"
	if len(all) == 1 {
		filter = all[0]
	}
	err := s.scanWork(ctx, filter, func(m *jetstream.RawStreamMsg) bool {
		if tenant, runID, err := subject.SplitWorkMsgID(m.Header.Get(jetstream.MsgIDHeader)); err == nil {
			keys = append(keys, subject.RunKey(tenant, runID))
		}
		return true
	})
	if err != nil {
		return keys, fmt.Errorf("list dispatched runs: %w", err)
	}
	return keys, nil
}

// scanWork reads the work items on filter from the work stream's leader,
// one at a time in stream order, until each returns false or none is
// left.
func (s *Store) scanWork(ctx context.Context, filter string, each func(*jetstream.RawStreamMsg) bool) error {
	for seq := uint64(1); ; {
		m, err := retry(ctx, nil, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
			return s.work.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if !each(m) {
			return nil
		}
		seq = m.Sequence + 1
	}
}

// Queued reports whether a work item with Nats-Msg-Id msgID is on subj
// in the work stream, as its leader has it: read one message at a time
// from the subject's first, so it costs one read per item queued there
// (a tenant's queue of one adapter, bounded by the stream).
func (s *Store) Queued(ctx context.Context, subj, msgID string) (bool, error) {
	found := false
	err := s.scanWork(ctx, subj, func(m *jetstream.RawStreamMsg) bool {
		found = m.Header.Get(jetstream.MsgIDHeader) == msgID
		return !found
	})
	if err != nil {
		return false, fmt.Errorf("read the work queued on %s: %w", subj, err)
	}
	return found, nil
}

// put writes rec over revision rev; ErrChanged if the record moved on. A
// terminal record is written with the retention as its TTL.
func (s *Store) put(ctx context.Context, rec wire.RunRecord, rev uint64) (Run, error) {
	rec.Updated = time.Now().UnixMilli()
	b, err := wire.Marshal(&rec)
	if err != nil {
		return Run{}, err
	}
	var ttl time.Duration
	if rec.State.Terminal() {
		ttl = s.retention
	}
	key := subject.RunKey(rec.Tenant, rec.RunID)
	next, err := s.cas(ctx, s.runs, s.runsName, key, b, rev, ttl)
	if errors.Is(err, errConflict) {
		return Run{}, fmt.Errorf("%w: %s", ErrChanged, key)
	}
	if err != nil {
		return Run{}, fmt.Errorf("write run record %s: %w", key, err)
	}
	return Run{Record: rec, Rev: next}, nil
}

// Route records that the router dispatched the run with pin to adapter.
// Its routed event must already be published.
func (s *Store) Route(ctx context.Context, r Run, pin *wire.Pin, adapter string, deadline int64) (Run, error) {
	rec := r.Record
	rec.State, rec.Pin, rec.Adapter, rec.Deadline = wire.StateRouted, pin, adapter, deadline
	return s.put(ctx, rec, r.Rev)
}

// Move records that the run moved to its fallback profile fb
// (docs/contract.md §4.13): its routed status naming fb must already be
// published. The record is read again and written by compare-and-set
// until it says fb; moved is false when the run ended first (a cancel),
// and the record is then left as it is.
func (s *Store) Move(ctx context.Context, tenant, runID string, fb wire.Fallback) (r Run, moved bool, err error) {
	for range casRetries {
		if r, err = s.Get(ctx, tenant, runID); err != nil {
			return r, false, err
		}
		rec := r.Record
		if rec.State.Terminal() {
			return r, false, nil
		}
		if rec.Pin != nil && SamePin(*rec.Pin, fb.Pin) {
			return r, true, nil
		}
		pin := fb.Pin
		rec.State, rec.Profile, rec.Adapter, rec.Pin = wire.StateRouted, fb.Profile, fb.Adapter, &pin
		rec.Owner, rec.Attempt, rec.Committed = "", 0, false
		next, err := s.put(ctx, rec, r.Rev)
		if err == nil {
			return next, true, nil
		}
		if !errors.Is(err, ErrChanged) {
			return r, false, err
		}
	}
	return r, false, fmt.Errorf("%w: %s.%s kept changing", ErrChanged, tenant, runID)
}

// SamePin reports whether a and b pin the same provider and model: one
// profile, since no two profiles share an adapter and a model.
func SamePin(a, b wire.Pin) bool { return a.Provider == b.Provider && a.Model == b.Model }

// RunnerLeaseKey is the key of runner id's lease in the leases bucket.
// A runner holds one lease for all its runs; the runs it holds name it on
// their events (events.RunnerHeader).
func RunnerLeaseKey(id string) string { return "runner." + id }

// HoldRunner writes the lease of runner id under a new epoch (see
// Lease.Epoch): from then on, if the runner stops renewing it (Keep), the
// sweeper ends, once the lease expires, every run the runner holds that
// has published output, and leaves those without output to the next
// delivery of their work. The lease is not renewed until Keep is called.
// id must be a subject token.
func (s *Store) HoldRunner(ctx context.Context, id string) (*Lease, error) {
	if err := subject.ValidToken("runner id", id); err != nil {
		return nil, err
	}
	epoch := nuid.Next()
	value, err := wire.Marshal(&wire.Lease{V: wire.Version, Owner: id, Epoch: epoch})
	if err != nil {
		return nil, err
	}
	key := RunnerLeaseKey(id)
	sent := time.Now() // renewed at the send at the latest (see renew)
	rev, err := retry(ctx, nil, func(ctx context.Context) (uint64, error) { return s.leases.Put(ctx, key, value) })
	if err != nil {
		return nil, fmt.Errorf("write lease %s: %w", key, err)
	}
	l := &Lease{s: s, key: key, epoch: epoch, value: value, rev: rev, done: make(chan struct{})}
	l.renewed.Store(sent.UnixNano())
	return l, nil
}

// RunnerHeld reports whether runner id holds its lease under epoch, as
// the leases bucket's leader has it: a run whose events name that runner
// and epoch is still in its hands.
func (s *Store) RunnerHeld(ctx context.Context, id, epoch string) (bool, error) {
	e, err := s.read(ctx, s.leasesName, RunnerLeaseKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	l, err := wire.Decode[wire.Lease](e.value)
	if err != nil {
		return false, fmt.Errorf("lease of runner %s: %w", id, err)
	}
	return l.Epoch == epoch, nil
}

// HasOutput reports whether ev, a run's last event, says the run has
// published output: a chunk or a batch of chunks (a run's events after
// its first chunk are chunks and then its terminal status).
func HasOutput(ev wire.Event) bool { return ev.Kind == wire.KindChunk || ev.Kind == wire.KindChunks }

// End ends the run by the ending protocol (the package comment): the
// terminal status st on w, fenced; then the record, with r's owner,
// attempt and commit (the runner's, or what the run's last event said).
// It returns an error wrapping events.ErrFenced if another writer wrote
// on the run since w's last event: the run is that writer's to end, and
// nothing was changed. Once the terminal status is stored the run has
// ended: End returns nil, or an error wrapping ErrUnrecorded if the
// record could not be set (the caller then keeps the message it acted on
// unacknowledged, whose redelivery repairs the record).
func (s *Store) End(ctx context.Context, w *events.Writer, r Run, st wire.Status) error {
	if err := w.Terminal(ctx, st); err != nil {
		return err
	}
	s.observeEnd(r, st)
	err := s.recordEnd(ctx, r, st)
	if err != nil {
		s.logger.Error("record the end of a run", "run_id", r.Record.RunID, "tenant", r.Record.Tenant, "state", st.State, "err", err)
		err = fmt.Errorf("%w: %s: %w", ErrUnrecorded, r.Key(), err)
	}
	return err
}

// recordEnd sets the record to its terminal state st, with st's error and
// its summary's usage and cost, and r's owner, attempt and commit,
// re-reading it while other writers move it on, and never over another
// terminal state.
func (s *Store) recordEnd(ctx context.Context, r Run, st wire.Status) error {
	by := r.Record
	for range casRetries {
		if r.Record.State.Terminal() {
			return nil
		}
		rec := r.Record
		rec.State, rec.Error = st.State, st.Error
		if st.Summary != nil {
			rec.Usage, rec.Cost = st.Summary.Usage, st.Summary.Cost
		}
		if by.Owner != "" {
			rec.Owner, rec.Attempt = by.Owner, max(rec.Attempt, by.Attempt)
		}
		// A runner's terminal status counts the chunks it published: a
		// repair (Repair), which has no writer's record, still records
		// the output the run had.
		rec.Committed = rec.Committed || by.Committed || (st.Summary != nil && st.Summary.Chunks > 0)
		_, err := s.put(ctx, rec, r.Rev)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrChanged) {
			return err
		}
		if r, err = s.GetKey(ctx, r.Key()); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: %s kept changing", ErrChanged, r.Key())
}

// Repair makes r's record say what its terminal event says, for a run
// whose writer ended it and stopped before recording the end.
func (s *Store) Repair(ctx context.Context, r Run, terminal wire.Event) error {
	if !terminal.Terminal() {
		return fmt.Errorf("repair run %s: event %d is not terminal", r.Key(), terminal.Seq)
	}
	return s.recordEnd(ctx, r, *terminal.Status)
}

// EndUnowned ends a run that no live writer holds — queued, past its
// deadline, or orphaned by a runner that is gone — if cond still holds of
// it: its record, with the owner, attempt and commit its last event says
// (a runner's), and its last event; status gives the terminal status from
// that record. It reads the record and the run's tail, then ends the run
// by the ending protocol, looking again when another writer got there
// first. It reports whether this call ended the run; a run already ended
// (its record repaired if need be), or one for which cond no longer
// holds, is false with no error. A run it ended but could not record is
// true with an error wrapping ErrUnrecorded (see End).
func (s *Store) EndUnowned(ctx context.Context, tenant, runID string, cond func(wire.RunRecord, events.Tail) bool, status func(wire.RunRecord) wire.Status) (bool, error) {
	return s.endUnowned(ctx, tenant, runID, func(rec wire.RunRecord, t events.Tail) (bool, error) {
		return cond == nil || cond(rec, t), nil
	}, status)
}

// EndOrphaned ends, like EndUnowned, a run whose runner is gone if it has
// output (its last event is a chunk; a record from before issue 11 may
// say committed instead).
func (s *Store) EndOrphaned(ctx context.Context, tenant, runID string, status func(wire.RunRecord) wire.Status) (bool, error) {
	return s.EndUnowned(ctx, tenant, runID, func(rec wire.RunRecord, t events.Tail) bool {
		return rec.Committed || t.HasOutput()
	}, status)
}

// ErrInTransition is returned by EndQueued for a run whose router has not
// stored its routed status yet. Ask again shortly.
var ErrInTransition = errors.New("run is changing hands")

// EndQueued ends a queued run for a cancel, like EndUnowned: one whose
// last event is the router's routed status. A run a runner has written on
// is not queued (false, no error): it is the runner's to end. The fenced
// terminal decides between this and a runner's fenced running status.
func (s *Store) EndQueued(ctx context.Context, tenant, runID string, status func(wire.RunRecord) wire.Status) (bool, error) {
	return s.endUnowned(ctx, tenant, runID, func(_ wire.RunRecord, t events.Tail) (bool, error) {
		switch {
		case t.Runner != "":
			return false, nil
		case t.Event.Seq < 2:
			return false, fmt.Errorf("%w: %s", ErrInTransition, subject.RunKey(tenant, runID))
		}
		return true, nil
	}, status)
}

// endUnowned ends the run if cond holds of its record (with what its
// tail says) and its tail.
func (s *Store) endUnowned(ctx context.Context, tenant, runID string, cond func(wire.RunRecord, events.Tail) (bool, error), status func(wire.RunRecord) wire.Status) (bool, error) {
	for range casRetries {
		r, err := s.Get(ctx, tenant, runID)
		if err != nil {
			return false, err
		}
		if r.Record.State.Terminal() {
			return false, nil
		}
		w, t, err := s.log.OpenTail(ctx, tenant, runID)
		if errors.Is(err, events.ErrEnded) {
			_, err := s.Ended(ctx, tenant, runID) // repairs the record
			return false, err
		}
		if err != nil {
			return false, err
		}
		r.Record = WithTail(r.Record, t)
		if ok, err := cond(r.Record, t); !ok || err != nil {
			return false, err
		}
		err = s.End(ctx, w, r, status(r.Record))
		if errors.Is(err, events.ErrFenced) {
			continue // someone wrote on the run meanwhile: look again
		}
		return err == nil || errors.Is(err, ErrUnrecorded), err
	}
	return false, fmt.Errorf("%w: %s kept changing", ErrChanged, subject.RunKey(tenant, runID))
}

// WithTail is rec, a record of a run not ended, as the run's tail says it
// is now: the record is written when the run is created and when it
// ends, and in between a runner's events say who holds it (state
// running, owner, attempt) and whether it has published output
// (committed).
func WithTail(rec wire.RunRecord, t events.Tail) wire.RunRecord {
	if rec.State.Terminal() {
		return rec
	}
	if t.Runner != "" {
		rec.State, rec.Owner, rec.Attempt = wire.StateRunning, t.Runner, max(rec.Attempt, t.Attempt)
	}
	rec.Committed = rec.Committed || t.HasOutput()
	return rec
}

// Ended reports, for a run whose writer was fenced or found the run ended,
// whether its events end in a terminal status; if they do, the record is
// repaired to match.
func (s *Store) Ended(ctx context.Context, tenant, runID string) (bool, error) {
	ev, _, err := s.log.Last(ctx, tenant, runID)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !ev.Terminal() {
		return false, nil
	}
	r, err := s.Get(ctx, tenant, runID)
	if err != nil {
		return true, err
	}
	return true, s.Repair(ctx, r, ev)
}

// LeaseHeld reports whether the run under key has a lease, as the leases
// bucket's leader has it (a lagging replica could miss a lease just
// written and have the sweeper end a live run).
func (s *Store) LeaseHeld(ctx context.Context, key string) (bool, error) {
	_, err := s.read(ctx, s.leasesName, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// WatchLeases watches every lease: puts are heartbeats, deletes releases,
// purges (the bucket's TTL markers) expiries.
func (s *Store) WatchLeases(ctx context.Context) (jetstream.KeyWatcher, error) {
	return s.leases.WatchAll(ctx)
}

func (s *Store) deleteLease(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.ttl)
	defer cancel()
	if _, err := retry(ctx, nil, func(ctx context.Context) (struct{}, error) { return struct{}{}, s.leases.Delete(ctx, key) }); err != nil {
		s.logger.Warn("delete lease", "key", key, "err", err)
	}
}

// Lease is a runner's heartbeat in the leases bucket (HoldRunner).
type Lease struct {
	s       *Store
	key     string
	epoch   string
	value   []byte
	rev     uint64
	inDoubt bool // the last renewal failed in a way that may have been applied
	// doubtSent is when the first of the renewals in doubt was sent.
	doubtSent time.Time
	renewed   atomic.Int64 // unix ns of the last write

	once sync.Once
	stop context.CancelFunc
	done chan struct{}
}

// Keep renews the lease every TTL/3 until Stop. A renewal that fails for
// a transient reason (a leader election, a loss of quorum) is tried again
// for as long as it takes: the bucket decides. While it has not expired
// the lease (its TTL since the last renewal it stored has not passed; a
// bucket without quorum expires nothing), the next renewal keeps it, and
// its holder only holds its output back meanwhile (AwaitFresh); once it
// has, the renewal is refused. onLost is called once, and renewing stops,
// when a renewal is refused because another writer replaced the lease or
// the bucket expired it, and after 2/3 of the TTL for an error that is
// not transient.
// Keep starts one goroutine, which Stop waits for; call it at most once.
func (l *Lease) Keep(onLost func(error)) {
	ctx, stop := context.WithCancel(context.Background())
	l.stop = stop
	go func() {
		defer close(l.done)
		every := l.s.ttl / 3
		t := time.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := l.renew(ctx)
			switch {
			case err == nil:
				// Every TTL/3 from when the renewal was sent: at once
				// when it turns out to be an earlier attempt's, stored
				// long ago (a process paused with it in flight).
				t.Reset(max(0, time.Until(time.Unix(0, l.renewed.Load()).Add(every))))
			case ctx.Err() != nil:
				return
			case errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) ||
				(!jsretry.Transient(err) && l.Stale()):
				onLost(err)
				return
			default:
				t.Reset(min(every, 100*time.Millisecond))
			}
		}
	}()
}

// renew writes the lease again, at most jsretry.AttemptTimeout (and a
// third of the TTL) at a time; Keep retries it. A revision mismatch after
// an attempt whose reply was lost is that attempt's own write.
func (l *Lease) renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(l.s.ttl/3, jsretry.AttemptTimeout))
	defer cancel()
	// The write is stored at some instant after it is sent: the lease
	// counts as renewed at the send, never at the acknowledgement, which a
	// process paused meanwhile may read long after the bucket stored it.
	sent := time.Now()
	if !l.inDoubt {
		l.doubtSent = sent
	}
	next, err := l.s.leases.Update(ctx, l.key, l.value, l.rev)
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		// Decided on what the leader has stored, as in cas: our own
		// value at a newer revision is a lost reply; nothing newer is a
		// write still in flight (try again); anything else is lost.
		e, rerr := l.s.read(ctx, l.s.leasesName, l.key)
		switch {
		case rerr == nil && e.rev > l.rev && l.inDoubt && bytes.Equal(e.value, l.value):
			// An earlier attempt's write, sent at the earliest at
			// doubtSent.
			next, err, sent = e.rev, nil, l.doubtSent
		case rerr == nil && e.rev <= l.rev:
			err = fmt.Errorf("renew lease %s: refused with nothing newer stored: %w", l.key, jsretry.ErrAckTimeout)
		case rerr != nil && !errors.Is(rerr, jetstream.ErrKeyNotFound):
			err = fmt.Errorf("renew lease %s: %w", l.key, rerr)
		}
	}
	l.inDoubt = l.inDoubt || (err != nil && jsretry.Transient(err))
	if err == nil {
		l.inDoubt = false
	}
	if err != nil {
		return err
	}
	l.rev = next
	l.renewed.Store(sent.UnixNano())
	return nil
}

// Release stops renewing l and deletes it: a runner that stops cleanly,
// once the runs in hand have returned.
func (s *Store) Release(l *Lease) {
	l.Stop()
	s.deleteLease(l.key)
}

// Epoch is the lease's epoch, which the runner's events carry
// (events.EpochHeader).
func (l *Lease) Epoch() string { return l.epoch }

// Stale reports whether the lease has gone unrenewed for two thirds of its
// TTL: the run may already be another writer's to end, and its holder must
// publish nothing more. Safe for concurrent use.
func (l *Lease) Stale() bool { return l.StaleAt(time.Now()) }

// StaleAt is Stale as of now (for a caller that has read the clock).
func (l *Lease) StaleAt(now time.Time) bool {
	return now.Sub(time.Unix(0, l.renewed.Load())) > 2*l.s.ttl/3
}

// ErrLeaseLost is AwaitFresh's error for a lease that is gone: replaced,
// expired, or stopped.
var ErrLeaseLost = errors.New("lease lost")

// AwaitFresh returns nil at once if the lease is not stale, else waits
// until a renewal makes it fresh again (a quorum loss or an election
// shorter than what is left of its TTL), ErrLeaseLost once Keep has given
// it up, or ctx's error. What its holder would publish waits meanwhile:
// the lease may be expiring, and a run's end another writer's to write.
func (l *Lease) AwaitFresh(ctx context.Context) error {
	if !l.Stale() {
		return nil
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			if l.Stale() {
				return ErrLeaseLost
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if !l.Stale() {
				return nil
			}
		}
	}
}

// Stop stops renewing and waits for the renewing goroutine. It is
// idempotent and does not delete the lease (End does).
func (l *Lease) Stop() {
	l.once.Do(func() {
		if l.stop == nil {
			close(l.done)
			return
		}
		l.stop()
	})
	<-l.done
}

// Recorded is one write of a run record, as a durable consumer of the
// runs bucket's stream delivers it (see Store.Follow).
type Recorded struct {
	Record wire.RunRecord
	// Deleted is set for a delete or purge of the record; Record is then
	// zero.
	Deleted bool
}

// Follow creates (or binds to) the durable pull consumer durable on the
// runs bucket's stream: it delivers every record write, the ones stored
// before it was created included, for a reader that reacts to runs
// changing state (the exporter reacts to ended runs). Reading records
// this way writes nothing; decode each delivery with DecodeRecorded. A
// service calls it as it starts: while JetStream is not ready it waits,
// logging that (jsretry.Await), until ctx ends.
func (s *Store) Follow(ctx context.Context, durable string, ackWait time.Duration, maxAckPending int) (jetstream.Consumer, error) {
	cons, err := jsretry.Await(ctx, s.js.Conn(), s.logger, "consumer "+durable, func(ctx context.Context) (jetstream.Consumer, error) {
		return s.js.CreateOrUpdateConsumer(ctx, "KV_"+s.runsName, jetstream.ConsumerConfig{
			Durable:       durable,
			FilterSubject: "$KV." + s.runsName + ".>",
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       ackWait,
			MaxAckPending: maxAckPending,
			MaxDeliver:    -1,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s on the run records: %w", durable, err)
	}
	return cons, nil
}

// DecodeRecorded decodes a delivery of a Follow consumer. A record that
// expired (its retention passed) is simply removed, with no delivery; a
// server's marker of a removal, should a bucket have them, is Deleted like
// a delete or purge.
func DecodeRecorded(msg jetstream.Msg) (Recorded, error) {
	if h := msg.Headers(); h != nil {
		if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" || h.Get(jetstream.MarkerReasonHeader) != "" {
			return Recorded{Deleted: true}, nil
		}
	}
	rec, err := wire.Decode[wire.RunRecord](msg.Data())
	if err != nil {
		return Recorded{}, fmt.Errorf("decode run record %s: %w", msg.Subject(), err)
	}
	return Recorded{Record: rec}, nil
}

// Watch follows the run records of the mesh of js and names, read only,
// for a reader that keeps its own view of them (the gateway console's
// index): every current record, then nil once they have all been
// delivered, then every write and delete as it happens, until ctx ends or
// the watcher is stopped. Records are wire.RunRecord, written by this
// package only.
func Watch(ctx context.Context, js jetstream.JetStream, names subject.Names) (jetstream.KeyWatcher, error) {
	kv, err := js.KeyValue(ctx, names.RunsBucket())
	if err != nil {
		return nil, fmt.Errorf("open the runs bucket: %w", err)
	}
	return kv.WatchAll(ctx)
}
