package bench_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bench"
	"github.com/agentmesh/agentmesh/pkg/adapter/acp/acpfake"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"go.uber.org/goleak"
)

// The test binary doubles as the fake CLI of the CLI measurements (STYLE
// item 9): with FakeCLIEnv set it writes its stream-json and exits, before
// any test machinery (or goleak) starts; with ACPFakeEnv set it is the
// fake ACP agent of the session measurement (acpfake.Main). With
// NATSServerEnv set it is the JetStream server of a measurement that keeps
// the server out of its own process (StartServerProcess).
func TestMain(m *testing.M) {
	if os.Getenv(bench.FakeCLIEnv) != "" {
		os.Exit(bench.FakeCLI(os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv(bench.ACPFakeEnv) != "" {
		acpfake.Main() // exits when its stdin closes
	}
	if dir := os.Getenv(bench.NATSServerEnv); dir != "" {
		os.Exit(bench.ServeNATS(dir, os.Stdin, os.Stdout, os.Stderr))
	}
	natstest.RunClusterNode() // BenchmarkSyncPolicyCluster's nodes
	goleak.VerifyTestMain(m)
}

// batchTimeout bounds one batch of a measurement, so that a stuck run fails
// the benchmark with its symptom instead of hanging it.
const batchTimeout = 2 * time.Minute

// The sizes `make bench` measures. Each throughput batch moves 50,000
// chunks each way, at 10, 100 and 1,000 runs at once; one latency batch
// takes 200 samples each way.
var (
	throughputLoads = []bench.Workload{
		{Runs: 10, Chunks: 5000, ChunkBytes: 64},
		{Runs: 100, Chunks: 500, ChunkBytes: 64},
		{Runs: 1000, Chunks: 50, ChunkBytes: 64},
	}
	latencyProbe = bench.Probe{Samples: 200, Warmup: 20, ChunkBytes: 64}
)

// BenchmarkChunkThroughput reports, at 10, 100 and 1,000 runs at once
// (runs=N), chunks/s received by clients from N concurrent fixture runs,
// the same count of same-size messages through raw JetStream async publish
// + ordered consume on N lanes, and mesh/raw. One iteration is one batch
// of each. Each N has its own server and a mesh whose runner executes N
// runs at once; it logs the mesh's warnings, counting those of
// bench.Limits.
func BenchmarkChunkThroughput(b *testing.B) {
	for _, load := range throughputLoads {
		b.Run(fmt.Sprintf("runs=%d", load.Runs), func(b *testing.B) {
			srv := natstest.RunJetStream(b)
			var logs bench.LogRecorder
			logs.Watch(srv)
			m := bench.StartMesh(b, srv, bench.MeshConfig{MaxActive: load.Runs, Log: logs.Logger()})
			raw := bench.StartRaw(b, srv)
			warm := load
			warm.Chunks = 10
			measure(b, func(ctx context.Context) (bench.Throughput, error) { return m.Throughput(ctx, warm) })
			measure(b, func(ctx context.Context) (bench.Throughput, error) { return raw.Throughput(ctx, warm) })

			var mesh, base bench.Throughput
			for b.Loop() {
				mesh = mesh.Add(measure(b, func(ctx context.Context) (bench.Throughput, error) { return m.Throughput(ctx, load) }))
				base = base.Add(measure(b, func(ctx context.Context) (bench.Throughput, error) { return raw.Throughput(ctx, load) }))
			}
			event, err := bench.ChunkEvent(load)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(0, "ns/op") // an iteration is two batches: not a figure of its own
			b.ReportMetric(mesh.PerSecond(), "mesh-chunks/s")
			b.ReportMetric(base.PerSecond(), "raw-msgs/s")
			b.ReportMetric(mesh.PerSecond()/base.PerSecond(), "ratio")
			b.Logf("%d runs x %d chunks of %d B text (%d B event): mesh %.0f chunks/s, raw %.0f msgs/s, mesh/raw %.3f; mesh and server: %s",
				load.Runs, load.Chunks, load.ChunkBytes, len(event),
				mesh.PerSecond(), base.PerSecond(), mesh.PerSecond()/base.PerSecond(), logs.Summary())
		})
	}
}

// BenchmarkFirstChunkLatency reports p50 and p99 of submit→first chunk
// through the mesh and of one raw JetStream hop (a synchronous publish to
// a consumer already pulling), and the mesh's p50 and p99 in hops: each
// divided by the hop's p50. One iteration is one batch of samples of each.
func BenchmarkFirstChunkLatency(b *testing.B) {
	// follow=start: each run followed on a consumer of its own, created
	// alongside the submission (client.Start); follow=tenant: every run
	// followed through one client.TenantFollower made before the samples.
	for _, follow := range []string{"start", "tenant"} {
		b.Run("follow="+follow, func(b *testing.B) {
			srv := natstest.RunJetStream(b)
			m := bench.StartMesh(b, srv, bench.MeshConfig{})
			if follow == "tenant" {
				m.FollowTenant(b)
			}
			raw := bench.StartRaw(b, srv)
			var mesh, hop bench.Latencies
			for b.Loop() {
				mesh = append(mesh, measure(b, func(ctx context.Context) (bench.Latencies, error) { return m.FirstChunkLatency(ctx, latencyProbe) })...)
				hop = append(hop, measure(b, func(ctx context.Context) (bench.Latencies, error) { return raw.HopLatency(ctx, latencyProbe) })...)
			}
			b.ReportMetric(0, "ns/op")
			mp50, mp99 := reportPercentiles(b, "mesh", mesh)
			hp50, hp99 := reportPercentiles(b, "hop", hop)
			b.ReportMetric(float64(mp50)/float64(hp50), "mesh-p50-hops")
			b.ReportMetric(float64(mp99)/float64(hp50), "mesh-p99-hops")
			b.Logf("%d samples each: mesh submit→first chunk p50 %s p99 %s; hop (sync publish → pulling consumer) p50 %s p99 %s; mesh in hops (÷ hop p50): p50 %.1f p99 %.1f",
				len(mesh), mp50, mp99, hp50, hp99, float64(mp50)/float64(hp50), float64(mp99)/float64(hp50))
		})
	}
}

// reportPercentiles reports l's p50 and p99 as name-p50-us and
// name-p99-us, and returns them.
func reportPercentiles(b *testing.B, name string, l bench.Latencies) (p50, p99 time.Duration) {
	p50, p99 = l.Percentile(50), l.Percentile(99)
	b.ReportMetric(bench.Micros(p50), name+"-p50-us")
	b.ReportMetric(bench.Micros(p99), name+"-p99-us")
	return p50, p99
}

// storedRuns is how many one-chunk runs BenchmarkStoredMessages counts
// per iteration.
const storedRuns = 100

// BenchmarkStoredMessages reports the messages the server stores, over
// all its streams, per one-chunk fixture run through the mesh, and per
// synchronous raw publish (1: the baseline, and a check of the count).
func BenchmarkStoredMessages(b *testing.B) {
	srv := natstest.RunJetStream(b)
	m := bench.StartMesh(b, srv, bench.MeshConfig{})
	raw := bench.StartRaw(b, srv)
	measure(b, func(ctx context.Context) (bench.Throughput, error) {
		return m.Throughput(ctx, bench.Workload{Runs: 4, Chunks: 1, ChunkBytes: 64})
	})
	var mesh, base bench.Stored
	for b.Loop() {
		mesh = addStored(mesh, measure(b, func(ctx context.Context) (bench.Stored, error) { return m.StoredPerRun(ctx, storedRuns) }))
		base = addStored(base, measure(b, func(ctx context.Context) (bench.Stored, error) { return raw.StoredPerHop(ctx, storedRuns) }))
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(mesh.PerRun(), "msgs-per-run")
	b.ReportMetric(base.PerRun(), "raw-msgs-per-hop")
	b.Logf("%d one-chunk runs: %d messages stored, %.2f a run (%s); raw: %d hops, %.2f a hop (%s)",
		mesh.Runs, mesh.Messages(), mesh.PerRun(), mesh, base.Runs, base.PerRun(), base)
}

func addStored(s, t bench.Stored) bench.Stored {
	out := bench.Stored{Runs: s.Runs + t.Runs, ByStream: map[string]int{}}
	for _, m := range []map[string]int{s.ByStream, t.ByStream} {
		for k, v := range m {
			out.ByStream[k] += v
		}
	}
	return out
}

// footprintRuns is how many runs BenchmarkRunFootprint holds in flight.
const footprintRuns = 1000

// BenchmarkRunFootprint reports this process's heap + stacks in use
// (after GC) per run in flight, with 1,000 fixture runs held in flight at
// once on one runner host, the server in a child process, in two
// sub-benchmarks on one mesh: follow=events follows each run with
// client.Events (a consumer a run), follow=tenant all of them through one
// client.TenantFollower (one consumer, an iterator a run). Each reports
// bytes-per-run-KiB (followers and mesh),
// follower-per-run-KiB (the followers' share, taken before the runs are
// submitted) and mesh-per-run-KiB (the rest), and idle-MiB, the heap +
// stacks in use before anything (a runner host executing up to 1,000
// runs at once, idle, is not part of the per-run figures). It logs the mesh's
// warnings, counting those of bench.Limits.
func BenchmarkRunFootprint(b *testing.B) {
	url := bench.StartServerProcess(b)
	var logs bench.LogRecorder
	m := bench.StartMeshAt(b, url, bench.MeshConfig{MaxActive: footprintRuns, Log: logs.Logger()})
	for _, by := range []bench.Follow{bench.FollowEach, bench.FollowTenant} {
		b.Run("follow="+string(by), func(b *testing.B) {
			var total, followers, mesh, idle float64
			n := 0
			for b.Loop() {
				ctx, cancel := context.WithTimeout(b.Context(), batchTimeout)
				fp, err := m.HeldFootprint(ctx, footprintRuns, by)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				total += fp.PerRun()
				followers += fp.FollowerPerRun()
				mesh += fp.MeshPerRun()
				idle += float64(fp.Idle)
				n++
				mib := func(v uint64) float64 { return float64(v) / (1 << 20) }
				b.Logf("%d runs in flight: heap+stacks (of which stacks) idle %.1f (%.1f) MiB, followed %.1f (%.1f) MiB, in flight %.1f (%.1f) MiB", fp.Runs,
					mib(fp.Idle), mib(fp.IdleStacks), mib(fp.Followed), mib(fp.FollowedStacks), mib(fp.InFlight), mib(fp.InFlightStacks))
			}
			kib := func(v float64) float64 { return v / float64(n) / 1024 }
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(kib(total), "bytes-per-run-KiB")
			b.ReportMetric(kib(followers), "follower-per-run-KiB")
			b.ReportMetric(kib(mesh), "mesh-per-run-KiB")
			b.ReportMetric(idle/float64(n)/(1<<20), "idle-MiB")
			b.Logf("%d runs in flight, followed by %s: %.1f KiB a run (followers %.1f, mesh %.1f); mesh: %s", footprintRuns, by, kib(total), kib(followers), kib(mesh), logs.Summary())
		})
	}
}

// measure runs one measurement f, failing b if it fails or takes longer
// than batchTimeout.
func measure[T any](b *testing.B, f func(context.Context) (T, error)) T {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), batchTimeout)
	defer cancel()
	got, err := f(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return got
}

// TestMeasurementsComplete runs every measurement once at a tiny size: each
// run and lane must complete and yield its count. It asserts no timing.
func TestMeasurementsComplete(t *testing.T) {
	srv := natstest.RunJetStream(t)
	m := bench.StartMesh(t, srv, bench.MeshConfig{MaxActive: 4})
	raw := bench.StartRaw(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w := bench.Workload{Runs: 4, Chunks: 300, ChunkBytes: 64} // > pubWindow: the window turns over
	p := bench.Probe{Samples: 3, Warmup: 1, ChunkBytes: 64}

	for _, tt := range []struct {
		name string
		in   func() (bench.Throughput, error)
	}{
		{"mesh throughput", func() (bench.Throughput, error) { return m.Throughput(ctx, w) }},
		{"raw throughput", func() (bench.Throughput, error) { return raw.Throughput(ctx, w) }},
	} {
		got, err := tt.in()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if want := w.Runs * w.Chunks; got.Items != want || got.Elapsed <= 0 {
			t.Errorf("%s: %+v, want %d items in some time", tt.name, got, want)
		}
	}
	for _, tt := range []struct {
		name string
		in   func() (bench.Latencies, error)
	}{
		{"mesh first chunk", func() (bench.Latencies, error) { return m.FirstChunkLatency(ctx, p) }},
		{"raw hop", func() (bench.Latencies, error) { return raw.HopLatency(ctx, p) }},
	} {
		got, err := tt.in()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(got) != p.Samples {
			t.Errorf("%s: %d samples, want %d", tt.name, len(got), p.Samples)
		}
	}

	// A one-chunk run publishes at least accepted, routed, running, the
	// chunk and succeeded; a raw hop stores exactly its message.
	st, err := m.StoredPerRun(ctx, 3)
	if err != nil {
		t.Fatalf("mesh stored: %v", err)
	}
	if st.Runs != 3 || st.PerRun() < 5 {
		t.Errorf("mesh stored: %d runs, %.1f messages a run (%s), want 3 runs of at least 5", st.Runs, st.PerRun(), st)
	}
	hops, err := raw.StoredPerHop(ctx, 3)
	if err != nil {
		t.Fatalf("raw stored: %v", err)
	}
	if hops.Messages() != 3 || hops.ByStream[bench.RawStream] != 3 {
		t.Errorf("raw stored: %s, want %s 3 and nothing else", hops, bench.RawStream)
	}

	// Held runs: every one reaches running, holds, then ends cancelled.
	for _, by := range []bench.Follow{bench.FollowEach, bench.FollowTenant} {
		fp, err := m.HeldFootprint(ctx, w.Runs, by)
		if err != nil {
			t.Fatalf("held footprint, followed by %s: %v", by, err)
		}
		if fp.Runs != w.Runs || fp.Idle == 0 || fp.Followed == 0 || fp.InFlight == 0 {
			t.Errorf("held footprint, followed by %s: %+v, want %d runs and every figure taken", by, fp, w.Runs)
		}
	}
}

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) bench.Latencies {
		var l bench.Latencies
		for _, n := range ns {
			l = append(l, time.Duration(n)*time.Millisecond)
		}
		return l
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // reversed: Percentile sorts a copy
	}
	tests := []struct {
		name string
		in   bench.Latencies
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"p50 of 100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 of 100", ms(hundred...), 100, 100 * time.Millisecond},
		{"p50 of 3", ms(3, 1, 2), 50, 2 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.Percentile(tt.p); got != tt.want {
				t.Errorf("Percentile(%v) = %s, want %s", tt.p, got, tt.want)
			}
		})
	}
	l := ms(3, 1, 2)
	l.Percentile(50)
	if want := ms(3, 1, 2); !slices.Equal(l, want) {
		t.Errorf("Percentile reordered its receiver: %v, want %v", l, want)
	}
}
