//go:build linux

package mesh_test

import (
	"context"
	"encoding/json"
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
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The partition scenario (issue 38): a node cut off from the other two
// for partitionFor, while both runners are connected to it.
const (
	partitionFor = 15 * time.Second
	// partitionSlack is the longest stretch with no run ended the
	// scenario allows beyond the election of new leaders on the majority.
	partitionSlack = 5 * time.Second
)

// partitionMesh is the mesh on a 3-node cluster whose routes go through
// proxies: two routers (one with the sweeper) connected to the majority
// first, two runners connected first to the node the trial cuts off, and
// a client on the majority alone.
type partitionMesh struct {
	cluster *natstest.Cluster
	cut     int // the node the runners are on, cut off in the trial
	nc      *nats.Conn
	ops     jetstream.JetStream
	c       *client.Client
	grants  *consent.Store
	runners []*partitionRunner
	logs    *logSink
}

// partitionRunner is a runner's connection and metrics.
type partitionRunner struct {
	id      string
	nc      *nats.Conn
	metrics *service.Metrics
}

func newPartitionMesh(t *testing.T) *partitionMesh {
	t.Helper()
	cluster := natstest.RunPartitionableCluster(t, 3, natstest.WithSync("always"))
	const cut = 2
	pm := &partitionMesh{cluster: cluster, cut: cut, logs: &logSink{}}
	log := slog.New(&errorLog{sink: pm.logs})
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	// urls lists the servers in order, first first (DontRandomize below).
	urls := func(first ...int) string {
		var us []string
		for _, i := range first {
			us = append(us, cluster.ClientURL(i))
		}
		for i := range cluster.Len() {
			if !slices.Contains(first, i) {
				us = append(us, cluster.ClientURL(i))
			}
		}
		return strings.Join(us, ",")
	}
	var err error
	// The client and the test's own requests: the majority only.
	pm.nc, err = nats.Connect(cluster.ClientURL(0)+","+cluster.ClientURL(1), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pm.nc.Close)
	if pm.ops, err = jetstream.New(pm.nc); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return topology.Ensure(ctx, pm.ops, topology.Config{Replicas: 3})
	})
	names := subject.Names{}
	// The node the runners are on leads the events stream, as in the
	// outside harness's trials: its runs' events are cut off with it.
	pm.leadOn(t, names.EventsStream(), cut)

	startPartitionNode(t, urls(0, 1), "router-a", log, mesh.Config{WithoutRunner: true})
	startPartitionNode(t, urls(1, 0), "router-b", log, mesh.Config{WithoutRunner: true, WithoutSweeper: true})
	for _, id := range []string{"runner-a", "runner-b"} {
		nc, m := startPartitionNode(t, urls(cut), id, log, mesh.Config{WithoutRouter: true, WithoutSweeper: true, WithoutExporter: true})
		pm.runners = append(pm.runners, &partitionRunner{id: id, nc: nc, metrics: m})
	}
	if pm.c, err = client.New(pm.nc, names); err != nil {
		t.Fatal(err)
	}
	if pm.grants, err = consent.Open(context.Background(), pm.ops, names); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, func() error {
		_, err := pm.ops.Consumer(context.Background(), names.SubmitStream(), names.RouterConsumer())
		return err
	})
	return pm
}

// startPartitionNode runs the services cfg leaves in, as id, on a
// connection to urls in their order, watched by a QuorumWatch with the
// default threshold as service.Start would watch it. It returns the
// connection and the metrics.
func startPartitionNode(t *testing.T, urls, id string, log *slog.Logger, cfg mesh.Config) (*nats.Conn, *service.Metrics) {
	t.Helper()
	log = log.With("node", id)
	nc, js, err := service.Connect(urls, "chaos-"+id, log, nats.DontRandomize())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close) // after the watch and the mesh stopped: cleanups run last first
	m := service.NewMetrics(prometheus.NewRegistry())
	watch := service.WatchQuorum(nc, js, log, m, service.DefaultFailoverAfter)
	t.Cleanup(watch.Stop)
	d := service.Deps{NC: nc, JS: js, Log: log, Metrics: m, Health: &service.Health{}, Quorum: watch}
	cfg.Topology = topology.Config{Replicas: 3}
	cfg.Runner = runner.Config{ID: id, MaxActive: map[string]int{"fixture": 16}}
	adapters := fixtureAdapters(t)
	meshtest.Go(t, "mesh "+id, 30*time.Second, func(ctx context.Context) error {
		return mesh.Run(ctx, d, profile.Builtin(), adapters, cfg)
	})
	return nc, m
}

// leadOn makes server i the leader of stream, asking its leader to step
// down in i's favour until it has.
func (pm *partitionMesh) leadOn(t *testing.T, stream string, i int) {
	t.Helper()
	want := fmt.Sprintf("n%d", i)
	req, err := json.Marshal(map[string]any{"placement": map[string]string{"preferred": want}})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, time.Minute, func() error {
		leader := streamLeader(context.Background(), pm.ops, stream)
		if leader == want {
			return nil
		}
		if leader != "" {
			_, _ = pm.nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, req, 5*time.Second)
			time.Sleep(time.Second)
		}
		return fmt.Errorf("stream %s led by %q, want %s", stream, leader, want)
	})
}

// partitionTrial is what one trial measured.
type partitionTrial struct {
	election   time.Duration // until every stream the cut node led had a leader on the majority
	longestGap time.Duration // the longest stretch with no run ended that began during the partition
	moved      []time.Duration
	forced     int
}

// TestChaosPartitionRunnersNode cuts off, for 15 s, the node both runners
// are connected to (and the events stream's leader), while runs of three
// tenants are submitted through the majority, then heals it. The runners'
// QuorumWatch must move them to the majority, so that runs go on ending:
// the longest stretch with no run ended may exceed the election of new
// leaders on the majority by less than 5 s. Every acknowledged run,
// spend entry and consent change must be kept (chaosHistory). Each trial
// starts a new cluster. It runs only in make chaos (a trial takes about
// a minute).
func TestChaosPartitionRunnersNode(t *testing.T) {
	trials := chaosOnly(t)
	var counts chaosCounts
	var results []partitionTrial
	for trial := range trials {
		ok := t.Run(fmt.Sprintf("trial%d", trial), func(t *testing.T) {
			results = append(results, runPartitionTrial(t, trial, &counts))
		})
		if !ok {
			break
		}
	}
	var worstGap, worstBeyond, worstElection, worstMove time.Duration
	forced := 0
	for i, r := range results {
		if i == 0 {
			worstBeyond = r.longestGap - r.election // may be negative
		}
		worstGap, worstElection = max(worstGap, r.longestGap), max(worstElection, r.election)
		worstBeyond = max(worstBeyond, r.longestGap-r.election)
		for _, m := range r.moved {
			worstMove = max(worstMove, m)
		}
		forced += r.forced
	}
	t.Logf("chaos partition: trials=%d longest_gap=%.1fs election=%.1fs gap_beyond_election=%.1fs (want < %s) runners_moved_within=%.1fs forced_reconnects=%d",
		len(results), worstGap.Seconds(), worstElection.Seconds(), worstBeyond.Seconds(), partitionSlack, worstMove.Seconds(), forced)
	counts.report(t, "partition")
}

// runPartitionTrial runs one trial on a new cluster and checks it.
func runPartitionTrial(t *testing.T, trial int, counts *chaosCounts) partitionTrial {
	pm := newPartitionMesh(t)
	names := subject.Names{}
	cutName := fmt.Sprintf("n%d", pm.cut)
	for _, r := range pm.runners {
		if got := r.nc.ConnectedUrl(); got != pm.cluster.ClientURL(pm.cut) {
			t.Fatalf("%s is on %s, want the node to cut off %s", r.id, got, pm.cluster.ClientURL(pm.cut))
		}
	}
	var servers []string
	for i := range pm.cluster.Len() {
		servers = append(servers, fmt.Sprintf("n%d=%s", i, pm.cluster.ClientURL(i)))
	}
	t.Logf("trial %d: servers %s; the runners are on %s", trial, strings.Join(servers, " "), cutName)
	h := &chaosHistory{}
	l := h.startChaosLoad(t, pm.c, pm.grants, fmt.Sprintf("p%d", trial), chaosInFlight, chaosDelayMS)
	defer l.stop()
	if err := l.waitFinished(chaosInFlight, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// The streams whose leader is cut off with the node: the majority
	// elects new leaders for them.
	var led []string
	leaders := map[string]string{}
	for _, s := range append(chaosTargets(), "KV_"+names.LeasesBucket()) {
		leaders[s] = streamLeader(context.Background(), pm.ops, s)
		if leaders[s] == cutName {
			led = append(led, s)
		}
	}
	if !slices.Contains(led, names.EventsStream()) {
		t.Fatalf("%s does not lead the events stream any more: leaders %v", cutName, leaders)
	}

	var res partitionTrial
	cutAt := time.Now()
	pm.cluster.Partition(pm.cut)
	t.Logf("trial %d: cut off %s at %s", trial, cutName, cutAt.Format("15:04:05.000"))
	// Each watched on its own, so that a slow answer delays nothing else.
	var mu sync.Mutex
	elected := map[string]time.Duration{}
	moved := map[string]time.Duration{}
	var watchers sync.WaitGroup
	for _, s := range led {
		watchers.Go(func() {
			for time.Since(cutAt) < partitionFor {
				if now := streamLeader(context.Background(), pm.ops, s); now != "" && now != cutName {
					mu.Lock()
					elected[s] = time.Since(cutAt)
					mu.Unlock()
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	for _, r := range pm.runners {
		watchers.Go(func() {
			for time.Since(cutAt) < partitionFor {
				if r.nc.IsConnected() && r.nc.ConnectedUrl() != pm.cluster.ClientURL(pm.cut) {
					mu.Lock()
					moved[r.id] = time.Since(cutAt)
					mu.Unlock()
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	time.Sleep(partitionFor - time.Since(cutAt))
	watchers.Wait()
	healAt := time.Now()
	pm.cluster.Heal(pm.cut)
	for _, s := range led {
		e, ok := elected[s]
		if !ok {
			t.Fatalf("no new leader of %s within the %s partition", s, partitionFor)
		}
		res.election = max(res.election, e)
	}
	for _, r := range pm.runners {
		m, ok := moved[r.id]
		if !ok {
			t.Errorf("%s stayed on the cut-off node for the whole partition", r.id)
		}
		res.moved = append(res.moved, m)
		res.forced += int(testutil.ToFloat64(r.metrics.ForcedReconnects))
	}
	// Runs go on after the heal, then the load stops.
	if err := l.waitFinished(l.finished.Load()+chaosInFlight, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	l.stop()

	before := *counts
	checked := time.Now()
	// The check reads every run as a new follower does, 8 at a time,
	// within one deadline: a minute is short on a loaded machine after
	// the heal's elections.
	h.check(t, pm.c, pm.ops, 3*time.Minute, noFailureJustified, counts)
	t.Logf("trial %d: history checked in %s", trial, time.Since(checked).Round(100*time.Millisecond))
	ends, err := storedEnds(pm.ops, h)
	if err != nil {
		t.Fatal(err)
	}
	res.longestGap = gapFrom(ends, cutAt, healAt)
	t.Logf("trial %d: cut off %s (leading %v) for %s: new leaders after %v; runners moved after %v (forced reconnects %d); longest stretch with no run ended %s, %s beyond the election; %d runs, %d ok",
		trial, cutName, led, partitionFor, elected, moved, res.forced, res.longestGap.Round(10*time.Millisecond),
		(res.longestGap - res.election).Round(10*time.Millisecond), counts.runs-before.runs, counts.ok-before.ok)
	if res.longestGap-res.election >= partitionSlack {
		t.Errorf("no run ended for %s during the partition: %s beyond the election (%s), want < %s",
			res.longestGap, res.longestGap-res.election, res.election, partitionSlack)
	}
	if counts.bad() > before.bad() || t.Failed() {
		counts.report(t, "partition")
		pm.logs.mu.Lock()
		for _, line := range pm.logs.lines[:min(len(pm.logs.lines), 40)] {
			t.Log(line)
		}
		pm.logs.mu.Unlock()
		t.FailNow()
	}
	return res
}

// storedEnds is when each run of h that ended was seen to end: when its
// terminal status was stored (the stream's own time of its last event).
// A runner cut off with a stale leader may stamp an event long before the
// majority stores it; the store's time is when a client could see it.
func storedEnds(js jetstream.JetStream, h *chaosHistory) ([]time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names := subject.Names{}
	st, err := js.Stream(ctx, names.EventsStream())
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	runs := slices.Clone(h.runs)
	h.mu.Unlock()
	var ends []time.Time
	for _, r := range runs {
		msg, err := st.GetLastMsgForSubject(ctx, names.Events(r.tenant, r.id))
		if err != nil {
			return nil, fmt.Errorf("last event of %s: %w", r.id, err)
		}
		ev, err := wire.Decode[wire.Event](msg.Data)
		if err != nil {
			return nil, fmt.Errorf("last event of %s: %w", r.id, err)
		}
		if ev.Terminal() {
			ends = append(ends, msg.Time)
		}
	}
	return ends, nil
}

// gapFrom is the longest stretch with no time of ends that began between
// from and until: from the cut to the first end after it, or between two
// ends, the first of them before until.
func gapFrom(ends []time.Time, from, until time.Time) time.Duration {
	ts := []time.Time{from}
	for _, e := range ends {
		if e.After(from) {
			ts = append(ts, e)
		}
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	var longest time.Duration
	for i := 1; i < len(ts) && !ts[i-1].After(until); i++ {
		longest = max(longest, ts[i].Sub(ts[i-1]))
	}
	if last := ts[len(ts)-1]; !last.After(until) {
		// Nothing ended after the last end before until.
		longest = max(longest, until.Sub(last))
	}
	return longest
}
