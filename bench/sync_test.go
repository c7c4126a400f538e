package bench_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bench"
	"github.com/agentmesh/agentmesh/pkg/ledger"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sys/unix"
)

// syncPolicies are the JetStream file store's sync settings issue 38
// compares: the server's default (an fsync every 2 minutes), every
// second, and after every write.
var syncPolicies = []struct {
	name string
	set  func(*server.Options)
	// asyncEvents makes the events stream (the chunks) flush
	// asynchronously (JetStream's persist_mode async, one replica only)
	// while every other stream and bucket syncs each write: the
	// selective design issue 38 asks to measure.
	asyncEvents bool
}{
	{"default", nil, false},
	{"1s", func(o *server.Options) { o.SyncInterval = time.Second }, false},
	{"always", func(o *server.Options) { o.SyncAlways = true }, false},
	{"always+async-events", func(o *server.Options) { o.SyncAlways = true }, true},
}

// The sizes of the sync comparison: smaller than the throughput and
// latency benchmarks', since each is run three times.
var (
	syncThroughput = bench.Workload{Runs: 100, Chunks: 200, ChunkBytes: 64}
	syncLatency    = bench.Probe{Samples: 100, Warmup: 10, ChunkBytes: 64}
	syncRouting    = bench.RoutingLoad{Runs: 2_000, Submitters: 64}
	syncLedger     = ledgerLoad{Records: 2_000, Tenants: 16, Writers: 64}
)

// BenchmarkSyncPolicy reports, for each sync setting of the file store
// (sync=default, 1s, always, always with the events stream flushed
// asynchronously; side by side under benchstat), chunks/s of 100
// concurrent fixture runs, first-chunk latency p50 and p99, runs/s routed
// by two routers, and ended runs/s written into the spend ledger (entry,
// rollup fold, quota release) by 64 writers. The store is in the test's temporary
// directory: on a tmpfs an fsync costs nothing, so the benchmark says so
// and skips; point TMPDIR at the disk under test.
func BenchmarkSyncPolicy(b *testing.B) {
	for _, p := range syncPolicies {
		b.Run("sync="+p.name, func(b *testing.B) {
			if fs, ok := tmpfs(b.TempDir()); ok {
				b.Skipf("the temporary directory is on %s, where an fsync costs nothing: set TMPDIR to a directory on the disk under test", fs)
			}
			srv := natstest.RunJetStreamWith(b, p.set)
			rsrv := natstest.RunJetStreamWith(b, p.set)
			if p.asyncEvents {
				asyncEventsStream(b, srv)
				asyncEventsStream(b, rsrv)
			}
			m := bench.StartMesh(b, srv, bench.MeshConfig{MaxActive: syncThroughput.Runs})
			// The routers on a server of their own: they take every
			// submission of theirs, and none of the mesh's.
			routers := bench.StartRouters(b, rsrv, bench.RoutersConfig{})
			// The ledger's writes on the routers' server, after theirs.
			lg := openLedger(b, rsrv)
			warm := syncThroughput
			warm.Chunks = 10
			measure(b, func(ctx context.Context) (bench.Throughput, error) { return m.Throughput(ctx, warm) })

			var tp bench.Throughput
			var lat bench.Latencies
			var routed bench.Routed
			var ledgerN int
			var ledgerTime time.Duration
			for i := 0; b.Loop(); i++ {
				tp = tp.Add(measure(b, func(ctx context.Context) (bench.Throughput, error) { return m.Throughput(ctx, syncThroughput) }))
				lat = append(lat, measure(b, func(ctx context.Context) (bench.Latencies, error) { return m.FirstChunkLatency(ctx, syncLatency) })...)
				batch := newRoutingBatch(b, syncRouting)
				routed = routed.Add(measure(b, func(ctx context.Context) (bench.Routed, error) { return routers.Route(ctx, batch) }))
				took := measure(b, func(ctx context.Context) (time.Duration, error) { return syncLedger.write(ctx, lg, i) })
				ledgerN, ledgerTime = ledgerN+syncLedger.Records, ledgerTime+took
			}
			if err := routed.ExactlyOnce(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(tp.PerSecond(), "chunks/s")
			p50, p99 := reportPercentiles(b, "first-chunk", lat)
			b.ReportMetric(routed.PerSecond(), "routed-runs/s")
			ledgerRate := float64(ledgerN) / ledgerTime.Seconds()
			b.ReportMetric(ledgerRate, "ledger-runs/s")
			b.Logf("sync=%s: %.0f chunks/s (%d runs x %d chunks); first chunk p50 %s p99 %s (%d samples); routing %.0f runs/s (%d runs); ledger %.0f ended runs/s (%d)",
				p.name, tp.PerSecond(), syncThroughput.Runs, syncThroughput.Chunks, p50, p99, len(lat), routed.PerSecond(), routed.Items, ledgerRate, ledgerN)
		})
	}
}

// BenchmarkSyncPolicyCluster is BenchmarkSyncPolicy on a three-node
// cluster with every stream and bucket on three replicas, as deploy/
// runs it, at the server's default sync and at always (deploy's): chunks/s
// of 100 fixture runs, first-chunk latency, and ended runs/s written into
// the ledger. A replicated stream fsyncs its Raft log under always, and
// its store when it snapshots (nats-server's sync-on-flush). The nodes
// are processes of their own, with their stores in TMPDIR.
func BenchmarkSyncPolicyCluster(b *testing.B) {
	for _, sync := range []string{"default", "always"} {
		b.Run("sync="+sync, func(b *testing.B) {
			if fs, ok := tmpfs(b.TempDir()); ok {
				b.Skipf("the temporary directory is on %s, where an fsync costs nothing: set TMPDIR to a directory on the disk under test", fs)
			}
			var opts []natstest.ClusterOption
			if sync != "default" {
				opts = append(opts, natstest.WithSync(sync))
			}
			cluster := natstest.RunCluster(b, 3, opts...)
			_, js := natstest.ConnectURL(b, cluster.URLs())
			// A fresh cluster may take a while before it places R3 streams.
			natstest.Eventually(b, time.Minute, func() error {
				ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
				defer cancel()
				return topology.Ensure(ctx, js, topology.Config{Replicas: 3})
			})
			m := bench.StartMeshAt(b, cluster.URLs(), bench.MeshConfig{MaxActive: syncThroughput.Runs, Replicas: 3})
			lg, err := ledger.Open(b.Context(), js, subject.Names{})
			if err != nil {
				b.Fatal(err)
			}
			warm := syncThroughput
			warm.Chunks = 10
			measure(b, func(ctx context.Context) (bench.Throughput, error) { return m.Throughput(ctx, warm) })

			var tp bench.Throughput
			var lat bench.Latencies
			var ledgerN int
			var ledgerTime time.Duration
			for i := 0; b.Loop(); i++ {
				tp = tp.Add(measure(b, func(ctx context.Context) (bench.Throughput, error) { return m.Throughput(ctx, syncThroughput) }))
				lat = append(lat, measure(b, func(ctx context.Context) (bench.Latencies, error) { return m.FirstChunkLatency(ctx, syncLatency) })...)
				took := measure(b, func(ctx context.Context) (time.Duration, error) { return syncLedger.write(ctx, lg, i) })
				ledgerN, ledgerTime = ledgerN+syncLedger.Records, ledgerTime+took
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(tp.PerSecond(), "chunks/s")
			p50, p99 := reportPercentiles(b, "first-chunk", lat)
			ledgerRate := float64(ledgerN) / ledgerTime.Seconds()
			b.ReportMetric(ledgerRate, "ledger-runs/s")
			b.Logf("R3 sync=%s: %.0f chunks/s (%d runs x %d chunks); first chunk p50 %s p99 %s (%d samples); ledger %.0f ended runs/s (%d)",
				sync, tp.PerSecond(), syncThroughput.Runs, syncThroughput.Chunks, p50, p99, len(lat), ledgerRate, ledgerN)
		})
	}
}

// asyncEventsStream creates srv's events stream as topology.Ensure makes
// it but flushed asynchronously (persist_mode async), before the mesh's
// Ensure, which then finds it unchanged.
func asyncEventsStream(tb testing.TB, srv *server.Server) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	defer cancel()
	_, js := natstest.Connect(tb, srv)
	if err := topology.Ensure(ctx, js, topology.Config{}); err != nil {
		tb.Fatal(err)
	}
	name := subject.Names{}.EventsStream()
	st, err := js.Stream(ctx, name)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if err := js.DeleteStream(ctx, name); err != nil {
		tb.Fatal(err)
	}
	cfg.PersistMode = jetstream.AsyncPersistMode
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		tb.Fatal(err)
	}
}

// ledgerLoad is a batch of ended runs written into the spend ledger by
// Writers at once, as the routers' ledger writers record them: Records
// runs spread over Tenants.
type ledgerLoad struct{ Records, Tenants, Writers int }

func openLedger(tb testing.TB, srv *server.Server) *ledger.Store {
	tb.Helper()
	_, js := natstest.Connect(tb, srv)
	s, err := ledger.Open(tb.Context(), js, subject.Names{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// write records batch's runs (distinct from every other batch's) and
// returns how long it took.
func (l ledgerLoad) write(ctx context.Context, s *ledger.Store, batch int) (time.Duration, error) {
	now := time.Now()
	recs := make(chan wire.RunRecord, l.Records)
	for i := range l.Records {
		recs <- wire.RunRecord{V: wire.Version, RunID: fmt.Sprintf("b%d-%05d", batch, i), Tenant: fmt.Sprintf("t%02d", i%l.Tenants),
			Principal: "bench", Profile: "fixture", State: wire.StateSucceeded, Usage: &wire.Usage{InputTokens: 120, OutputTokens: 40}, Cost: "0.0042",
			Created: now.UnixMilli(), Updated: now.UnixMilli()}
	}
	close(recs)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, l.Writers)
	for w := range l.Writers {
		wg.Go(func() {
			for rec := range recs {
				if errs[w] = s.Record(ctx, rec); errs[w] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// tmpfs reports whether dir is on a tmpfs or ramfs, and which.
func tmpfs(dir string) (string, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "", false
	}
	switch st.Type {
	case unix.TMPFS_MAGIC:
		return "tmpfs", true
	case unix.RAMFS_MAGIC:
		return "ramfs", true
	}
	return fmt.Sprintf("fs 0x%x", st.Type), false
}
