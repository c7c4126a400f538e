package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bench"
	"github.com/agentmesh/agentmesh/pkg/natstest"
)

// The size `make bench` measures: one batch routes 10,000 runs each way.
var routingLoad = bench.RoutingLoad{Runs: 10_000, Submitters: 64}

// BenchmarkRouting reports runs/s routed by two routers sharing the submit
// stream (first Submit to every run routed and its submission acked),
// runs/s through a raw JetStream work queue of the same payloads (first
// publish to last ack), and mesh/raw. It fails unless every run was routed
// exactly once. One iteration is one batch of each, on the same payloads.
func BenchmarkRouting(b *testing.B) {
	srv := natstest.RunJetStream(b)
	routers := bench.StartRouters(b, srv, bench.RoutersConfig{})
	raw := bench.StartRawQueue(b, srv, routers.ConsumerConfig(), bench.DefaultRouters)
	warm := newRoutingBatch(b, bench.RoutingLoad{Runs: 200, Submitters: routingLoad.Submitters})
	measure(b, func(ctx context.Context) (bench.Routed, error) { return routers.Route(ctx, warm) })
	measure(b, func(ctx context.Context) (bench.Throughput, error) { return raw.Route(ctx, warm) })

	var mesh bench.Routed
	var base bench.Throughput
	for b.Loop() {
		batch := newRoutingBatch(b, routingLoad)
		mesh = mesh.Add(measure(b, func(ctx context.Context) (bench.Routed, error) { return routers.Route(ctx, batch) }))
		base = base.Add(measure(b, func(ctx context.Context) (bench.Throughput, error) { return raw.Route(ctx, batch) }))
	}
	if err := mesh.ExactlyOnce(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(0, "ns/op") // an iteration is two batches: not a figure of its own
	b.ReportMetric(mesh.PerSecond(), "mesh-runs/s")
	b.ReportMetric(base.PerSecond(), "raw-runs/s")
	b.ReportMetric(mesh.PerSecond()/base.PerSecond(), "ratio")
	b.Logf("%d batches of %d runs, %d submitters: mesh (%d routers) %.0f runs/s, raw work queue %.0f runs/s, mesh/raw %.3f; "+
		"routed exactly once: %d of %d (work %d, distinct %d, events [accepted routed] %d, records routed %d), by router %v",
		mesh.Items/routingLoad.Runs, routingLoad.Runs, routingLoad.Submitters, len(mesh.ByRouter),
		mesh.PerSecond(), base.PerSecond(), mesh.PerSecond()/base.PerSecond(),
		mesh.Events, mesh.Items, mesh.Work, mesh.WorkRuns, mesh.Events, mesh.Records, mesh.ByRouter)
}

func newRoutingBatch(tb testing.TB, l bench.RoutingLoad) bench.RoutingBatch {
	tb.Helper()
	batch, err := bench.NewRoutingBatch(l)
	if err != nil {
		tb.Fatal(err)
	}
	return batch
}

// TestRoutingMeasurementsComplete routes two small batches through two
// routers and the raw queue: every run must be routed exactly once, and
// both sides must take every payload. The second batch checks that the
// first left nothing behind. It asserts no timing.
func TestRoutingMeasurementsComplete(t *testing.T) {
	srv := natstest.RunJetStream(t)
	routers := bench.StartRouters(t, srv, bench.RoutersConfig{})
	raw := bench.StartRawQueue(t, srv, routers.ConsumerConfig(), bench.DefaultRouters)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	l := bench.RoutingLoad{Runs: 300, Submitters: 16}

	for batchNo := range 2 {
		batch := newRoutingBatch(t, l)
		got, err := routers.Route(ctx, batch)
		if err != nil {
			t.Fatalf("batch %d: mesh: %v", batchNo, err)
		}
		byRouter := 0
		for _, n := range got.ByRouter {
			byRouter += n
		}
		for _, c := range []struct {
			name      string
			got, want int
		}{
			{"runs", got.Items, l.Runs},
			{"work messages", got.Work, l.Runs},
			{"distinct runs in work", got.WorkRuns, l.Runs},
			{"runs with events exactly [accepted routed]", got.Events, l.Runs},
			{"records routed", got.Records, l.Runs},
			{"rejected", got.Rejected, 0},
			{"stray", got.Stray, 0},
			{"routers", len(got.ByRouter), bench.DefaultRouters},
			{"routed by the routers together", byRouter, l.Runs},
		} {
			if c.got != c.want {
				t.Errorf("batch %d: mesh: %s = %d, want %d", batchNo, c.name, c.got, c.want)
			}
		}
		if err := got.ExactlyOnce(); err != nil {
			t.Errorf("batch %d: %v", batchNo, err)
		}
		if got.Elapsed <= 0 {
			t.Errorf("batch %d: mesh elapsed %s", batchNo, got.Elapsed)
		}

		base, err := raw.Route(ctx, batch)
		if err != nil {
			t.Fatalf("batch %d: raw: %v", batchNo, err)
		}
		if base.Items != l.Runs || base.Elapsed <= 0 {
			t.Errorf("batch %d: raw: %+v, want %d items in some time", batchNo, base, l.Runs)
		}
	}
}

// ExactlyOnce must name what differs, so that a benchmark failing it says
// how the runs were routed.
func TestRoutedExactlyOnce(t *testing.T) {
	ok := bench.Routed{Throughput: bench.Throughput{Items: 3}, Events: 3, Records: 3, Work: 3, WorkRuns: 3, ByRouter: []int{1, 2}}
	tests := []struct {
		name    string
		in      bench.Routed
		wantErr bool
	}{
		{"exact", ok, false},
		{"two batches", ok.Add(ok), false},
		{"a run dispatched twice", func() bench.Routed { r := ok; r.Work = 4; return r }(), true},
		{"a run never dispatched", func() bench.Routed { r := ok; r.WorkRuns = 2; return r }(), true},
		{"a run with extra events", func() bench.Routed { r := ok; r.Events = 2; return r }(), true},
		{"a record not routed", func() bench.Routed { r := ok; r.Records = 2; return r }(), true},
		{"counted by two routers", func() bench.Routed { r := ok; r.ByRouter = []int{2, 2}; return r }(), true},
		{"a rejected run", func() bench.Routed { r := ok; r.Rejected = 1; return r }(), true},
		{"a stray event", func() bench.Routed { r := ok; r.Stray = 1; return r }(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.in.ExactlyOnce(); (err != nil) != tt.wantErr {
				t.Errorf("ExactlyOnce() = %v, wantErr %t", err, tt.wantErr)
			}
		})
	}
}
