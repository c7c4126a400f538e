package bench_test

import (
	"context"
	"testing"

	"github.com/agentmesh/agentmesh/bench"
	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// The OpenAI text fixture: five text deltas.
const remoteCase, remoteTextChunks = "text", 5

// startRemote serves the OpenAI fixtures and a mesh with the openai adapter
// pointed at them.
func startRemote(tb testing.TB) (*bench.Mesh, string, []byte) {
	tb.Helper()
	fs, err := replay.Start("../testdata/remote/openai")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fs.Close() })
	base := fs.URL() + "/" + remoteCase
	a, err := openai.New(remote.Config{BaseURL: base, AllowLoopback: true}, openai.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	srv := natstest.RunJetStream(tb)
	m := bench.StartMesh(tb, srv, bench.MeshConfig{
		Adapters: []adapter.Adapter{a},
		Profiles: []profile.Profile{{Name: "openai", Adapter: "openai", Transport: wire.TransportRemote, Model: "gpt-5.5",
			BaseURL: base, AllowLoopback: true, Pricing: map[string]string{"input": "1", "output": "1", "cache_read": "1", "reasoning": "1"}}},
	})
	req, err := wire.Marshal(map[string]any{"prompt": "hi"})
	if err != nil {
		tb.Fatal(err)
	}
	return m, base + "/" + openai.ResponsesPath, req
}

// BenchmarkRemoteFirstChunk reports time to first chunk of a remote
// adapter through the mesh (submit → first chunk event, the response served
// by a loopback fixture server) against a direct HTTP client reading the
// same fixture stream to its first event, p50 and p99, and their ratios.
func BenchmarkRemoteFirstChunk(b *testing.B) {
	m, url, req := startRemote(b)
	probe := bench.Probe{Samples: 100, Warmup: 10, ChunkBytes: 1}
	var mesh, direct bench.Latencies
	for b.Loop() {
		mesh = append(mesh, measure(b, func(ctx context.Context) (bench.Latencies, error) {
			return m.ProfileFirstChunkLatency(ctx, "openai", req, remoteTextChunks, probe)
		})...)
		direct = append(direct, measure(b, func(ctx context.Context) (bench.Latencies, error) {
			return bench.DirectFirstEvent(ctx, url, []byte(`{"stream":true}`), probe)
		})...)
	}
	b.ReportMetric(0, "ns/op")
	mp50, mp99 := reportPercentiles(b, "mesh", mesh)
	dp50, dp99 := reportPercentiles(b, "direct", direct)
	b.ReportMetric(float64(mp50)/float64(dp50), "p50-ratio")
	b.ReportMetric(float64(mp99)/float64(dp99), "p99-ratio")
	b.Logf("%d samples each: mesh submit→first chunk p50 %s p99 %s; direct HTTP→first event p50 %s p99 %s; mesh/direct p50 %.1f p99 %.1f",
		len(mesh), mp50, mp99, dp50, dp99, float64(mp50)/float64(dp50), float64(mp99)/float64(dp99))
}

func TestRemoteMeasurementsComplete(t *testing.T) {
	m, url, req := startRemote(t)
	probe := bench.Probe{Samples: 2, Warmup: 1, ChunkBytes: 1}
	ctx := context.Background()
	if _, err := m.ProfileFirstChunkLatency(ctx, "openai", req, remoteTextChunks, probe); err != nil {
		t.Fatal(err)
	}
	if _, err := bench.DirectFirstEvent(ctx, url, []byte(`{}`), probe); err != nil {
		t.Fatal(err)
	}
}
