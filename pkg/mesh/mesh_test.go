package mesh_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/cost"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	natstest.RunClusterNode() // when the chaos cluster test started this binary as a JetStream node
	if mode := os.Getenv(faultSleeperEnv); mode != "" {
		os.Exit(runFaultSleeper(mode))
	}
	if dir := os.Getenv(faultDirEnv); dir != "" {
		os.Exit(runFaultCLI(dir))
	}
	if os.Getenv(faultRunnerEnv) != "" {
		os.Exit(runFaultRunner())
	}
	if url := os.Getenv(childRunnerEnv); url != "" {
		os.Exit(runChildRunner(url))
	}
	if log := os.Getenv(fakeCLILog); log != "" {
		os.Exit(runFakeCLI(log))
	}
	goleak.VerifyTestMain(m)
}

const tenant = "acme"

// node is one mesh process's worth of services on its own connection.
type node struct {
	d    service.Deps
	stop context.CancelFunc
	done chan error
}

func startNode(t *testing.T, srv *server.Server, cfg mesh.Config) *node {
	t.Helper()
	fx, err := fixture.New(fixture.Config{ScriptsDir: "../../testdata/fixture"})
	if err != nil {
		t.Fatal(err)
	}
	return startNodeWith(t, srv, cfg, profile.Builtin(), fx)
}

func startNodeWith(t *testing.T, srv *server.Server, cfg mesh.Config, profiles *profile.Registry, served ...adapter.Adapter) *node {
	t.Helper()
	nc, js := natstest.Connect(t, srv)
	reg := prometheus.NewRegistry()
	d := service.Deps{
		NC: nc, JS: js, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: service.NewMetrics(reg), Health: &service.Health{},
	}
	if testing.Verbose() {
		d.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	adapters, err := adapter.NewRegistry(served...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{d: d, stop: cancel, done: make(chan error, 1)}
	go func() { n.done <- mesh.Run(ctx, d, profiles, adapters, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-n.done:
			if err != nil {
				t.Errorf("mesh: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("mesh did not stop")
		}
	})
	// Ready once the router's consumer exists (the topology is then complete).
	natstest.Eventually(t, 10*time.Second, func() error {
		if cfg.WithoutRouter {
			_, err := js.Stream(context.Background(), d.Names.EventsStream())
			return err
		}
		_, err := js.Consumer(context.Background(), d.Names.SubmitStream(), d.Names.RouterConsumer())
		return err
	})
	return n
}

type fixtureReq struct {
	Prompt  string `msgpack:"prompt"`
	Script  string `msgpack:"script,omitempty"`
	DelayMS int    `msgpack:"delay_ms,omitempty"`
}

func request(t *testing.T, v any) []byte {
	t.Helper()
	b, err := wire.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func runReq(t *testing.T, req any) wire.RunRequest {
	return wire.RunRequest{
		RunID: client.NewRunID(), Tenant: tenant, Principal: "alice", Profile: "fixture",
		Request: request(t, req),
	}
}

func newClient(t *testing.T, srv *server.Server) *client.Client {
	nc, _ := natstest.Connect(t, srv)
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// collect returns every event of a run of tenant up to its terminal status.
func collect(t *testing.T, c *client.Client, runID string) []wire.Event {
	t.Helper()
	return collectIn(t, c, tenant, runID)
}

// describe renders events as "accepted routed running text ... succeeded".
func describe(evs []wire.Event) string {
	var s []string
	for _, ev := range evs {
		if ev.Kind == wire.KindChunk {
			s = append(s, string(ev.Chunk.Type))
		} else {
			s = append(s, string(ev.Status.State))
		}
	}
	return fmt.Sprint(s)
}

func checkGapless(t *testing.T, evs []wire.Event) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: %s", i, ev.Seq, describe(evs))
		}
	}
}

func last(evs []wire.Event) wire.Status { return *evs[len(evs)-1].Status }

func TestRunEventsArriveInOrder(t *testing.T) {
	srv := natstest.RunJetStream(t)
	startNode(t, srv, mesh.Config{})
	c := newClient(t, srv)
	id, err := c.Submit(context.Background(), runReq(t, fixtureReq{Prompt: "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, id)
	got := describe(evs)
	want := "[accepted routed running system thinking text tool_use tool_result result succeeded]"
	if got != want {
		t.Fatalf("events = %s, want %s", got, want)
	}
	checkGapless(t, evs)
	st := last(evs)
	if st.Pin == nil || st.Pin.Provider != "fixture" || st.Summary == nil || st.Summary.Usage == nil || st.Summary.Chunks != 6 {
		t.Fatalf("terminal status = %+v, want pin, usage and 6 chunks", st)
	}
	// The record follows the terminal event.
	waitFor(t, c, id, wire.StateSucceeded)
}

func TestSameRunIDTwiceIsOneRun(t *testing.T) {
	srv := natstest.RunJetStream(t)
	n := startNode(t, srv, mesh.Config{})
	c := newClient(t, srv)
	req := runReq(t, fixtureReq{Prompt: "once"})
	ctx := context.Background()
	for range 2 { // the second is dropped by the stream's dedupe window
		if _, err := c.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	first := collect(t, c, req.RunID)
	// Past the dedupe window (here: no Nats-Msg-Id), the run record makes
	// a resubmission a no-op too.
	b := request(t, func() wire.RunRequest { r := req; r.V = wire.Version; return r }())
	if _, err := n.d.JS.Publish(ctx, n.d.Names.Submit(tenant), b); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		info, err := n.d.JS.Stream(ctx, n.d.Names.SubmitStream())
		if err != nil {
			return err
		}
		if msgs := info.CachedInfo().State.Msgs; msgs != 0 {
			return fmt.Errorf("%d submissions not yet handled", msgs)
		}
		return nil
	})
	again := collect(t, c, req.RunID)
	if len(again) != len(first) {
		t.Fatalf("after resubmission: %s, want %s", describe(again), describe(first))
	}
	if got := describe(first); got != "[accepted routed running system thinking text tool_use tool_result result succeeded]" {
		t.Fatalf("events = %s", got)
	}
}

func TestRejections(t *testing.T) {
	srv := natstest.RunJetStream(t)
	n := startNode(t, srv, mesh.Config{})
	c := newClient(t, srv)
	ctx := context.Background()
	good := func() wire.RunRequest { return runReq(t, fixtureReq{Prompt: "x"}) }
	tests := []struct {
		name string
		in   func() wire.RunRequest
		want wire.Class
	}{
		{"bad principal token", func() wire.RunRequest { r := good(); r.Principal = "bob smith"; return r }, wire.AgenticRequestValidationError},
		{"bad conversation token", func() wire.RunRequest { r := good(); r.Conversation = "a.b"; return r }, wire.AgenticRequestValidationError},
		{"tenant differs from subject", func() wire.RunRequest { r := good(); r.Tenant = "other"; return r }, wire.AgenticRequestValidationError},
		{"unknown profile", func() wire.RunRequest { r := good(); r.Profile = "nope"; return r }, wire.ProfileError},
		{"unknown request field", func() wire.RunRequest {
			r := good()
			r.Request = request(t, map[string]any{"prompt": "x", "temperature": 0.2})
			return r
		}, wire.AgenticRequestValidationError},
		{"unknown runtime key", func() wire.RunRequest { r := good(); r.Runtime = map[string]any{"workspace": "x"}; return r }, wire.AgenticHandlerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.in()
			r.V = wire.Version
			// Publish directly: the client would refuse some of these at the edge.
			if _, err := n.d.JS.Publish(ctx, n.d.Names.Submit(tenant), request(t, &r), jetstream.WithMsgID(subject.RunMsgID(tenant, r.RunID))); err != nil {
				t.Fatal(err)
			}
			evs := collect(t, c, r.RunID)
			if got := describe(evs); got != "[accepted rejected]" {
				t.Fatalf("events = %s, want [accepted rejected]", got)
			}
			st := last(evs)
			if st.Error == nil || !errors.Is(st.Error, tt.want) {
				t.Fatalf("error = %v, want class %s", st.Error, tt.want)
			}
		})
	}

	t.Run("a payload naming no run is dropped and counted", func(t *testing.T) {
		dropped := func() float64 { return counter(t, n.d.Metrics.Dropped.WithLabelValues("router", "run_id")) }
		before := dropped()
		for _, garbage := range [][]byte{[]byte("not msgpack"), {0xc1}, {0x81, 0xa1}} {
			if _, err := n.d.JS.Publish(ctx, n.d.Names.Submit(tenant), garbage); err != nil {
				t.Fatal(err)
			}
		}
		natstest.Eventually(t, 10*time.Second, func() error {
			if got := dropped() - before; got != 3 {
				return fmt.Errorf("dropped %v, want 3", got)
			}
			return nil
		})
		id, err := c.Submit(ctx, good())
		if err != nil {
			t.Fatal(err)
		}
		if st := last(collect(t, c, id)); st.State != wire.StateSucceeded {
			t.Fatalf("run after garbage: %s", st.State)
		}
	})
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	m := <-ch
	var pb dtoMetric
	if err := m.Write(&pb.Metric); err != nil {
		t.Fatal(err)
	}
	return pb.GetCounter().GetValue()
}

func TestFullQueueRejectsAtOnce(t *testing.T) {
	srv := natstest.RunJetStream(t)
	cfg := mesh.Config{WithoutRunner: true}
	cfg.Topology.WorkQueueMax = 1
	startNode(t, srv, cfg)
	c := newClient(t, srv)
	ctx := context.Background()
	queued, err := c.Submit(ctx, runReq(t, fixtureReq{Prompt: "waits"}))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, queued, wire.StateRouted)
	full, err := c.Submit(ctx, runReq(t, fixtureReq{Prompt: "no room"}))
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, full)
	// The adapter's bound is checked against a count at most 250 ms old,
	// before anything is written: rejected straight from accepted. When
	// that count is older than the queued run, the work stream's exact
	// bound refuses the dispatch, and the run was recorded routed on the
	// way (README, contract notes).
	if got := describe(evs); got != "[accepted rejected]" && got != "[accepted routed rejected]" {
		t.Fatalf("events = %s", got)
	}
	if st := last(evs); !errors.Is(st.Error, wire.AdmissionRejected) {
		t.Fatalf("error = %v, want AdmissionRejected", st.Error)
	}
}

// waitQueued waits until the work stream holds n items.
func waitQueued(t *testing.T, srv *server.Server, n uint64) {
	t.Helper()
	_, js := natstest.Connect(t, srv)
	natstest.Eventually(t, 10*time.Second, func() error {
		s, err := js.Stream(context.Background(), subject.Names{}.WorkStream())
		if err != nil {
			return err
		}
		if got := s.CachedInfo().State.Msgs; got != n {
			return fmt.Errorf("work stream holds %d items, want %d", got, n)
		}
		return nil
	})
}

// waitFor waits until a run's record reaches state.
func waitFor(t *testing.T, c *client.Client, runID string, state wire.State) {
	t.Helper()
	waitForIn(t, c, tenant, runID, state)
}

func TestDeadlineEndsTimedOut(t *testing.T) {
	srv := natstest.RunJetStream(t)
	startNode(t, srv, mesh.Config{})
	c := newClient(t, srv)
	r := runReq(t, fixtureReq{Prompt: "slow", Script: "slow", DelayMS: 100})
	r.DeadlineMS = 500
	id, err := c.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, id)
	st := last(evs)
	if st.State != wire.StateTimedOut || !errors.Is(st.Error, wire.DeadlineExceeded) {
		t.Fatalf("terminal = %+v (%s), want timed_out with DeadlineExceeded", st, describe(evs))
	}
	checkGapless(t, evs)
}

func TestCancel(t *testing.T) {
	ctx := context.Background()

	t.Run("queued", func(t *testing.T) {
		srv := natstest.RunJetStream(t)
		startNode(t, srv, mesh.Config{WithoutRunner: true})
		c := newClient(t, srv)
		id, err := c.Submit(ctx, runReq(t, fixtureReq{Prompt: "queued"}))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, c, id, wire.StateRouted)
		reply, err := c.Cancel(ctx, tenant, id)
		if err != nil || !reply.Cancelled || reply.State != wire.StateCancelled {
			t.Fatalf("cancel = %+v, %v", reply, err)
		}
		if got := describe(collect(t, c, id)); got != "[accepted routed cancelled]" {
			t.Fatalf("events = %s", got)
		}
	})

	t.Run("running", func(t *testing.T) {
		srv := natstest.RunJetStream(t)
		startNode(t, srv, mesh.Config{})
		c := newClient(t, srv)
		id, err := c.Submit(ctx, runReq(t, fixtureReq{Prompt: "long", Script: "slow", DelayMS: 200}))
		if err != nil {
			t.Fatal(err)
		}
		for ev, err := range c.Events(ctx, tenant, id, 1) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind == wire.KindChunk {
				break // it is running and has output
			}
		}
		reply, err := c.Cancel(ctx, tenant, id)
		if err != nil || !reply.Cancelled || reply.State != wire.StateCancelled {
			t.Fatalf("cancel = %+v, %v", reply, err)
		}
		evs := collect(t, c, id)
		if st := last(evs); st.State != wire.StateCancelled {
			t.Fatalf("events = %s", describe(evs))
		}
		checkGapless(t, evs)
		again, err := c.Cancel(ctx, tenant, id)
		if err != nil || !again.Ended || again.State != wire.StateCancelled {
			t.Fatalf("cancel of an ended run = %+v, %v; want ended", again, err)
		}
	})
}

func TestRetryBeforeFirstOutputOnly(t *testing.T) {
	srv := natstest.RunJetStream(t)
	cfg := mesh.Config{}
	cfg.Runner.RetryBackoff = 10 * time.Millisecond
	startNode(t, srv, cfg)
	c := newClient(t, srv)
	ctx := context.Background()

	id, err := c.Submit(ctx, runReq(t, fixtureReq{Prompt: "x", Script: "retry-then-ok"}))
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, id)
	if st := last(evs); st.State != wire.StateSucceeded || st.Attempt != 2 {
		t.Fatalf("retry: terminal %+v, events %s; want succeeded on attempt 2", st, describe(evs))
	}
	if evs[2].Status.Attempt != 1 || evs[3].Status.State != wire.StateRunning || evs[3].Status.Attempt != 2 {
		t.Fatalf("retry: events %s, want running attempt 1 then 2", describe(evs))
	}
	checkGapless(t, evs)

	id, err = c.Submit(ctx, runReq(t, fixtureReq{Prompt: "x", Script: "fail-after-output"}))
	if err != nil {
		t.Fatal(err)
	}
	evs = collect(t, c, id)
	if got := describe(evs); got != "[accepted routed running text failed]" {
		t.Fatalf("failure after output: events %s, want one text and no replay", got)
	}
	if st := last(evs); st.Attempt != 1 || !errors.Is(st.Error, wire.ProviderTransportError) {
		t.Fatalf("failure after output: terminal %+v", st)
	}
}

func TestProviderErrorChunkFailsRun(t *testing.T) {
	srv := natstest.RunJetStream(t)
	startNode(t, srv, mesh.Config{})
	c := newClient(t, srv)
	id, err := c.Submit(context.Background(), runReq(t, fixtureReq{Prompt: "x", Script: "provider-error"}))
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, id)
	if got := describe(evs); got != "[accepted routed running text error failed]" {
		t.Fatalf("events = %s", got)
	}
	// The error chunk was typed ProviderQuotaError by the provider.
	if st := last(evs); !errors.Is(st.Error, wire.ProviderQuotaError) {
		t.Fatalf("terminal error = %v, want ProviderQuotaError", st.Error)
	}
}

// Two routers and two runner hosts share the streams: every run completes
// exactly once.
func TestManyRunsTwoRoutersTwoRunners(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 runs")
	}
	srv := natstest.RunJetStream(t)
	cfg := mesh.Config{}
	cfg.Runner.DefaultMaxActive = 16
	cfg.Topology.WorkQueueMax = 2000
	cfg.Topology.WorkQueueTenantMax = 2000 // one tenant submits them all
	startNode(t, srv, cfg)
	startNode(t, srv, cfg)
	c := newClient(t, srv)
	ctx := context.Background()
	const n = 1000
	ids := make([]string, n)
	for i := range ids {
		id, err := c.Submit(ctx, runReq(t, fixtureReq{Prompt: fmt.Sprint("run ", i), Script: "hello"}))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	_, js := natstest.Connect(t, srv)
	var want string
	for _, id := range ids {
		evs := collect(t, c, id)
		got := describe(evs)
		if want == "" {
			want = got
			if last(evs).State != wire.StateSucceeded {
				t.Fatalf("run %s: %s", id, got)
			}
		}
		if got != want {
			t.Fatalf("run %s: events %s, want %s", id, got, want)
		}
		checkGapless(t, evs)
		// Nothing was stored after the terminal status: it is the
		// subject's last message, and the subject holds no more messages
		// than events (chunks may share one).
		st, err := js.Stream(ctx, "AGENTMESH_EVENTS")
		if err != nil {
			t.Fatal(err)
		}
		subj := subject.Names{}.Events(tenant, id)
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
		if err != nil {
			t.Fatal(err)
		}
		if got := info.State.Subjects[subj]; got > uint64(len(evs)) {
			t.Fatalf("run %s: %d messages stored, for %d events", id, got, len(evs))
		}
		raw, err := st.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := wire.Decode[wire.Event](raw.Data)
		if err != nil {
			t.Fatal(err)
		}
		if !ev.Terminal() || ev.Seq != uint64(len(evs)) {
			t.Fatalf("run %s: the last message stored is %s seq %d, want the terminal status, seq %d", id, ev.Kind, ev.Seq, len(evs))
		}
	}
}

func TestServicesRegisterWithMicro(t *testing.T) {
	srv := natstest.RunJetStream(t)
	startNode(t, srv, mesh.Config{})
	nc, _ := natstest.Connect(t, srv)
	c := newClient(t, srv)
	id, err := c.Submit(context.Background(), runReq(t, fixtureReq{Prompt: "x"}))
	if err != nil {
		t.Fatal(err)
	}
	collect(t, c, id)
	if _, err := c.Cancel(context.Background(), tenant, id); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"agentmesh-router", "agentmesh-runner", "agentmesh-sweeper", "agentmesh-exporter"} {
		msg, err := nc.Request("$SRV.INFO."+name, nil, 5*time.Second)
		if err != nil {
			t.Fatalf("info of %s: %v", name, err)
		}
		var info micro.Info
		if err := json.Unmarshal(msg.Data, &info); err != nil {
			t.Fatal(err)
		}
		if info.Name != name || info.Version == "" || info.Metadata["registry_version"] != profile.Builtin().Version() {
			t.Errorf("info = %+v, want the registry version in its metadata", info)
		}
	}
	msg, err := nc.Request("$SRV.STATS.agentmesh-router", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var stats micro.Stats
	if err := json.Unmarshal(msg.Data, &stats); err != nil {
		t.Fatal(err)
	}
	requests := map[string]int{}
	for _, ep := range stats.Endpoints {
		requests[ep.Name] = ep.NumRequests
	}
	if len(requests) != 2 || requests["cancel"] != 1 || requests["consumer-create"] != 0 {
		t.Fatalf("router endpoints = %v, want cancel with one request and consumer-create (tenants' consumers) with none", requests)
	}
}

func TestQueuedRunPastDeadlineTimesOut(t *testing.T) {
	srv := natstest.RunJetStream(t)
	cfg := mesh.Config{WithoutRunner: true}
	cfg.Sweeper.ReconcileEvery = time.Second
	startNode(t, srv, cfg)
	c := newClient(t, srv)
	r := runReq(t, fixtureReq{Prompt: "nobody runs me"})
	r.DeadlineMS = 200
	id, err := c.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, id)
	if got := describe(evs); got != "[accepted routed timed_out]" {
		t.Fatalf("events = %s", got)
	}
	if st := last(evs); !errors.Is(st.Error, wire.DeadlineExceeded) {
		t.Fatalf("error = %v", st.Error)
	}
	// A runner arriving later finds the run ended and drops its work.
	startNode(t, srv, mesh.Config{WithoutRouter: true, WithoutSweeper: true})
	_, js := natstest.Connect(t, srv)
	natstest.Eventually(t, 10*time.Second, func() error {
		st, err := js.Stream(context.Background(), "AGENTMESH_WORK")
		if err != nil {
			return err
		}
		info, err := st.Info(context.Background())
		if err != nil {
			return err
		}
		if info.State.Msgs != 0 {
			return fmt.Errorf("%d work items left", info.State.Msgs)
		}
		return nil
	})
	if got := describe(collect(t, c, id)); got != "[accepted routed timed_out]" {
		t.Fatalf("after a runner came: %s", got)
	}
}

func TestProfileMaxWaitingRejectsAtOnce(t *testing.T) {
	srv := natstest.RunJetStream(t)
	fx, err := fixture.New(fixture.Config{ScriptsDir: "../../testdata/fixture"})
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := profile.New(profile.Profile{Name: "fixture", Adapter: "fixture", Transport: wire.TransportInProcess,
		Model: "fixture-1", Policy: profile.Policy{MaxWaiting: 2}})
	if err != nil {
		t.Fatal(err)
	}
	startNodeWith(t, srv, mesh.Config{WithoutRunner: true}, profiles, fx)
	c := newClient(t, srv)
	ctx := context.Background()
	for range 2 {
		id, err := c.Submit(ctx, runReq(t, fixtureReq{Prompt: "waits"}))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, c, id, wire.StateRouted)
	}
	waitQueued(t, srv, 2) // a run's record says routed before its work is dispatched
	id, err := c.Submit(ctx, runReq(t, fixtureReq{Prompt: "no room"}))
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, id)
	if st := last(evs); describe(evs) != "[accepted rejected]" || !errors.Is(st.Error, wire.AdmissionRejected) {
		t.Fatalf("events = %s, error %v; want rejected with AdmissionRejected", describe(evs), st.Error)
	}
}

func TestTerminalStatusCarriesExactCost(t *testing.T) {
	srv := natstest.RunJetStream(t)
	fx, err := fixture.New(fixture.Config{ScriptsDir: "../../testdata/fixture"})
	if err != nil {
		t.Fatal(err)
	}
	pricing := map[string]string{"input": "3", "output": "15.000001"}
	profiles, err := profile.New(profile.Profile{Name: "fixture", Adapter: "fixture", Transport: wire.TransportInProcess, Model: "fixture-1", Pricing: pricing})
	if err != nil {
		t.Fatal(err)
	}
	startNodeWith(t, srv, mesh.Config{}, profiles, fx)
	c := newClient(t, srv)
	id, err := c.Submit(context.Background(), runReq(t, fixtureReq{Prompt: "price me, exactly"}))
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, id)
	st := last(evs)
	if st.Summary == nil || st.Summary.Usage == nil {
		t.Fatalf("terminal status without usage: %+v", st)
	}
	want, err := cost.Of(pricing, *st.Summary.Usage)
	if err != nil {
		t.Fatal(err)
	}
	if st.Summary.Cost != want || want == "0" || st.Pin.Pricing["output"] != "15.000001" {
		t.Fatalf("cost = %q, want %q (pin pricing %v)", st.Summary.Cost, want, st.Pin.Pricing)
	}
	for _, ev := range evs {
		if ev.Kind == wire.KindChunk && ev.Chunk.Type == wire.ChunkResult && ev.Chunk.Metadata.Cost != want {
			t.Fatalf("result chunk cost = %q, want %q", ev.Chunk.Metadata.Cost, want)
		}
	}
}

// A cancel that lands while the runner is still publishing the running
// status ends the run cancelled, every time.
func TestCancelAtTheRunningStatus(t *testing.T) {
	srv := natstest.RunJetStream(t)
	startNode(t, srv, mesh.Config{})
	c := newClient(t, srv)
	ctx := context.Background()
	for i := range 20 {
		id, err := c.Submit(ctx, runReq(t, fixtureReq{Prompt: "x", Script: "slow", DelayMS: 200}))
		if err != nil {
			t.Fatal(err)
		}
		for ev, err := range c.Events(ctx, tenant, id, 1) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind == wire.KindStatus && ev.Status.State == wire.StateRouted {
				break // the runner is about to publish running
			}
		}
		if _, err := c.Cancel(ctx, tenant, id); err != nil {
			t.Fatalf("run %d: cancel: %v", i, err)
		}
		evs := collect(t, c, id)
		if st := last(evs); st.State != wire.StateCancelled {
			t.Fatalf("run %d: %s", i, describe(evs))
		}
		checkGapless(t, evs)
	}
}
