package mesh_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
)

// The test binary doubles as a runner process: with this variable set it
// serves the fixture adapter against the given NATS URL until killed.
const childRunnerEnv = "AGENTMESH_TEST_CHILD_RUNNER_URL"

func runChildRunner(url string) int {
	return serveRunner(url, "child-runner", os.Getenv("AGENTMESH_TEST_CHILD_RUNNER_ID"), time.Second, func() (adapter.Adapter, func(), error) {
		fx, err := fixture.New(fixture.Config{ScriptsDir: "../../testdata/fixture"})
		return fx, func() {}, err
	})
}

// serveRunner is a child runner process's main: it serves the adapter
// build returns (with what to clean up after it) as runner id against the
// NATS URL until SIGTERM, and returns the process's exit code.
func serveRunner(url, name, id string, ackWait time.Duration, build func() (adapter.Adapter, func(), error)) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	nc, js, err := service.Connect(url, name, log)
	if err != nil {
		log.Error("connect", "err", err)
		return 1
	}
	defer nc.Close()
	a, cleanup, err := build()
	if err != nil {
		log.Error("adapter", "err", err)
		return 1
	}
	defer cleanup()
	adapters, err := adapter.NewRegistry(a)
	if err != nil {
		log.Error("registry", "err", err)
		return 1
	}
	d := service.Deps{NC: nc, JS: js, Log: log, Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}
	h, err := runner.New(ctx, d, adapters, runner.Config{ID: id, AckWait: ackWait})
	if err != nil {
		log.Error("runner", "err", err)
		return 1
	}
	if err := h.Run(ctx); err != nil {
		log.Error("run", "err", err)
		return 1
	}
	return 0
}

// startRunnerProcess starts a runner in a separate process; it is killed
// and reaped when the test ends if the test has not killed it.
func startRunnerProcess(t *testing.T, srv *server.Server, id string) *exec.Cmd {
	t.Helper()
	return startChild(t, false, childRunnerEnv+"="+srv.ClientURL(), "AGENTMESH_TEST_CHILD_RUNNER_ID="+id)
}

// startChild starts this test binary as a child process with env added,
// and reaps it when the test ends: killed, or with graceful set sent
// SIGTERM and given 20 s to exit first.
func startChild(t *testing.T, graceful bool, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		if graceful {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-waited:
				return
			case <-time.After(20 * time.Second):
			}
		}
		_ = cmd.Process.Kill()
		<-waited
	})
	return cmd
}

func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
}

func TestRunnerKilledBeforeOutputIsRedelivered(t *testing.T) {
	srv := natstest.RunJetStream(t)
	cfg := mesh.Config{WithoutRunner: true}
	cfg.Topology.LeaseTTL = 2 * time.Second
	startNode(t, srv, cfg)
	c := newClient(t, srv)
	first := startRunnerProcess(t, srv, "first")
	id, err := c.Submit(context.Background(), runReq(t, fixtureReq{Prompt: "x", Script: "hello", DelayMS: 1500}))
	if err != nil {
		t.Fatal(err)
	}
	// Kill it once it has published running and before its first chunk
	// (each chunk of this run waits 1.5 s).
	for ev, err := range c.Events(context.Background(), tenant, id, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == wire.KindChunk {
			t.Fatal("the first runner produced output before it could be killed")
		}
		if ev.Kind == wire.KindStatus && ev.Status.State == wire.StateRunning {
			break
		}
	}
	if rec, err := c.Status(context.Background(), tenant, id); err != nil || rec.Owner != "first" || rec.Committed {
		t.Fatalf("record = %+v, %v; want held by first, uncommitted", rec, err)
	}
	kill(t, first)
	startRunnerProcess(t, srv, "second")
	evs := collect(t, c, id)
	if got, want := describe(evs), "[accepted routed running running system text text text result succeeded]"; got != want {
		t.Fatalf("events = %s, want %s", got, want)
	}
	if st := last(evs); st.Attempt != 2 {
		t.Fatalf("terminal attempt = %d, want 2", st.Attempt)
	}
	checkGapless(t, evs)
	if rec, err := c.Status(context.Background(), tenant, id); err != nil || rec.Owner != "second" {
		t.Fatalf("record = %+v, %v; want owned by second", rec, err)
	}
}

func TestRunnerKilledAfterOutputIsFailedBySweeper(t *testing.T) {
	srv := natstest.RunJetStream(t)
	cfg := mesh.Config{WithoutRunner: true}
	const ttl = 2 * time.Second
	cfg.Topology.LeaseTTL = ttl
	startNode(t, srv, cfg)
	c := newClient(t, srv)
	r := startRunnerProcess(t, srv, "doomed")
	ctx := context.Background()
	id := submitRunning(ctx, t, c, fixtureReq{Prompt: "x", Script: "slow", DelayMS: 300})
	kill(t, r)
	killed := time.Now()
	// A second runner must not pick the run up again: output was published.
	startRunnerProcess(t, srv, "bystander")
	var evs []wire.Event
	natstest.Eventually(t, 3*ttl+5*time.Second, func() error {
		rec, err := c.Status(ctx, tenant, id)
		if err != nil {
			return err
		}
		if !rec.State.Terminal() {
			return fmt.Errorf("run is %s", rec.State)
		}
		return nil
	})
	t.Logf("sweeper ended the run %s after the kill (lease TTL %s)", time.Since(killed).Round(time.Millisecond), ttl)
	evs = collect(t, c, id)
	st := last(evs)
	if st.State != wire.StateFailed || !errors.Is(st.Error, wire.ProviderTransportError) {
		t.Fatalf("terminal = %+v, want failed with ProviderTransportError", st)
	}
	checkGapless(t, evs)
	for _, ev := range evs {
		if ev.Kind == wire.KindStatus && ev.Status.State == wire.StateRunning && ev.Status.Attempt != 1 {
			t.Fatalf("the run was attempted again after output: %s", describe(evs))
		}
	}
}

// A runner whose lease renewal fails stops publishing and tears its
// transport down; the sweeper then ends the run.
func TestRunnerThatLosesItsLeaseStopsPublishing(t *testing.T) {
	srv := natstest.RunJetStream(t)
	cfg := mesh.Config{}
	cfg.Topology.LeaseTTL = time.Second
	cfg.Sweeper.ReconcileEvery = time.Second
	n := startNode(t, srv, cfg)
	c := newClient(t, srv)
	ctx := context.Background()
	id := submitRunning(ctx, t, c, fixtureReq{Prompt: "x", Script: "slow", DelayMS: 150})
	leases, err := n.d.JS.KeyValue(ctx, n.d.Names.LeasesBucket())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Status(ctx, tenant, id)
	if err != nil || rec.Owner == "" {
		t.Fatalf("status = %+v, %v; want the runner holding the run", rec, err)
	}
	// Take the runner's lease away, as an expiry would.
	if err := leases.Purge(ctx, runs.RunnerLeaseKey(rec.Owner)); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, id)
	st := last(evs)
	if st.State != wire.StateFailed || !errors.Is(st.Error, wire.ProviderTransportError) {
		t.Fatalf("terminal = %+v (%s), want failed by the sweeper", st, describe(evs))
	}
	checkGapless(t, evs)
	// slow has 20 chunks; the runner stopped well before the end.
	chunks := 0
	for _, ev := range evs {
		if ev.Kind == wire.KindChunk {
			chunks++
		}
	}
	if chunks >= 20 {
		t.Fatalf("the runner kept publishing after losing its lease: %d chunks", chunks)
	}
	// Nothing was stored after the terminal status either.
	natstest.Eventually(t, 5*time.Second, func() error {
		ev, _, err := lastStored(n, id)
		if err != nil {
			return err
		}
		if ev.Seq != uint64(len(evs)) {
			return fmt.Errorf("last stored event has seq %d, the terminal is %d", ev.Seq, len(evs))
		}
		return nil
	})
}

func lastStored(n *node, runID string) (wire.Event, uint64, error) {
	log, err := events.NewLog(context.Background(), n.d.JS, n.d.Names)
	if err != nil {
		return wire.Event{}, 0, err
	}
	return log.Last(context.Background(), tenant, runID)
}

// A runner paused past its lease (SIGSTOP, as a long GC pause would) and
// then resumed publishes nothing after the sweeper's terminal status.
func TestPausedRunnerPublishesNothingAfterTheSweeper(t *testing.T) {
	srv := natstest.RunJetStream(t)
	cfg := mesh.Config{WithoutRunner: true}
	const ttl = time.Second
	cfg.Topology.LeaseTTL = ttl
	n := startNode(t, srv, cfg)
	c := newClient(t, srv)
	r := startRunnerProcess(t, srv, "sleepy")
	ctx := context.Background()
	id := submitRunning(ctx, t, c, fixtureReq{Prompt: "x", Script: "slow", DelayMS: 100})
	if err := r.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, id) // the sweeper ends it while the runner sleeps
	if st := last(evs); st.State != wire.StateFailed {
		t.Fatalf("terminal = %+v", st)
	}
	if err := r.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Give the resumed runner the time it would need to publish its next
	// chunks (one every 100 ms), then look at what is stored.
	time.Sleep(ttl)
	ev, _, err := lastStored(n, id)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Seq != uint64(len(evs)) || !ev.Terminal() {
		t.Fatalf("after the resume the last stored event is seq %d (%s), want the terminal seq %d", ev.Seq, ev.Kind, len(evs))
	}
}
