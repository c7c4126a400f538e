//go:build linux

package mesh_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
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

// The cluster chaos tests' load: chaosInFlight runs at once, each of the
// slow script's 20 chunks chaosDelayMS apart.
const (
	chaosInFlight = 48
	chaosDelayMS  = 15
)

// chaosCluster is the mesh on a 3-node JetStream cluster, every stream
// and bucket on 3 replicas, each node fsyncing every write (sync_interval
// always, as deploy/nats/cluster.conf has it): two mesh processes' worth
// of services (two routers, two runners, one sweeper), and a client.
type chaosCluster struct {
	cluster *natstest.Cluster
	ops     jetstream.JetStream
	c       *client.Client
	grants  *consent.Store
	logs    *logSink
}

func newChaosCluster(t *testing.T) *chaosCluster {
	t.Helper()
	cluster := natstest.RunCluster(t, 3, natstest.WithSync("always"))
	urls := cluster.URLs()
	cc := &chaosCluster{cluster: cluster, logs: &logSink{}}
	log := slog.New(&errorLog{sink: cc.logs})
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if cc.ops, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	// A fresh cluster may take a while before it places R3 streams.
	natstest.Eventually(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return topology.Ensure(ctx, cc.ops, topology.Config{Replicas: 3})
	})
	startClusterNode(t, urls, "node-a", log, true)
	startClusterNode(t, urls, "node-b", log, false)
	names := subject.Names{}
	if cc.c, err = client.New(nc, names); err != nil {
		t.Fatal(err)
	}
	if cc.grants, err = consent.Open(context.Background(), cc.ops, names); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, func() error {
		_, err := cc.ops.Consumer(context.Background(), names.SubmitStream(), names.RouterConsumer())
		return err
	})
	return cc
}

// chaosTargets are the streams whose leaders the tests kill, in turn.
func chaosTargets() []string {
	names := subject.Names{}
	return []string{names.EventsStream(), names.WorkStream(), names.SubmitStream(), "KV_" + names.RunsBucket()}
}

// trial runs one trial of test name: a load under way (chaosInFlight runs
// ended), fault, the load going on until as many more runs ended, then
// the check of every run and consent change acknowledged. It fails the
// test at once, with the services' warnings, on anything lost,
// duplicated, stuck, wrongly failed or inconsistent.
func (cc *chaosCluster) trial(t *testing.T, name string, trial int, counts *chaosCounts, fault func(l *chaosLoad)) {
	t.Helper()
	h := &chaosHistory{}
	l := h.startChaosLoad(t, cc.c, cc.grants, fmt.Sprintf("t%d", trial), chaosInFlight, chaosDelayMS)
	defer l.stop()
	if err := l.waitFinished(chaosInFlight, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	fault(l)
	if err := l.waitFinished(l.finished.Load()+chaosInFlight, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	l.stop()
	before, checked := *counts, time.Now()
	h.check(t, cc.c, cc.ops, time.Minute, noFailureJustified, counts)
	t.Logf("trial %d: %d runs, %d ok, checked in %s; unavailable %.1fs so far", trial, counts.runs-before.runs, counts.ok-before.ok,
		time.Since(checked).Round(100*time.Millisecond), counts.unavailable.Seconds())
	if counts.bad() > before.bad() {
		counts.report(t, name)
		cc.logs.mu.Lock()
		for _, line := range cc.logs.lines[:min(len(cc.logs.lines), 40)] {
			t.Log(line)
		}
		cc.logs.mu.Unlock()
		t.FailNow()
	}
}

// newLeader waits until stream has a leader other than old and returns
// it.
func (cc *chaosCluster) newLeader(t *testing.T, stream, old string) string {
	t.Helper()
	var now string
	natstest.Eventually(t, time.Minute, func() error {
		if now = streamLeader(context.Background(), cc.ops, stream); now == "" || now == old {
			return fmt.Errorf("no new leader of %s yet", stream)
		}
		return nil
	})
	return now
}

// leaderOf returns the index of the server leading stream.
func (cc *chaosCluster) leaderOf(t *testing.T, stream string) (int, string) {
	t.Helper()
	var leader string
	natstest.Eventually(t, 30*time.Second, func() error {
		if leader = streamLeader(context.Background(), cc.ops, stream); cc.cluster.Index(leader) < 0 {
			return fmt.Errorf("stream %s has no known leader (%q)", stream, leader)
		}
		return nil
	})
	return cc.cluster.Index(leader), leader
}

// TestChaosClusterLeaderKill kills stream leaders while runs of three
// tenants are going and consent changes: the events stream's leader, then
// the work stream's, each restarted once a new leader is elected and more
// runs ended. Every acknowledged run must succeed with all its events,
// and every spend entry and consent change be kept.
// AGENTMESH_CHAOS_TRIALS repeats the trial, killing in turn the leaders of
// the events, work, submit and runs streams; without it one trial kills
// the events stream's leader alone (part of make test, about a minute).
func TestChaosClusterLeaderKill(t *testing.T) {
	trials := chaosTrials(t, 1)
	cc := newChaosCluster(t)
	targets := chaosTargets()
	var counts chaosCounts
	for trial := range trials {
		kills := []string{targets[(2*trial)%len(targets)], targets[(2*trial+1)%len(targets)]}
		if os.Getenv(chaosTrialsEnv) == "" {
			kills = kills[:1] // make test's short version: the events stream's leader
		}
		cc.trial(t, "leader kill", trial, &counts, func(l *chaosLoad) {
			for _, stream := range kills {
				if err := l.waitFinished(l.finished.Load()+chaosInFlight/2, 2*time.Minute); err != nil {
					t.Fatal(err)
				}
				i, leader := cc.leaderOf(t, stream)
				killed := time.Now()
				cc.cluster.Kill(i)
				now := cc.newLeader(t, stream, leader)
				t.Logf("trial %d: killed %s, the leader of %s, with %d runs ended; %s leads after %s",
					trial, leader, stream, l.finished.Load(), now, time.Since(killed).Round(10*time.Millisecond))
				// Runs go on with two servers for a while, then it restarts.
				if err := l.waitFinished(l.finished.Load()+chaosInFlight/2, 2*time.Minute); err != nil {
					t.Fatal(err)
				}
				cc.cluster.Restart(i)
			}
		})
	}
	counts.report(t, "leader kill")
}

// chaosOnly skips a long chaos test unless AGENTMESH_CHAOS_TRIALS is set
// (make chaos), and returns its trials.
func chaosOnly(t *testing.T) int {
	t.Helper()
	if os.Getenv(chaosTrialsEnv) == "" {
		t.Skipf("a chaos scenario of make chaos: set %s to run it", chaosTrialsEnv)
	}
	return chaosTrials(t, 1)
}

// TestChaosClusterPauseKill is the recipe of nats-server #7567 with a
// real crash: the two followers of a stream's leader are frozen
// (SIGSTOP), the leader is SIGKILLed, and the followers resumed: they
// elect a leader between them while it is down, and it comes back to a
// stream that went on without it. Every acknowledged run, spend entry and
// consent change must be kept. Trials target the events, work, submit
// and runs streams' leaders in turn. It runs only in make chaos.
func TestChaosClusterPauseKill(t *testing.T) {
	trials := chaosOnly(t)
	cc := newChaosCluster(t)
	targets := chaosTargets()
	var counts chaosCounts
	for trial := range trials {
		stream := targets[trial%len(targets)]
		cc.trial(t, "pause+kill", trial, &counts, func(l *chaosLoad) {
			i, leader := cc.leaderOf(t, stream)
			var paused []int
			for j := range cc.cluster.Len() {
				if j != i {
					cc.cluster.Pause(j)
					paused = append(paused, j)
				}
			}
			start := time.Now()
			time.Sleep(time.Second) // the leader alone: nothing it takes reaches a quorum
			cc.cluster.Kill(i)
			time.Sleep(500 * time.Millisecond)
			for _, j := range paused {
				cc.cluster.Resume(j)
			}
			now := cc.newLeader(t, stream, leader)
			t.Logf("trial %d: paused the followers of %s's leader %s, killed it, resumed them; %s leads %s after the pause, with %d runs ended",
				trial, stream, leader, now, time.Since(start).Round(10*time.Millisecond), l.finished.Load())
			if err := l.waitFinished(l.finished.Load()+chaosInFlight/2, 2*time.Minute); err != nil {
				t.Fatal(err)
			}
			cc.cluster.Restart(i)
		})
	}
	counts.report(t, "pause+kill")
}

// TestChaosClusterKillAll SIGKILLs all three servers at once while runs
// are going and restarts them together: with every write fsynced, a
// SIGKILL (which keeps the page cache anyway) loses nothing acknowledged,
// and the mesh goes on once the cluster has a quorum again. It runs only
// in make chaos.
func TestChaosClusterKillAll(t *testing.T) {
	trials := chaosOnly(t)
	cc := newChaosCluster(t)
	var counts chaosCounts
	for trial := range trials {
		cc.trial(t, "kill all", trial, &counts, func(l *chaosLoad) {
			killed := time.Now()
			cc.cluster.KillAll()
			time.Sleep(time.Second)
			cc.cluster.RestartAll()
			natstest.Eventually(t, 2*time.Minute, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_, err := cc.ops.AccountInfo(ctx)
				return err
			})
			t.Logf("trial %d: killed all three servers with %d runs ended; JetStream answers %s after the kill",
				trial, l.finished.Load(), time.Since(killed).Round(10*time.Millisecond))
		})
	}
	counts.report(t, "kill all")
}
