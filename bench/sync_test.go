package bench_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bench"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/sys/unix"
)

// syncPolicies are the JetStream file store's sync settings issue 38
// compares: the server's default (an fsync every 2 minutes), every
// second, and after every write.
var syncPolicies = []struct {
	name string
	set  func(*server.Options)
}{
	{"default", nil},
	{"1s", func(o *server.Options) { o.SyncInterval = time.Second }},
	{"always", func(o *server.Options) { o.SyncAlways = true }},
}

// The sizes of the sync comparison: smaller than the throughput and
// latency benchmarks', since each is run three times.
var (
	syncThroughput = bench.Workload{Runs: 100, Chunks: 200, ChunkBytes: 64}
	syncLatency    = bench.Probe{Samples: 100, Warmup: 10, ChunkBytes: 64}
	syncRouting    = bench.RoutingLoad{Runs: 2_000, Submitters: 64}
)

// BenchmarkSyncPolicy reports, for each sync setting of the file store
// (sync=default, 1s, always; side by side under benchstat), chunks/s of
// 100 concurrent fixture runs, first-chunk latency p50 and p99, and
// runs/s routed by two routers. The store is in the test's temporary
// directory: on a tmpfs an fsync costs nothing, so the benchmark says so
// and skips; point TMPDIR at the disk under test.
func BenchmarkSyncPolicy(b *testing.B) {
	for _, p := range syncPolicies {
		b.Run("sync="+p.name, func(b *testing.B) {
			if fs, ok := tmpfs(b.TempDir()); ok {
				b.Skipf("the temporary directory is on %s, where an fsync costs nothing: set TMPDIR to a directory on the disk under test", fs)
			}
			srv := natstest.RunJetStreamWith(b, p.set)
			m := bench.StartMesh(b, srv, bench.MeshConfig{MaxActive: syncThroughput.Runs})
			// The routers on a server of their own: they take every
			// submission of theirs, and none of the mesh's.
			routers := bench.StartRouters(b, natstest.RunJetStreamWith(b, p.set), bench.RoutersConfig{})
			warm := syncThroughput
			warm.Chunks = 10
			measure(b, func(ctx context.Context) (bench.Throughput, error) { return m.Throughput(ctx, warm) })

			var tp bench.Throughput
			var lat bench.Latencies
			var routed bench.Routed
			for b.Loop() {
				tp = tp.Add(measure(b, func(ctx context.Context) (bench.Throughput, error) { return m.Throughput(ctx, syncThroughput) }))
				lat = append(lat, measure(b, func(ctx context.Context) (bench.Latencies, error) { return m.FirstChunkLatency(ctx, syncLatency) })...)
				batch := newRoutingBatch(b, syncRouting)
				routed = routed.Add(measure(b, func(ctx context.Context) (bench.Routed, error) { return routers.Route(ctx, batch) }))
			}
			if err := routed.ExactlyOnce(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(tp.PerSecond(), "chunks/s")
			p50, p99 := reportPercentiles(b, "first-chunk", lat)
			b.ReportMetric(routed.PerSecond(), "routed-runs/s")
			b.Logf("sync=%s: %.0f chunks/s (%d runs x %d chunks); first chunk p50 %s p99 %s (%d samples); routing %.0f runs/s (%d runs)",
				p.name, tp.PerSecond(), syncThroughput.Runs, syncThroughput.Chunks, p50, p99, len(lat), routed.PerSecond(), routed.Items)
		})
	}
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
