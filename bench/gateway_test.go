package bench_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bench"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/nats-io/nats-server/v2/server"
)

// gatewayBench is an HTTP gateway, on a connection of its own, in front
// of a bench mesh, and a key for it.
type gatewayBench struct {
	url, key string
	http     *http.Client
}

func startGateway(tb testing.TB, srv *server.Server) *gatewayBench {
	tb.Helper()
	nc, js := natstest.Connect(tb, srv)
	keys, err := gateway.OpenKeys(context.Background(), js, subject.Names{})
	if err != nil {
		tb.Fatal(err)
	}
	turns, err := gateway.OpenTurns(context.Background(), js, subject.Names{})
	if err != nil {
		tb.Fatal(err)
	}
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		tb.Fatal(err)
	}
	g, err := gateway.New(c, keys, turns, profile.Builtin(), slog.New(slog.DiscardHandler), gateway.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	key, _, err := keys.Create(context.Background(), bench.Tenant, "bench")
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(g.Handler())
	tr := &http.Transport{}
	tb.Cleanup(func() { tr.CloseIdleConnections(); hs.Close() })
	return &gatewayBench{url: hs.URL, key: key, http: &http.Client{Transport: tr}}
}

// firstToken measures samples streaming chat completions (after warmup
// unmeasured ones) of the fixture script named script: from sending the
// request to reading the first chunk with content, each read to its
// [DONE].
func (gb *gatewayBench) firstToken(ctx context.Context, script string, p bench.Probe) (bench.Latencies, error) {
	body := `{"model":"fixture","stream":true,"messages":[{"role":"user","content":"bench"}],"agentmesh_request":{"script":"` + script + `"}}`
	var out bench.Latencies
	for i := range p.Warmup + p.Samples {
		req, _ := http.NewRequestWithContext(ctx, "POST", gb.url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+gb.key)
		t0 := time.Now()
		resp, err := gb.http.Do(req)
		if err != nil {
			return nil, err
		}
		var first time.Duration
		sc := bufio.NewScanner(resp.Body)
		done := false
		for sc.Scan() {
			line := sc.Text()
			if first == 0 && withContent.MatchString(line) {
				first = time.Since(t0)
			}
			if line == "data: [DONE]" {
				done = true
			}
		}
		resp.Body.Close()
		if !done || first == 0 {
			return nil, fmt.Errorf("gateway sample %d: status %d, done %v, first token seen %v", i, resp.StatusCode, done, first != 0)
		}
		if i >= p.Warmup {
			out = append(out, first)
		}
	}
	return out, nil
}

// withContent matches a chat chunk with text in its delta.
var withContent = regexp.MustCompile(`"content":"[^"]`)

// BenchmarkGatewayFirstToken reports p50 and p99 of the time to first
// token of a streaming chat completion through the HTTP gateway and of the
// mesh's own submit→first chunk, both replaying the same one-chunk
// fixture script, and their ratio at p50: what HTTP, SSE and the OpenAI
// shapes add. One iteration is one batch of samples of each.
func BenchmarkGatewayFirstToken(b *testing.B) {
	srv := natstest.RunJetStream(b)
	m := bench.StartMesh(b, srv, bench.MeshConfig{})
	gb := startGateway(b, srv)
	script, err := m.Script(bench.Workload{Runs: 1, Chunks: 1, ChunkBytes: latencyProbe.ChunkBytes})
	if err != nil {
		b.Fatal(err)
	}
	var gw, mesh bench.Latencies
	for b.Loop() {
		gw = append(gw, measure(b, func(ctx context.Context) (bench.Latencies, error) { return gb.firstToken(ctx, script, latencyProbe) })...)
		mesh = append(mesh, measure(b, func(ctx context.Context) (bench.Latencies, error) { return m.FirstChunkLatency(ctx, latencyProbe) })...)
	}
	b.ReportMetric(0, "ns/op")
	gp50, gp99 := reportPercentiles(b, "gateway", gw)
	mp50, mp99 := reportPercentiles(b, "mesh", mesh)
	b.ReportMetric(float64(gp50)/float64(mp50), "gateway/mesh-p50")
	b.Logf("%d samples each: gateway first token p50 %s p99 %s; mesh submit→first chunk p50 %s p99 %s; gateway ÷ mesh at p50 %.2f",
		len(gw), gp50, gp99, mp50, mp99, float64(gp50)/float64(mp50))
}

// TestGatewayFirstTokenCompletes runs the gateway measurement once at a
// tiny size: every sample must stream its text to [DONE]. It asserts no
// timing.
func TestGatewayFirstTokenCompletes(t *testing.T) {
	srv := natstest.RunJetStream(t)
	m := bench.StartMesh(t, srv, bench.MeshConfig{})
	gb := startGateway(t, srv)
	script, err := m.Script(bench.Workload{Runs: 1, Chunks: 1, ChunkBytes: 8})
	if err != nil {
		t.Fatal(err)
	}
	got, err := gb.firstToken(t.Context(), script, bench.Probe{Samples: 3, Warmup: 1, ChunkBytes: 8})
	if err != nil || len(got) != 3 {
		t.Fatalf("firstToken: %d samples, %v; want 3", len(got), err)
	}
}
