package trajectory_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// BenchmarkBuild10000 builds the trajectory of a run of 10,000 chunks
// (text deltas of about 60 bytes, with a tool call and result every 100)
// through a pass-through redactor: the cost of Build itself. MB/s counts
// the trajectory bytes written. The baseline is encoding/json of the same
// events, no checks, no normalisation, no hash.
func BenchmarkBuild10000(b *testing.B) {
	in := sampleInput(false, "")
	in.Events = in.Events[:3] // accepted, routed, running
	for i := range 10_000 {
		c := wire.Chunk{Type: wire.ChunkText, Content: fmt.Sprintf("chunk %05d of the answer, with some ordinary words in it.", i), IsDelta: true}
		switch i % 100 {
		case 98:
			c = wire.Chunk{Type: wire.ChunkToolUse, ToolName: "read_file", ToolID: fmt.Sprintf("toolu_%d", i),
				ToolInput: map[string]any{"path": "pkg/x/y.go", "limit": int64(200), "opts": map[string]any{"follow": true}}}
		case 99:
			c = wire.Chunk{Type: wire.ChunkToolResult, ToolID: fmt.Sprintf("toolu_%d", i-1),
				ToolOutput: map[string]any{"text": "package y\n\nfunc Y() {}\n", "lines": uint16(3)}}
		}
		in.Events = append(in.Events, wire.Event{V: 1, RunID: "run-42", Seq: uint64(len(in.Events) + 1), TS: int64(i) * 1000, Kind: wire.KindChunk, Chunk: &c})
	}
	in.Events = append(in.Events, wire.Event{V: 1, RunID: "run-42", Seq: uint64(len(in.Events) + 1), TS: 1e12, Kind: wire.KindStatus,
		Status: &wire.Status{State: wire.StateSucceeded, Summary: &wire.Summary{Chunks: 10_000, Cost: "0.1", DurationMS: 9000}}})
	data, _, err := trajectory.Build(in, passRedactor{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("build", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := trajectory.Build(in, passRedactor{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline-json-events", func(b *testing.B) {
		plain, err := json.Marshal(in.Events)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(plain)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(in.Events); err != nil {
				b.Fatal(err)
			}
		}
	})
}
