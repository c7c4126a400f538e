package trajectory_test

import (
	"fmt"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// keyRedactor is a stand-in for pkg/exporter/redact: it removes one fake key.
type keyRedactor struct{ n int }

func (r *keyRedactor) String(s string) string {
	r.n += strings.Count(s, "sk-test-123")
	return strings.ReplaceAll(s, "sk-test-123", "[REDACTED:openai_key]")
}

func (r *keyRedactor) Counts() []trajectory.Fired {
	return []trajectory.Fired{{Rule: "openai_key", Count: r.n}}
}

func ExampleBuild() {
	ev := func(seq uint64, kind wire.EventKind) wire.Event {
		return wire.Event{V: 1, RunID: "r1", Seq: seq, TS: int64(seq) * 1e6, Kind: kind}
	}
	text, done := ev(1, wire.KindChunk), ev(2, wire.KindStatus)
	text.Chunk = &wire.Chunk{Type: wire.ChunkText, Content: "your key sk-test-123 is set"}
	done.Status = &wire.Status{State: wire.StateSucceeded, Summary: &wire.Summary{Chunks: 1, Cost: "0.0021", DurationMS: 40}}
	data, sum, err := trajectory.Build(trajectory.Input{
		Record:  wire.RunRecord{Tenant: "acme", RunID: "r1", Principal: "alice", Profile: "fixture", Created: 1},
		Request: map[string]any{"prompt": "use sk-test-123", "max_tokens": uint16(64)},
		Events:  []wire.Event{text, done},
	}, &keyRedactor{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(data))
	fmt.Println(len(sum))
	// Output:
	// {"schema_version":1,"tenant":"acme","run_id":"r1","principal":"alice","profile":"fixture","created_ms":1,"ended_ms":2,"request":{"max_tokens":64,"prompt":"use [REDACTED:openai_key]"},"chunks":[{"seq":1,"ts_ns":1000000,"type":"text","content":"your key [REDACTED:openai_key] is set","is_error":false,"is_delta":false,"metadata":{}}],"status":{"seq":2,"ts_ns":2000000,"state":"succeeded","summary":{"chunks":1,"cost":"0.0021","duration_ms":40}},"redaction":{"rules":[{"rule":"openai_key","count":2}]}}
	// 64
}

func ExampleDecode() {
	ev := wire.Event{V: 1, RunID: "r1", Seq: 1, TS: 5e6, Kind: wire.KindStatus,
		Status: &wire.Status{State: wire.StateRejected, Error: wire.Errorf(wire.AdmissionRejected, "queue full")}}
	data, _, _ := trajectory.Build(trajectory.Input{
		Record: wire.RunRecord{Tenant: "acme", RunID: "r1", Principal: "alice", Profile: "fixture"},
		Events: []wire.Event{ev},
	}, &keyRedactor{})
	t, err := trajectory.Decode(data)
	fmt.Println(t.Status.State, t.Status.Error.Class, err)
	_, err = trajectory.Decode([]byte(strings.Replace(string(data), `"tenant"`, `"Tenant"`, 1)))
	fmt.Println(err)
	// Output:
	// rejected AdmissionRejected <nil>
	// trajectory: malformed: not in canonical form: differs from its canonical encoding at byte 21 of 289
}
