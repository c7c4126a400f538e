package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// RoutingLoad is the shape of a routing measurement: Runs fixture runs
// submitted by Submitters goroutines at once, each submitting one run at a
// time and waiting for JetStream to store it (client.Submit), for as long
// as runs are left.
type RoutingLoad struct {
	Runs       int
	Submitters int
}

func (l RoutingLoad) validate() error {
	if l.Runs < 1 || l.Submitters < 1 {
		return fmt.Errorf("%w: routing load needs runs and submitters > 0, got %+v", ErrInvalidConfig, l)
	}
	return nil
}

// RoutingBatch is one batch of run requests, all of one tenant of their
// own, and their encodings. Payloads[i] is the message body client.Submit
// publishes for Requests[i] (it sets V and encodes the request with
// wire.Marshal, as NewRoutingBatch does), so that the raw baseline
// publishes exactly the bytes the mesh's routers take.
type RoutingBatch struct {
	Load     RoutingLoad
	Tenant   string
	Requests []wire.RunRequest
	Payloads [][]byte
}

// NewRoutingBatch returns l.Runs requests for the built-in fixture profile
// (a valid fixture request: a prompt, no script), each with a fresh run
// id, under a fresh tenant. The tenant keeps one batch's events and
// records apart from every other batch's.
func NewRoutingBatch(l RoutingLoad) (RoutingBatch, error) {
	if err := l.validate(); err != nil {
		return RoutingBatch{}, err
	}
	req, err := wire.Marshal(map[string]any{"prompt": "route me"})
	if err != nil {
		return RoutingBatch{}, err
	}
	b := RoutingBatch{
		Load: l, Tenant: "routing-" + client.NewRunID(),
		Requests: make([]wire.RunRequest, l.Runs), Payloads: make([][]byte, l.Runs),
	}
	for i := range b.Requests {
		b.Requests[i] = wire.RunRequest{
			// The newest version, as the mesh's client declares it: a v1
			// request's accepted and routed would be two events, not one
			// (docs/contract.md §3.9).
			V: wire.MaxVersion, RunID: client.NewRunID(), Tenant: b.Tenant, Principal: "bench",
			Profile: "fixture", Request: req,
		}
		if b.Payloads[i], err = wire.Marshal(&b.Requests[i]); err != nil {
			return RoutingBatch{}, err
		}
	}
	return b, nil
}

// index maps each run id of b to its position.
func (b RoutingBatch) index() map[string]int {
	ix := make(map[string]int, len(b.Requests))
	for i, r := range b.Requests {
		ix[r.RunID] = i
	}
	return ix
}

// fanOut calls f(i) for every i in [0, n) from workers goroutines at once,
// each taking the next i when its last call returned. It blocks until all
// have returned. It stops handing out work after the first error, which
// it returns, or when ctx ends, returning ctx's error unless every call
// had already succeeded.
func fanOut(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next, done atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if first == nil && done.Load() < int64(n) {
		return ctx.Err()
	}
	return first
}

// drained blocks until the durable consumer c has nothing pending and
// nothing awaiting an acknowledgement: every message stored before the
// call has been delivered and acknowledged. It asks the server again as
// soon as each answer arrives; the measurements call it only once their
// last message has been seen, so it waits for at most the last few acks.
func drained(ctx context.Context, c jetstream.Consumer) error {
	for {
		info, err := c.Info(ctx)
		if err != nil {
			return fmt.Errorf("ack state of consumer %s: %w", c.CachedInfo().Name, err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return nil
		}
	}
}

// Defaults of RoutersConfig.
const DefaultRouters = 2

// RoutersConfig configures StartRouters.
type RoutersConfig struct {
	// Routers is how many routers share the submit stream (default 2).
	Routers int
	// WorkQueueMax is the topology's WorkQueueMax (default
	// DefaultWorkQueueMax, 100,000). No runner takes the dispatched work;
	// every measurement removes its own after checking it, so a batch
	// needs room for its own runs only.
	WorkQueueMax int64
	// Router configures each router (zero: the router's defaults, 16
	// workers).
	Router router.Config
	// Log receives the routers' logs (default: warnings and errors on
	// stderr).
	Log *slog.Logger
}

func (c *RoutersConfig) setDefaults() {
	if c.Routers == 0 {
		c.Routers = DefaultRouters
	}
	if c.WorkQueueMax == 0 {
		c.WorkQueueMax = DefaultWorkQueueMax
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
}

// Routers is several routers on one server, each a mesh.Run of its own
// with only the router (WithoutRunner, WithoutSweeper), its own
// connection (service.Connect, as the router binary connects) and its own
// metrics, all sharing the submit stream's durable consumer; the fixture
// adapter and the built-in profiles; and a client and an observer, each
// on a connection of its own. Measurements must not overlap: each removes
// the work it dispatched and reaps its consumers.
type Routers struct {
	client   *client.Client
	js       jetstream.JetStream // the observer's
	names    subject.Names
	submit   jetstream.Consumer // the routers' shared durable consumer
	events   jetstream.Stream
	work     jetstream.Stream
	runs     jetstream.KeyValue
	runsName string // the runs bucket's stream, for reaping its watchers
	metrics  []*service.Metrics
}

// StartRouters starts cfg.Routers routers on srv, one after the other,
// and blocks until each one consumes submissions. They are stopped when
// tb ends; tb fails if one returned an error or did not stop within
// DefaultStopTimeout.
func StartRouters(tb testing.TB, srv *server.Server, cfg RoutersConfig) *Routers {
	tb.Helper()
	cfg.setDefaults()
	fx, err := fixture.New(fixture.Config{ScriptsDir: tb.TempDir()})
	if err != nil {
		tb.Fatalf("bench: fixture: %v", err)
	}
	adapters, err := adapter.NewRegistry(fx)
	if err != nil {
		tb.Fatalf("bench: adapters: %v", err)
	}
	profiles := profile.Builtin()
	r := &Routers{}
	for i := range cfg.Routers {
		nc, js, err := service.Connect(srv.ClientURL(), fmt.Sprintf("bench-router-%d", i), cfg.Log)
		if err != nil {
			tb.Fatalf("bench: %v", err)
		}
		tb.Cleanup(nc.Close) // after the router stopped: cleanups run last first
		d := service.Deps{
			NC: nc, JS: js, Log: cfg.Log,
			Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{},
		}
		r.metrics = append(r.metrics, d.Metrics)
		mc := mesh.Config{Router: cfg.Router, WithoutRunner: true, WithoutSweeper: true}
		mc.Topology.WorkQueueMax = cfg.WorkQueueMax
		mc.Topology.WorkQueueTenantMax = cfg.WorkQueueMax

		exited := runMesh(tb, fmt.Sprintf("router %d", i), d, profiles, adapters, mc)
		// The router adds its readiness check once its consume loop has
		// started pulling from the shared consumer.
		natstest.Eventually(tb, 10*time.Second, func() error {
			if err := exited(); err != nil {
				return err
			}
			return d.Health.Ready()
		})
	}

	cnc, _ := natstest.Connect(tb, srv)
	if r.client, err = client.New(cnc, r.names); err != nil {
		tb.Fatalf("bench: client: %v", err)
	}
	_, r.js = natstest.Connect(tb, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r.submit, err = r.js.Consumer(ctx, r.names.SubmitStream(), r.names.RouterConsumer()); err != nil {
		tb.Fatalf("bench: router consumer: %v", err)
	}
	if r.events, err = r.js.Stream(ctx, r.names.EventsStream()); err != nil {
		tb.Fatalf("bench: %v", err)
	}
	if r.work, err = r.js.Stream(ctx, r.names.WorkStream()); err != nil {
		tb.Fatalf("bench: %v", err)
	}
	if r.runs, err = r.js.KeyValue(ctx, r.names.RunsBucket()); err != nil {
		tb.Fatalf("bench: %v", err)
	}
	st, err := r.runs.Status(ctx)
	if err != nil {
		tb.Fatalf("bench: %v", err)
	}
	r.runsName = st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Name
	return r
}

// ConsumerConfig is the routers' shared durable consumer as the server
// holds it, for the raw baseline to consume alike (StartRawQueue).
func (r *Routers) ConsumerConfig() jetstream.ConsumerConfig { return r.submit.CachedInfo().Config }

// Routed is what one or more routing batches did.
type Routed struct {
	// Throughput counts the runs submitted, in the time from the first
	// submission to the moment every submission was routed and acked.
	Throughput
	// Events counts runs whose events are exactly accepted (seq 1) then
	// routed (seq 2): as the observer received them, and as the events
	// stream holds them.
	Events int
	// Rejected counts runs whose second event was rejected instead.
	Rejected int
	// Records counts runs whose record in the runs bucket says routed.
	Records int
	// Work counts the work messages dispatched, and WorkRuns the distinct
	// submitted run ids among them.
	Work, WorkRuns int
	// Stray counts events, records and work of run ids that were not
	// submitted in the batch.
	Stray int
	// ByRouter is the runs each router counted routed (its
	// agentmesh_runs_total{state="routed"}).
	ByRouter []int
}

// Add returns the sum of r and u, for accumulating several batches.
func (r Routed) Add(u Routed) Routed {
	by := make([]int, max(len(r.ByRouter), len(u.ByRouter)))
	for i := range by {
		if i < len(r.ByRouter) {
			by[i] += r.ByRouter[i]
		}
		if i < len(u.ByRouter) {
			by[i] += u.ByRouter[i]
		}
	}
	return Routed{
		Throughput: r.Throughput.Add(u.Throughput), Events: r.Events + u.Events, Rejected: r.Rejected + u.Rejected,
		Records: r.Records + u.Records, Work: r.Work + u.Work, WorkRuns: r.WorkRuns + u.WorkRuns,
		Stray: r.Stray + u.Stray, ByRouter: by,
	}
}

// ExactlyOnce returns nil if every submitted run was routed exactly once:
// one work message each, events exactly [accepted routed], its record
// routed, counted by exactly one router, and nothing else. Otherwise it
// names every count that differs.
func (r Routed) ExactlyOnce() error {
	n := r.Items
	byRouter := 0
	for _, c := range r.ByRouter {
		byRouter += c
	}
	var errs []error
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"runs with events exactly [accepted routed]", r.Events, n},
		{"runs rejected", r.Rejected, 0},
		{"records routed", r.Records, n},
		{"work messages", r.Work, n},
		{"distinct runs among the work messages", r.WorkRuns, n},
		{"events, records and work of runs not submitted", r.Stray, 0},
		{"runs counted routed by the routers", byRouter, n},
	} {
		if c.got != c.want {
			errs = append(errs, fmt.Errorf("%s: %d, want %d", c.what, c.got, c.want))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%d runs not routed exactly once: %w", n, err)
	}
	return nil
}

// Route submits every request of b through the client, from
// b.Load.Submitters goroutines at once, and times from the first
// submission to the moment every run is routed: an observer (an ordered
// consumer on the batch tenant's events, started before the clock) has
// seen every run's routed (or rejected) status, and then the shared
// consumer has nothing pending or awaiting an ack, i.e. the router
// also wrote the routed record and acked the submission.
//
// After the clock, untimed, it checks that every run was routed exactly
// once (Routed; see Routed.ExactlyOnce): the events stream's messages per
// run, each run's record (a key-value watch), every work message on the
// work stream, which it then acknowledges and purges, and the routers'
// metrics. It then reaps the observer's and the watcher's consumers.
// It returns an error for a failed submission or an infrastructure
// failure, not for a run routed other than once.
func (r *Routers) Route(ctx context.Context, b RoutingBatch) (Routed, error) {
	if err := b.Load.validate(); err != nil {
		return Routed{}, err
	}
	if len(b.Requests) != b.Load.Runs {
		return Routed{}, fmt.Errorf("%w: batch of %d requests for %d runs", ErrInvalidConfig, len(b.Requests), b.Load.Runs)
	}
	before := r.routedByRouter()
	ix := b.index()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cons, err := r.js.OrderedConsumer(ctx, r.names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{r.names.Events(b.Tenant, "*")},
	})
	if err != nil {
		return Routed{}, fmt.Errorf("observe %s: %w", b.Tenant, err)
	}
	msgs, err := cons.Messages()
	if err != nil {
		return Routed{}, fmt.Errorf("observe %s: %w", b.Tenant, err)
	}
	defer msgs.Stop()
	defer context.AfterFunc(ctx, msgs.Stop)()

	start := time.Now()
	submitted := make(chan error, 1)
	go func() {
		err := fanOut(ctx, len(b.Requests), b.Load.Submitters, func(ctx context.Context, i int) error {
			_, err := r.client.Submit(ctx, b.Requests[i])
			return err
		})
		if err != nil {
			cancel() // the observer would wait for runs never submitted
		}
		submitted <- err
	}()
	seen, obsErr := observe(msgs, ix)
	if obsErr == nil {
		obsErr = drained(ctx, r.submit)
	}
	elapsed := time.Since(start)
	if err := <-submitted; err != nil {
		return Routed{}, fmt.Errorf("submit: %w", err)
	}
	if obsErr != nil {
		if ctx.Err() != nil {
			obsErr = fmt.Errorf("%w (%v)", ctx.Err(), obsErr)
		}
		return Routed{}, fmt.Errorf("observe %s: %d of %d runs routed or rejected: %w", b.Tenant, seen.outcomes, len(ix), obsErr)
	}
	msgs.Stop()

	got := Routed{Throughput: Throughput{Items: len(b.Requests), Elapsed: elapsed}, Stray: seen.stray}
	if err := r.checkEvents(ctx, b.Tenant, ix, seen, &got); err != nil {
		return Routed{}, err
	}
	if err := r.checkRecords(ctx, b.Tenant, ix, &got); err != nil {
		return Routed{}, err
	}
	if err := r.takeWork(ctx, ix, &got); err != nil {
		return Routed{}, err
	}
	for i, n := range r.routedByRouter() {
		got.ByRouter = append(got.ByRouter, n-before[i])
	}
	if err := reap(ctx, r.js, r.names.EventsStream()); err != nil {
		return Routed{}, err
	}
	if err := reap(ctx, r.js, r.runsName); err != nil {
		return Routed{}, err
	}
	return got, nil
}

// seenEvents is what the observer received: the first two states of each
// run, by its index in the batch, and how many events came after them.
type seenEvents struct {
	first, second []wire.State
	extra         []int
	outcomes      int // runs whose second event has arrived
	stray         int // events of runs not in the batch
}

// observe reads events until every run of ix has its second event, the
// router's routed or rejected. It returns what it saw, also on error.
func observe(msgs jetstream.MessagesContext, ix map[string]int) (seenEvents, error) {
	s := seenEvents{first: make([]wire.State, len(ix)), second: make([]wire.State, len(ix)), extra: make([]int, len(ix))}
	for s.outcomes < len(ix) {
		msg, err := msgs.Next()
		if err != nil {
			return s, err
		}
		batch, err := wire.Decode[wire.Event](msg.Data())
		if err != nil {
			return s, fmt.Errorf("event on %s: %w", msg.Subject(), err)
		}
		i, ok := ix[batch.RunID]
		if !ok {
			s.stray++
			continue
		}
		for ev := range batch.Expand() {
			var st wire.State
			if ev.Kind == wire.KindStatus && ev.Status != nil {
				st = ev.Status.State
			}
			switch {
			case ev.Seq == 1 && s.first[i] == "":
				s.first[i] = st
			case ev.Seq == 2 && s.second[i] == "":
				s.second[i] = st
				s.outcomes++
			default:
				s.extra[i]++
			}
		}
	}
	return s, nil
}

// checkEvents counts the runs whose events the observer saw as exactly
// accepted then routed and of which the events stream holds exactly one message (the router publishes both at once),
// and counts the stream's subjects of runs not submitted as stray. Every
// event of a run is stored before its submission is acked, so after
// drained the stream holds all of them.
func (r *Routers) checkEvents(ctx context.Context, tenant string, ix map[string]int, seen seenEvents, got *Routed) error {
	info, err := r.events.Info(ctx, jetstream.WithSubjectFilter(r.names.Events(tenant, "*")))
	if err != nil {
		return fmt.Errorf("events of %s: %w", tenant, err)
	}
	bySubject := make(map[string]int, len(ix))
	for id, i := range ix {
		bySubject[r.names.Events(tenant, id)] = i
	}
	stored := make([]uint64, len(ix))
	for subj, n := range info.State.Subjects {
		i, ok := bySubject[subj]
		if !ok {
			got.Stray++
			continue
		}
		stored[i] = n
	}
	for i := range stored {
		if seen.first[i] == wire.StateRejected || seen.second[i] == wire.StateRejected {
			got.Rejected++
		}
		if seen.first[i] == wire.StateAccepted && seen.second[i] == wire.StateRouted && seen.extra[i] == 0 && stored[i] == 1 {
			got.Events++
		}
	}
	return nil
}

// checkRecords counts the batch's records that say routed, reading the
// last value of each of the tenant's keys through a key-value watch.
func (r *Routers) checkRecords(ctx context.Context, tenant string, ix map[string]int, got *Routed) error {
	w, err := r.runs.Watch(ctx, subject.RunKey(tenant, "*"), jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("records of %s: %w", tenant, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("records of %s: watch closed", tenant)
			}
			if e == nil { // every current value has been delivered
				return nil
			}
			rec, err := wire.Decode[wire.RunRecord](e.Value())
			if err != nil {
				return fmt.Errorf("record %s: %w", e.Key(), err)
			}
			if _, ok := ix[rec.RunID]; !ok || e.Key() != subject.RunKey(tenant, rec.RunID) {
				got.Stray++
				continue
			}
			if rec.State == wire.StateRouted {
				got.Records++
			}
		case <-ctx.Done():
			return fmt.Errorf("records of %s: %w", tenant, ctx.Err())
		}
	}
}

// workFetch is how many work messages takeWork asks for at a time.
const workFetch = 500

// takeWork reads every message on the work stream through an ephemeral
// consumer, counting them and the distinct submitted runs they carry,
// acknowledges each, and purges the stream, so that the next batch finds
// it empty. No runner consumes here, so all of it is this batch's.
func (r *Routers) takeWork(ctx context.Context, ix map[string]int, got *Routed) error {
	info, err := r.work.Info(ctx)
	if err != nil {
		return fmt.Errorf("work: %w", err)
	}
	cons, err := r.work.CreateConsumer(ctx, jetstream.ConsumerConfig{
		AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Minute,
	})
	if err != nil {
		return fmt.Errorf("read work: %w", err)
	}
	name := cons.CachedInfo().Name
	seen := make([]bool, len(ix))
	for got.Work < int(info.State.Msgs) {
		batch, err := cons.Fetch(min(workFetch, int(info.State.Msgs)-got.Work), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("read work: %w", err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			got.Work++
			wk, err := wire.Decode[wire.Work](msg.Data())
			if err != nil {
				return fmt.Errorf("work message: %w", err)
			}
			i, ok := ix[wk.RunID]
			switch {
			case !ok:
				got.Stray++
			case !seen[i]:
				seen[i] = true
				got.WorkRuns++
			}
			if err := msg.Ack(); err != nil {
				return fmt.Errorf("ack work of %s: %w", wk.RunID, err)
			}
		}
		if err := batch.Error(); err != nil {
			return fmt.Errorf("read work: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("read work: %d of %d messages, then none", got.Work, info.State.Msgs)
		}
	}
	if err := r.work.DeleteConsumer(ctx, name); err != nil {
		return fmt.Errorf("read work: %w", err)
	}
	if err := r.work.Purge(ctx); err != nil {
		return fmt.Errorf("purge work: %w", err)
	}
	return nil
}

// routedByRouter reads each router's count of routed fixture runs.
func (r *Routers) routedByRouter() []int {
	out := make([]int, len(r.metrics))
	for i, m := range r.metrics {
		var dm dto.Metric
		if err := m.Runs.WithLabelValues(string(wire.StateRouted), "fixture").Write(&dm); err == nil {
			out[i] = int(dm.GetCounter().GetValue())
		}
	}
	return out
}

// The raw baseline's work-queue stream, configured as topology.Ensure
// configures the submit stream (work-queue retention, file storage, a
// two-minute duplicate window for the Nats-Msg-Id each message carries).
const (
	RawQueueStream   = "BENCH_RAW_QUEUE"
	rawQueueConsumer = "bench-raw-queue"
)

// rawQueueSubject is where the baseline publishes a tenant's requests,
// one subject per tenant as agentmesh.submit.<tenant> is.
func rawQueueSubject(tenant string) string { return "bench.queue." + tenant }

// RawQueue is the baseline of Routers: plain JetStream work-queue publish
// and ack of the same payloads. A publishing connection (as the client's)
// publishes each payload and waits for its acknowledgement; consuming
// connections (as many as there are routers) take them through one shared
// durable pull consumer configured as the routers' is, and ack each one
// as soon as it arrives, doing nothing else with it.
type RawQueue struct {
	pub    jetstream.JetStream
	subs   []jetstream.Consumer // the durable, as each consuming connection sees it
	stream jetstream.Stream
	pull   int
}

// StartRawQueue connects 1+consumers times to srv, creates RawQueueStream
// and the durable pull consumer, taking its ack policy, ack wait, max ack
// pending and max deliver from like (Routers.ConsumerConfig). Each
// consuming connection pulls at most like.MaxAckPending/2 messages at a
// time, as a router pulls 2×Workers with 4×Workers pending. The
// connections are closed when tb ends.
func StartRawQueue(tb testing.TB, srv *server.Server, like jetstream.ConsumerConfig, consumers int) *RawQueue {
	tb.Helper()
	if consumers < 1 || like.MaxAckPending < 2 {
		tb.Fatalf("bench: raw queue: %d consumers, max ack pending %d", consumers, like.MaxAckPending)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := &RawQueue{pull: like.MaxAckPending / 2}
	_, q.pub = natstest.Connect(tb, srv)
	st, err := q.pub.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: RawQueueStream, Subjects: []string{rawQueueSubject(">")},
		Retention: jetstream.WorkQueuePolicy, Duplicates: 2 * time.Minute, Storage: jetstream.FileStorage,
	})
	if err != nil {
		tb.Fatalf("bench: create stream %s: %v", RawQueueStream, err)
	}
	q.stream = st
	if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: rawQueueConsumer, AckPolicy: like.AckPolicy, AckWait: like.AckWait,
		MaxAckPending: like.MaxAckPending, MaxDeliver: like.MaxDeliver,
	}); err != nil {
		tb.Fatalf("bench: create consumer %s: %v", rawQueueConsumer, err)
	}
	for range consumers {
		_, js := natstest.Connect(tb, srv)
		c, err := js.Consumer(ctx, RawQueueStream, rawQueueConsumer)
		if err != nil {
			tb.Fatalf("bench: consumer %s: %v", rawQueueConsumer, err)
		}
		q.subs = append(q.subs, c)
	}
	return q
}

// Route publishes every payload of b, each with its run id as
// Nats-Msg-Id as client.Submit sends it, from b.Load.Submitters
// goroutines at once, each waiting for each acknowledgement, while the
// consuming connections take and ack them. The consumers start pulling
// before the clock, as idle routers do. It returns the messages acked
// and the time from the first publish to the moment the last one was
// acked and the consumer has nothing pending or awaiting an ack (as
// Routers.Route ends). It fails unless every run id of b was acked
// exactly once and the stream is left empty.
func (q *RawQueue) Route(ctx context.Context, b RoutingBatch) (Throughput, error) {
	if err := b.Load.validate(); err != nil {
		return Throughput{}, err
	}
	n := len(b.Payloads)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait() // deferred before the iterators' Stop, so it runs after them
	iters := make([]jetstream.MessagesContext, len(q.subs))
	for i, c := range q.subs {
		it, err := c.Messages(jetstream.PullMaxMessages(q.pull))
		if err != nil {
			return Throughput{}, fmt.Errorf("consume %s: %w", rawQueueConsumer, err)
		}
		defer it.Stop()
		iters[i] = it
	}
	var acked atomic.Int64
	all := make(chan struct{})
	ids := make([][]string, len(iters))
	errs := make([]error, len(iters))
	for i, it := range iters {
		wg.Go(func() {
			for {
				msg, err := it.Next()
				if err != nil {
					if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
						errs[i] = err
						cancel()
					}
					return
				}
				if err := msg.Ack(); err != nil {
					errs[i] = fmt.Errorf("ack: %w", err)
					cancel()
					return
				}
				ids[i] = append(ids[i], msg.Headers().Get(jetstream.MsgIDHeader))
				if acked.Add(1) == int64(n) {
					close(all)
				}
			}
		})
	}

	subj := rawQueueSubject(b.Tenant)
	start := time.Now()
	published := make(chan error, 1)
	go func() {
		published <- fanOut(ctx, n, b.Load.Submitters, func(ctx context.Context, i int) error {
			msg := nats.NewMsg(subj)
			msg.Data = b.Payloads[i]
			msg.Header.Set(jetstream.MsgIDHeader, b.Requests[i].RunID)
			if _, err := q.pub.PublishMsg(ctx, msg); err != nil {
				return fmt.Errorf("publish %s: %w", b.Requests[i].RunID, err)
			}
			return nil
		})
	}()
	var waitErr error
	select {
	case <-all:
		waitErr = drained(ctx, q.subs[0])
	case <-ctx.Done():
		waitErr = ctx.Err()
	}
	elapsed := time.Since(start)
	pubErr := <-published
	for _, it := range iters {
		it.Stop()
	}
	wg.Wait()
	if err := errors.Join(append(errs, pubErr)...); err != nil {
		return Throughput{}, err
	}
	if waitErr != nil {
		return Throughput{}, fmt.Errorf("raw queue: %d of %d acked: %w", acked.Load(), n, waitErr)
	}

	ix := b.index()
	seen := make([]bool, n)
	distinct := 0
	for _, l := range ids {
		for _, id := range l {
			if i, ok := ix[id]; ok && !seen[i] {
				seen[i] = true
				distinct++
			}
		}
	}
	info, err := q.stream.Info(ctx)
	if err != nil {
		return Throughput{}, fmt.Errorf("raw queue: %w", err)
	}
	if got := acked.Load(); got != int64(n) || distinct != n || info.State.Msgs != 0 {
		return Throughput{}, fmt.Errorf("raw queue: %d acks of %d distinct runs, want %d each; %d messages left on the stream", got, distinct, n, info.State.Msgs)
	}
	return Throughput{Items: n, Elapsed: elapsed}, nil
}
