//go:build linux

package mesh_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// errorLog is a slog handler that keeps the service logs' warnings and
// errors, to show them when a trial fails.
type errorLog struct {
	sink  *logSink
	attrs []slog.Attr
}

type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (h *errorLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *errorLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", r.Time.Format("15:04:05.000"), r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s", a); return true })
	h.sink.mu.Lock()
	defer h.sink.mu.Unlock()
	h.sink.lines = append(h.sink.lines, b.String())
	return nil
}

func (h *errorLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &errorLog{sink: h.sink, attrs: append(slices.Clone(h.attrs), as...)}
}

func (h *errorLog) WithGroup(string) slog.Handler { return h }

// clusterNode is one mesh process (router, runner and optionally the
// sweeper) connected to every server of the cluster.
func startClusterNode(t *testing.T, urls, id string, log *slog.Logger, withSweeper bool) {
	t.Helper()
	nc, js, err := service.Connect(urls, "chaos-"+id, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close) // after the mesh stopped: cleanups run last first
	adapters := fixtureAdapters(t)
	d := service.Deps{NC: nc, JS: js, Log: log.With("node", id), Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}
	cfg := mesh.Config{
		Topology:       topology.Config{Replicas: 3},
		Runner:         runner.Config{ID: id, MaxActive: map[string]int{"fixture": 16}},
		WithoutSweeper: !withSweeper,
	}
	meshtest.Go(t, "mesh "+id, 30*time.Second, func(ctx context.Context) error {
		return mesh.Run(ctx, d, profile.Builtin(), adapters, cfg)
	})
}

// streamLeader returns the name of the server leading stream, or "".
func streamLeader(ctx context.Context, js jetstream.JetStream, stream string) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil || st.CachedInfo().Cluster == nil {
		return ""
	}
	return st.CachedInfo().Cluster.Leader
}

// runOutcome is what a client following one run saw.
type runOutcome struct {
	id     string
	events []wire.Event
	err    error
}

// check says what is wrong with a run that should have succeeded with the
// slow script's 20 chunks, or "".
func (o runOutcome) check() string {
	switch {
	case o.id == "":
		return "a run was never submitted (the trial ran out of time)"
	case o.err != nil:
		return fmt.Sprintf("%s: %v after %s", o.id, o.err, describe(o.events))
	case len(o.events) == 0:
		return fmt.Sprintf("%s: no events", o.id)
	}
	var states []wire.State
	ticks := 0
	for i, ev := range o.events {
		if ev.Seq != uint64(i+1) {
			return fmt.Sprintf("%s: event %d has seq %d: %s", o.id, i, ev.Seq, describe(o.events))
		}
		switch {
		case ev.Kind == wire.KindStatus:
			states = append(states, ev.Status.State)
		case ev.Chunk.Type == wire.ChunkText:
			ticks++
			if want := fmt.Sprintf("tick %d\n", ticks); ev.Chunk.Content != want {
				return fmt.Sprintf("%s: chunk %q, want %q: %s", o.id, ev.Chunk.Content, want, describe(o.events))
			}
		}
	}
	last := o.events[len(o.events)-1]
	switch {
	case len(states) < 4 || states[0] != wire.StateAccepted || states[1] != wire.StateRouted || states[2] != wire.StateRunning:
		return fmt.Sprintf("%s: statuses %v, want accepted, routed, running, ..., succeeded", o.id, states)
	case last.Kind != wire.KindStatus || last.Status.State != wire.StateSucceeded:
		return fmt.Sprintf("%s: ended %s (%v): %s", o.id, last.Status.State, last.Status.Error, describe(o.events))
	case ticks != 20:
		return fmt.Sprintf("%s: %d chunks, want 20: %s", o.id, ticks, describe(o.events))
	}
	return ""
}

// TestChaosClusterLeaderKill runs the mesh on a 3-node JetStream cluster
// with every stream and bucket on 3 replicas, two routers and two runners,
// and kills stream leaders while runs are going: the events stream's
// leader, then the work stream's. Every run must succeed with all its
// events. AGENTMESH_CHAOS_TRIALS repeats the trial, killing in turn the
// leaders of the events, work, submit and runs streams.
func TestChaosClusterLeaderKill(t *testing.T) {
	trials := chaosTrials(t, 1)
	const runsPerTrial = 200
	cluster := natstest.RunCluster(t, 3)
	urls := cluster.URLs()
	logs := &logSink{}
	log := slog.New(&errorLog{sink: logs})
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ops, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// A fresh cluster may take a while before it places R3 streams.
	natstest.Eventually(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return topology.Ensure(ctx, ops, topology.Config{Replicas: 3})
	})
	startClusterNode(t, urls, "node-a", log, true)
	startClusterNode(t, urls, "node-b", log, false)

	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	names := subject.Names{}
	natstest.Eventually(t, 30*time.Second, func() error {
		_, err := ops.Consumer(context.Background(), names.SubmitStream(), names.RouterConsumer())
		return err
	})
	targets := []string{names.EventsStream(), names.WorkStream(), names.SubmitStream(), "KV_" + names.RunsBucket()}

	for trial := range trials {
		kills := []string{targets[(2*trial)%len(targets)], targets[(2*trial+1)%len(targets)]}
		outcomes := chaosTrial(t, c, ops, cluster, fmt.Sprintf("t%d", trial), runsPerTrial, kills)
		var bad []string
		stalled := 0
		for _, o := range outcomes {
			msg := o.check()
			if msg == "" {
				continue
			}
			if o.err != nil && o.id != "" {
				// The live follower gave up: judge the run by what a new
				// follower reads now (the mesh's part), and count the stall
				// (the client's part, see below).
				now := o
				now.events, now.err = refollow(c, o.id)
				if now.check() == "" {
					stalled++
					continue
				}
				msg += "; now " + describe(now.events)
			}
			bad = append(bad, msg)
		}
		if stalled > 0 {
			// The client's follower gave up (its context ended) on a run
			// the mesh completed: not a lost run, but worth seeing.
			t.Logf("trial %d: %d live followers gave up on runs that completed", trial, stalled)
		}
		t.Logf("trial %d (killed the leaders of %v): %d runs, %d lost or wrongly failed or missing events", trial, kills, len(outcomes), len(bad))
		if len(bad) > 0 {
			for _, msg := range bad[:min(len(bad), 10)] {
				t.Error(msg)
			}
			logs.mu.Lock()
			for _, l := range logs.lines[:min(len(logs.lines), 40)] {
				t.Log(l)
			}
			logs.mu.Unlock()
			t.FailNow()
		}
	}
}

// refollow reads a run's events as a new follower does.
func refollow(c *client.Client, runID string) ([]wire.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var evs []wire.Event
	for ev, err := range c.Events(ctx, tenant, runID, 1) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// chaosTrial submits n runs, keeping at most inFlight unfinished, and
// kills the leader of each stream in kills once a share of the runs is
// under way, restarting the killed server after a new leader is elected
// and more runs have finished. It returns what the client saw of each run.
func chaosTrial(t *testing.T, c *client.Client, ops jetstream.JetStream, cluster *natstest.Cluster, prefix string, n int, kills []string) []runOutcome {
	const inFlight = 48
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	outcomes := make([]runOutcome, n)
	var started, finished atomic.Int64
	slots := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			id := fmt.Sprintf("%s-%03d", prefix, i)
			outcomes[i].id = id
			wg.Go(func() {
				defer func() { finished.Add(1); <-slots }()
				req := runReq(t, fixtureReq{Prompt: "chaos", Script: "slow", DelayMS: 15})
				req.RunID = id
				if _, err := c.Submit(ctx, req); err != nil {
					outcomes[i].err = fmt.Errorf("submit: %w", err)
					return
				}
				started.Add(1)
				for ev, err := range c.Events(ctx, tenant, id, 1) {
					if err != nil {
						outcomes[i].err = err
						return
					}
					outcomes[i].events = append(outcomes[i].events, ev)
				}
				if len(outcomes[i].events) == 0 {
					outcomes[i].err = errors.New("no events")
				}
			})
		}
	})

	for k, stream := range kills {
		// Kill once runs are under way on both sides of the kill.
		at := int64(n * (k + 1) / (len(kills) + 2))
		natstest.Eventually(t, 3*time.Minute, func() error {
			if started.Load() < at+inFlight/2 || finished.Load() < at {
				return fmt.Errorf("%d runs started, %d finished; waiting for %d finished", started.Load(), finished.Load(), at)
			}
			return nil
		})
		leader := streamLeader(ctx, ops, stream)
		i := cluster.Index(leader)
		if i < 0 {
			t.Fatalf("stream %s has no known leader (%q)", stream, leader)
		}
		killed := time.Now()
		cluster.Kill(i)
		var now string
		natstest.Eventually(t, time.Minute, func() error {
			if now = streamLeader(ctx, ops, stream); now == "" || now == leader {
				return fmt.Errorf("no new leader of %s yet", stream)
			}
			return nil
		})
		t.Logf("%s: killed %s, the leader of %s, with %d runs finished; %s leads after %s",
			prefix, leader, stream, finished.Load(), now, time.Since(killed).Round(10*time.Millisecond))
		// Let runs go on with two servers for a while, then restart it.
		more := finished.Load() + int64(inFlight/2)
		natstest.Eventually(t, 3*time.Minute, func() error {
			if finished.Load() < min(more, int64(n)) {
				return fmt.Errorf("%d runs finished, waiting for %d", finished.Load(), more)
			}
			return nil
		})
		cluster.Restart(i)
	}
	wg.Wait()
	return outcomes
}
