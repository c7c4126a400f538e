package bench_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bench"
	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// cliLoad is the size BenchmarkCLI measures: 8 fake CLI runs at once (the
// runner's max_active for claude-code), each emitting 20,000 text chunks of
// 64 B; one batch moves 160,000 chunks on each of the three sides. Runs
// are long so that starting 8 children (about 30 ms on 2 cores, output or
// not) does not make up most of the direct side: at 5,000 chunks a run it
// did, and the direct figure then measured process start-up.
var cliLoad = bench.Workload{Runs: 8, Chunks: 20000, ChunkBytes: 64}

// BenchmarkCLI reports end-to-end chunk throughput from a fast-emitting
// fake Claude Code CLI through the mesh (claude-code adapter in the
// runner, chunks received through client.Events), the same CLI's stdout
// read directly in this process (raw lines through a bufio.Reader), and in
// between the adapter's own stream in this process (proc framing +
// claudecode parser, no NATS); then mesh/direct, parse/direct and
// mesh/parse. One iteration is one batch of each side.
func BenchmarkCLI(b *testing.B) {
	srv := natstest.RunJetStream(b)
	cli := bench.NewCLI(b)
	m := bench.StartMesh(b, srv, bench.MeshConfig{
		MaxActive: cliLoad.Runs, Adapters: []adapter.Adapter{cli.Adapter()}, Profiles: []profile.Profile{cli.Profile()},
	})
	sides := []func(context.Context, bench.Workload) (bench.Throughput, error){m.CLIThroughput, cli.DirectThroughput, cli.ParseThroughput}
	warm := cliLoad
	warm.Chunks = 10
	for _, side := range sides {
		measure(b, func(ctx context.Context) (bench.Throughput, error) { return side(ctx, warm) })
	}

	var got [3]bench.Throughput // mesh, direct, parse
	for b.Loop() {
		for i, side := range sides {
			got[i] = got[i].Add(measure(b, func(ctx context.Context) (bench.Throughput, error) { return side(ctx, cliLoad) }))
		}
	}
	mesh, direct, parse := got[0].PerSecond(), got[1].PerSecond(), got[2].PerSecond()
	b.ReportMetric(0, "ns/op") // an iteration is three batches: not a figure of its own
	b.ReportMetric(mesh, "mesh-chunks/s")
	b.ReportMetric(direct, "direct-lines/s")
	b.ReportMetric(parse, "parse-chunks/s")
	b.ReportMetric(mesh/direct, "mesh/direct")
	b.ReportMetric(parse/direct, "parse/direct")
	b.ReportMetric(mesh/parse, "mesh/parse")
	b.Logf("%d fake CLI runs x %d text chunks of %d B: mesh %.0f chunks/s, direct read %.0f lines/s, parse %.0f chunks/s; mesh/direct %.4f, parse/direct %.3f, mesh/parse %.3f",
		cliLoad.Runs, cliLoad.Chunks, cliLoad.ChunkBytes, mesh, direct, parse, mesh/direct, parse/direct, mesh/parse)
}

// TestFakeCLIParses checks the fake's output against the claude-code
// parser: one system chunk with the session, one text chunk per assistant
// line, a result without content (its text was already emitted, except
// when there was none).
func TestFakeCLIParses(t *testing.T) {
	text := "the quick brown fox jumps over the lazy dog; the quick brown fox"
	if len(text) != 64 {
		t.Fatalf("test text is %d bytes, want 64", len(text))
	}
	tests := []struct {
		name     string
		in       string // the prompt
		want     []wire.ChunkType
		wantCode int
	}{
		{"three", "3 64", []wire.ChunkType{wire.ChunkSystem, wire.ChunkText, wire.ChunkText, wire.ChunkText, wire.ChunkResult}, 0},
		{"none", "0 64", []wire.ChunkType{wire.ChunkSystem, wire.ChunkResult}, 0},
		{"not a workload", "hello", nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, stderr bytes.Buffer
			args := []string{"-p", "--output-format", "stream-json", "--verbose", "--model", "claude-opus-4", "--", tt.in}
			if code := bench.FakeCLI(args, &out, &stderr); code != tt.wantCode {
				t.Fatalf("exit %d (stderr %q), want %d", code, stderr.String(), tt.wantCode)
			}
			if tt.wantCode != 0 {
				return
			}
			p := claudecode.NewParser()
			var got []wire.Chunk
			dec := ndjson.NewDecoder(&out)
			for {
				ev, err := dec.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("framing: %v", err)
				}
				cs, err := p.Event(ev)
				if err != nil {
					t.Fatalf("parser: %v", err)
				}
				got = append(got, cs...)
			}
			end, err := p.End()
			if err != nil || len(end) > 0 {
				t.Fatalf("End = %v, %v; want nothing", end, err)
			}
			var types []wire.ChunkType
			for _, c := range got {
				types = append(types, c.Type)
			}
			if !slices.Equal(types, tt.want) {
				t.Fatalf("chunk types %v, want %v", types, tt.want)
			}
			sys, res := got[0], got[len(got)-1]
			if sys.Metadata.SessionID == "" || sys.Metadata.Model != "claude-opus-4" {
				t.Errorf("system chunk metadata %+v: want a session id and the --model given", sys.Metadata)
			}
			for _, c := range got[1 : len(got)-1] {
				if c.Content != text || c.IsDelta {
					t.Errorf("text chunk %q (delta %t), want %q complete", c.Content, c.IsDelta, text)
				}
			}
			wantResult := ""
			if len(got) == 2 {
				wantResult = text
			}
			if res.Content != wantResult || res.Metadata.Usage == nil {
				t.Errorf("result chunk content %q usage %v, want %q and usage", res.Content, res.Metadata.Usage, wantResult)
			}
		})
	}
}

// TestCLIMeasurementsComplete runs each side of BenchmarkCLI once at a
// tiny size (the fake is this race-built binary too): each run must
// complete with its count, and every child is reaped (goleak and the
// adapter's teardown see to the rest). It asserts no timing.
func TestCLIMeasurementsComplete(t *testing.T) {
	srv := natstest.RunJetStream(t)
	cli := bench.NewCLI(t)
	m := bench.StartMesh(t, srv, bench.MeshConfig{
		MaxActive: 2, Adapters: []adapter.Adapter{cli.Adapter()}, Profiles: []profile.Profile{cli.Profile()},
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w := bench.Workload{Runs: 2, Chunks: 300, ChunkBytes: 64} // > the runner's async window of 256
	for _, tt := range []struct {
		name string
		in   func(context.Context, bench.Workload) (bench.Throughput, error)
	}{
		{"mesh", m.CLIThroughput},
		{"direct", cli.DirectThroughput},
		{"parse", cli.ParseThroughput},
	} {
		got, err := tt.in(ctx, w)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if want := w.Runs * w.Chunks; got.Items != want || got.Elapsed <= 0 {
			t.Errorf("%s: %+v, want %d items in some time", tt.name, got, want)
		}
	}
}
