package bench_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bench"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"go.uber.org/goleak"
)

// The test binary doubles as the fake CLI of the CLI measurements (STYLE
// item 9): with FakeCLIEnv set it writes its stream-json and exits, before
// any test machinery (or goleak) starts.
func TestMain(m *testing.M) {
	if os.Getenv(bench.FakeCLIEnv) != "" {
		os.Exit(bench.FakeCLI(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// batchTimeout bounds one batch of a measurement, so that a stuck run fails
// the benchmark with its symptom instead of hanging it.
const batchTimeout = 2 * time.Minute

// The sizes `make bench` measures. One throughput batch moves 32,000
// chunks each way; one latency batch takes 200 samples each way.
var (
	throughputLoad = bench.Workload{Runs: 32, Chunks: 1000, ChunkBytes: 64}
	latencyProbe   = bench.Probe{Samples: 200, Warmup: 20, ChunkBytes: 64}
)

// BenchmarkChunkThroughput reports chunks/s received by clients from 32
// concurrent fixture runs, the same count of same-size messages through raw
// JetStream async publish + ordered consume, and mesh/raw. One iteration is
// one batch of each.
func BenchmarkChunkThroughput(b *testing.B) {
	srv := natstest.RunJetStream(b)
	m := bench.StartMesh(b, srv, bench.MeshConfig{MaxActive: throughputLoad.Runs})
	raw := bench.StartRaw(b, srv)
	warm := throughputLoad
	warm.Chunks = 10
	measure(b, func(ctx context.Context) (bench.Throughput, error) { return m.Throughput(ctx, warm) })
	measure(b, func(ctx context.Context) (bench.Throughput, error) { return raw.Throughput(ctx, warm) })

	var mesh, base bench.Throughput
	for b.Loop() {
		mesh = mesh.Add(measure(b, func(ctx context.Context) (bench.Throughput, error) { return m.Throughput(ctx, throughputLoad) }))
		base = base.Add(measure(b, func(ctx context.Context) (bench.Throughput, error) { return raw.Throughput(ctx, throughputLoad) }))
	}
	event, err := bench.ChunkEvent(throughputLoad)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(0, "ns/op") // an iteration is two batches: not a figure of its own
	b.ReportMetric(mesh.PerSecond(), "mesh-chunks/s")
	b.ReportMetric(base.PerSecond(), "raw-msgs/s")
	b.ReportMetric(mesh.PerSecond()/base.PerSecond(), "ratio")
	b.Logf("%d runs x %d chunks of %d B text (%d B event): mesh %.0f chunks/s, raw %.0f msgs/s, mesh/raw %.3f",
		throughputLoad.Runs, throughputLoad.Chunks, throughputLoad.ChunkBytes, len(event),
		mesh.PerSecond(), base.PerSecond(), mesh.PerSecond()/base.PerSecond())
}

// BenchmarkFirstChunkLatency reports p50 and p99 of submit→first chunk
// through the mesh, of one raw JetStream publish→consume hop, and
// mesh/raw for each. One iteration is one batch of samples of each.
func BenchmarkFirstChunkLatency(b *testing.B) {
	srv := natstest.RunJetStream(b)
	m := bench.StartMesh(b, srv, bench.MeshConfig{})
	raw := bench.StartRaw(b, srv)
	var mesh, base bench.Latencies
	for b.Loop() {
		mesh = append(mesh, sample(b, func(ctx context.Context) (bench.Latencies, error) { return m.FirstChunkLatency(ctx, latencyProbe) })...)
		base = append(base, sample(b, func(ctx context.Context) (bench.Latencies, error) { return raw.HopLatency(ctx, latencyProbe) })...)
	}
	mp50, mp99 := mesh.Percentile(50), mesh.Percentile(99)
	rp50, rp99 := base.Percentile(50), base.Percentile(99)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(bench.Micros(mp50), "mesh-p50-us")
	b.ReportMetric(bench.Micros(mp99), "mesh-p99-us")
	b.ReportMetric(bench.Micros(rp50), "raw-p50-us")
	b.ReportMetric(bench.Micros(rp99), "raw-p99-us")
	b.ReportMetric(float64(mp50)/float64(rp50), "p50-ratio")
	b.ReportMetric(float64(mp99)/float64(rp99), "p99-ratio")
	b.Logf("%d samples each: mesh submit→first chunk p50 %s p99 %s; raw hop p50 %s p99 %s; mesh/raw p50 %.1f p99 %.1f",
		len(mesh), mp50, mp99, rp50, rp99, float64(mp50)/float64(rp50), float64(mp99)/float64(rp99))
}

func measure(b *testing.B, f func(context.Context) (bench.Throughput, error)) bench.Throughput {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), batchTimeout)
	defer cancel()
	got, err := f(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return got
}

func sample(b *testing.B, f func(context.Context) (bench.Latencies, error)) bench.Latencies {
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
