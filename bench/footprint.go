package bench

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Footprint is this process's memory in use (heap and goroutine stacks,
// runtime.MemStats HeapInuse + StackInuse, each taken right after a
// garbage collection) at three moments of holding Runs runs in flight.
type Footprint struct {
	Runs int
	// Idle is before anything: the mesh started, no follower, no run.
	Idle uint64
	// Followed is with a client follower (client.Events) waiting on each
	// of the runs, none submitted yet.
	Followed uint64
	// InFlight is with every run submitted and running (its follower has
	// yielded its running status) and held there by the fixture adapter.
	InFlight uint64
	// IdleStacks, FollowedStacks and InFlightStacks are the goroutine
	// stacks' part (StackInuse) of Idle, Followed and InFlight.
	IdleStacks, FollowedStacks, InFlightStacks uint64
}

// PerRun is (InFlight - Idle) / Runs: followers and mesh.
func (f Footprint) PerRun() float64 { return f.per(f.Idle, f.InFlight) }

// FollowerPerRun is (Followed - Idle) / Runs: a waiting follower's share.
func (f Footprint) FollowerPerRun() float64 { return f.per(f.Idle, f.Followed) }

// MeshPerRun is (InFlight - Followed) / Runs: the mesh's share of a run in
// flight, with whatever its follower holds once it reads the run's events.
func (f Footprint) MeshPerRun() float64 { return f.per(f.Followed, f.InFlight) }

func (f Footprint) per(from, to uint64) float64 {
	if f.Runs == 0 {
		return 0
	}
	return (float64(to) - float64(from)) / float64(f.Runs)
}

// inUse collects garbage (twice, so that what the first one finalized is
// gone too) and returns HeapInuse + StackInuse, and StackInuse.
func inUse() (total, stacks uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse, ms.StackInuse
}

// FootprintProfilesEnv, set to a directory, makes HeldFootprint write a
// heap profile (in-use space, right after the measurement's garbage
// collections) and a goroutine profile at each of its three moments into
// it: heap-idle.pb.gz, goroutine-idle.txt, and the same for "followed"
// and "inflight". A later measurement overwrites an earlier one's. Read
// them with `go tool pprof -sample_index=inuse_space -base
// heap-followed.pb.gz heap-inflight.pb.gz` (what the runs added) and so on.
const FootprintProfilesEnv = "AGENTMESH_BENCH_FOOTPRINT_PROFILES"

// writeProfiles writes the profiles of moment into the directory
// FootprintProfilesEnv names, if it is set.
func writeProfiles(moment string) error {
	dir := os.Getenv(FootprintProfilesEnv)
	if dir == "" {
		return nil
	}
	write := func(name string, kind string, debug int) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("footprint profile: %w", err)
		}
		err = pprof.Lookup(kind).WriteTo(f, debug)
		return errors.Join(err, f.Close())
	}
	return errors.Join(
		write("heap-"+moment+".pb.gz", "heap", 0),
		write("goroutine-"+moment+".txt", "goroutine", 1),
	)
}

// holdDelayMS is the fixture delay_ms of a held run: the adapter waits
// that long before the run's one chunk, far longer than a measurement, so
// the run stays in flight until it is cancelled.
const holdDelayMS = fixture.MaxDelayMS

// submitters bounds the goroutines submitting or cancelling at once.
const submitters = 64

// Follow is how HeldFootprint follows its runs.
type Follow string

const (
	// FollowEach follows each run with client.Events: a consumer a run.
	FollowEach Follow = "events"
	// FollowTenant follows every run through one client.TenantFollower:
	// one consumer on the tenant's events, an iterator a run.
	FollowTenant Follow = "tenant"
)

// HeldFootprint measures the memory of n runs held in flight at once,
// followed as by says. The runner host must execute at least n fixture
// runs at once (MeshConfig.MaxActive); the server should be in another
// process (StartServerProcess), or its memory is counted too.
//
// It takes Idle, then starts a follower for each of n fresh run ids
// (FollowEach: client.Events, and it waits until the events stream holds
// their n consumers; FollowTenant: one client.TenantFollower, started
// after Idle and so counted in the followers' share, and its Events, and
// it waits until the follower feeds all n from its consumer) (Followed),
// then submits the n runs, each a fixture run whose one chunk
// waits holdDelayMS, and waits until every follower has yielded the run's
// running status (InFlight). Then it cancels every run (client.Cancel),
// checks that each ended cancelled without a chunk, and reaps the
// released consumers. Runs of the mesh's other measurements must not be
// in flight meanwhile.
func (m *Mesh) HeldFootprint(ctx context.Context, n int, by Follow) (Footprint, error) {
	if n < 1 {
		return Footprint{}, fmt.Errorf("%w: footprint needs runs > 0, got %d", ErrInvalidConfig, n)
	}
	if by != FollowEach && by != FollowTenant {
		return Footprint{}, fmt.Errorf("%w: footprint follows by %q, want %q or %q", ErrInvalidConfig, by, FollowEach, FollowTenant)
	}
	name, err := m.script(Workload{Runs: 1, Chunks: 1, ChunkBytes: 64})
	if err != nil {
		return Footprint{}, err
	}
	req, err := wire.Marshal(&heldRequest{Prompt: "bench", Script: name, DelayMS: holdDelayMS})
	if err != nil {
		return Footprint{}, err
	}
	consumers0, err := m.consumers(ctx)
	if err != nil {
		return Footprint{}, err
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = client.NewRunID()
	}
	fp := Footprint{Runs: n}
	fp.Idle, fp.IdleStacks = inUse()
	if err := writeProfiles("idle"); err != nil {
		return Footprint{}, err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := func(id string) iter.Seq2[wire.Event, error] { return m.client.Events(ctx, Tenant, id, 1) }
	followed := func() (bool, error) {
		c, err := m.consumers(ctx)
		return c >= consumers0+n, err
	}
	if by == FollowTenant {
		tf, err := m.client.FollowTenant(ctx, Tenant)
		if err != nil {
			return Footprint{}, err
		}
		defer func() { _ = tf.Close() }()
		events = func(id string) iter.Seq2[wire.Event, error] { return tf.Events(ctx, id, 1) }
		followed = func() (bool, error) { return tf.Following() == n, nil }
	}
	var running atomic.Int64
	allRunning := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			errs[i] = m.held(id, events(id), func() {
				if running.Add(1) == int64(n) {
					close(allRunning)
				}
			})
			if errs[i] != nil {
				cancel() // a lost run would otherwise hold the others for good
			}
		})
	}
	fail := func(err error) (Footprint, error) {
		cancel()
		wg.Wait()
		return Footprint{}, errors.Join(append([]error{err}, errs...)...)
	}
	if err := poll(ctx, followed); err != nil {
		return fail(fmt.Errorf("waiting for %d followers: %w", n, err))
	}
	fp.Followed, fp.FollowedStacks = inUse()
	if err := writeProfiles("followed"); err != nil {
		return fail(err)
	}

	if err := fanOut(ctx, n, submitters, func(ctx context.Context, i int) error {
		_, err := m.client.Submit(ctx, wire.RunRequest{RunID: ids[i], Tenant: Tenant, Principal: "bench", Profile: "fixture", Request: req})
		return err
	}); err != nil {
		return fail(err)
	}
	select {
	case <-allRunning:
	case <-ctx.Done():
		return fail(fmt.Errorf("waiting for %d runs to run: %d running: %w", n, running.Load(), ctx.Err()))
	}
	fp.InFlight, fp.InFlightStacks = inUse()
	if err := writeProfiles("inflight"); err != nil {
		return fail(err)
	}

	if err := fanOut(ctx, n, submitters, func(ctx context.Context, i int) error {
		reply, err := m.client.Cancel(ctx, Tenant, ids[i])
		if err != nil {
			return err
		}
		if !reply.Cancelled {
			return fmt.Errorf("cancel %s: not cancelled: %+v", ids[i], reply)
		}
		return nil
	}); err != nil {
		return fail(err)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Footprint{}, err
	}
	return fp, reap(ctx, m.js, m.events)
}

// heldRequest is the fixture adapter's request with a delay.
type heldRequest struct {
	Prompt  string `msgpack:"prompt"`
	Script  string `msgpack:"script"`
	DelayMS int    `msgpack:"delay_ms"`
}

// held follows run id's events from before it is submitted: it calls
// running when the run's running status arrives and returns nil once the
// run ended cancelled with no chunk, an error otherwise.
func (m *Mesh) held(id string, events iter.Seq2[wire.Event, error], running func()) error {
	var last wire.Event
	for ev, err := range events {
		if err != nil {
			return fmt.Errorf("run %s: last event %s: %w", id, describe(last), err)
		}
		last = ev
		switch {
		case ev.Kind == wire.KindChunk:
			return fmt.Errorf("run %s: a chunk (%s) while held", id, describe(ev))
		case ev.Status != nil && ev.Status.State == wire.StateRunning:
			running()
		}
	}
	switch {
	case !last.Terminal():
		return fmt.Errorf("run %s: events ended at %s without a terminal status", id, describe(last))
	case last.Status.State != wire.StateCancelled:
		return fmt.Errorf("run %s: ended %s, want cancelled: %v", id, last.Status.State, last.Status.Error)
	}
	return nil
}

// consumers returns how many consumers the events stream has.
func (m *Mesh) consumers(ctx context.Context) (int, error) {
	st, err := m.js.Stream(ctx, m.events)
	if err != nil {
		return 0, fmt.Errorf("events stream: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("events stream: %w", err)
	}
	return info.State.Consumers, nil
}

// pollEvery is how often poll asks.
const pollEvery = 10 * time.Millisecond

// poll calls done every pollEvery until it reports true or an error, or
// ctx ends.
func poll(ctx context.Context, done func() (bool, error)) error {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
