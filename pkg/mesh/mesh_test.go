package mesh_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/agentmesh/agentmesh/pkg/adapter/acp/acpfake"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
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
	if url := os.Getenv(acpRunnerEnv); url != "" {
		os.Exit(runACPRunner(url))
	}
	if os.Getenv(acpFakeEnv) != "" {
		acpfake.Main()
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
	fx := newFixture(t)
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
	mn := meshtest.Serve(t, d, profiles, adapters, cfg, 30*time.Second)
	n := &node{d: d, stop: mn.Stop, done: mn.Done}
	return n
}

// newFixture is the fixture adapter on the shipped scripts.
func newFixture(t *testing.T) *fixture.Adapter {
	t.Helper()
	fx, err := fixture.New(fixture.Config{ScriptsDir: "../../testdata/fixture"})
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

// fixtureAdapters is a registry of newFixture alone.
func fixtureAdapters(t *testing.T) *adapter.Registry {
	t.Helper()
	adapters, err := adapter.NewRegistry(newFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	return adapters
}

type fixtureReq struct {
	Prompt  string `msgpack:"prompt"`
	Script  string `msgpack:"script,omitempty"`
	DelayMS int    `msgpack:"delay_ms,omitempty"`
}

func request(t *testing.T, v any) []byte { return clienttest.Msgpack(t, v) }

func runReq(t *testing.T, req any) wire.RunRequest { return clienttest.FixtureRun(t, tenant, req) }

// submitRunning submits a fixture run of req and returns its id once it
// is executing and has output.
func submitRunning(ctx context.Context, t *testing.T, c *client.Client, req fixtureReq) string {
	t.Helper()
	id, err := c.Submit(ctx, runReq(t, req))
	if err != nil {
		t.Fatal(err)
	}
	clienttest.WaitForOutput(ctx, t, c, tenant, id)
	return id
}

func newClient(t *testing.T, srv *server.Server) *client.Client { return clienttest.New(t, srv) }

// collect returns every event of a run of tenant up to its terminal status.
func collect(t *testing.T, c *client.Client, runID string) []wire.Event {
	t.Helper()
	return collectIn(t, c, tenant, runID)
}

func describe(evs []wire.Event) string { return clienttest.Describe(evs) }

func checkGapless(t *testing.T, evs []wire.Event) { clienttest.CheckGapless(t, evs) }

func last(evs []wire.Event) wire.Status { return clienttest.Last(evs) }

func TestRunEventsArriveInOrder(t *testing.T) {
	srv := natstest.RunJetStream(t)
	startNode(t, srv, mesh.Config{})
	c := newClient(t, srv)
	id, evs := clienttest.Run(t, c, runReq(t, fixtureReq{Prompt: "hi"}))
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

// waitFor waits until a run's record reaches state.
func waitFor(t *testing.T, c *client.Client, runID string, state wire.State) {
	t.Helper()
	waitForIn(t, c, tenant, runID, state)
}

// TestCancel: a cancel reaches the runner that executes the run (a queued
// run's cancel is the router's alone: pkg/router's TestCancelQueued).
func TestCancel(t *testing.T) {
	ctx := context.Background()

	t.Run("running", func(t *testing.T) {
		srv := natstest.RunJetStream(t)
		startNode(t, srv, mesh.Config{})
		c := newClient(t, srv)
		id := submitRunning(ctx, t, c, fixtureReq{Prompt: "long", Script: "slow", DelayMS: 200})
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
	id, _ := clienttest.Run(t, c, runReq(t, fixtureReq{Prompt: "x"}))
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
	if len(requests) != 4 || requests["cancel"] != 1 || requests["consumer-create"] != 0 || requests["input"] != 0 || requests["permission"] != 0 {
		t.Fatalf("router endpoints = %v, want cancel with one request and consumer-create (tenants' consumers), input and permission (sessions') with none", requests)
	}
}

func TestTerminalStatusCarriesExactCost(t *testing.T) {
	srv := natstest.RunJetStream(t)
	fx := newFixture(t)
	pricing := map[string]string{"input": "3", "output": "15.000001"}
	profiles, err := profile.New(profile.Profile{Name: "fixture", Adapter: "fixture", Transport: wire.TransportInProcess, Model: "fixture-1", Pricing: pricing})
	if err != nil {
		t.Fatal(err)
	}
	startNodeWith(t, srv, mesh.Config{}, profiles, fx)
	c := newClient(t, srv)
	_, evs := clienttest.Run(t, c, runReq(t, fixtureReq{Prompt: "price me, exactly"}))
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
		clienttest.WaitForRouted(ctx, t, c, tenant, id) // the runner is about to publish running
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
