package trajectory_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory/trajectorytest"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// seedInputs are the runs whose trajectories seed FuzzDecodeTrajectory
// (testdata/fuzz/trajectory/<name>.json), besides the golden one.
func seedInputs() map[string]trajectory.Input {
	rejected := sampleInput(false, "")
	rejected.Request, rejected.Labels, rejected.Record.Pin, rejected.Record.Adapter, rejected.Record.Conversation = nil, nil, nil, "", ""
	rejected.Events = []wire.Event{
		{V: 1, RunID: "run-42", Seq: 1, TS: 1, Kind: wire.KindStatus, Status: &wire.Status{State: wire.StateAccepted}},
		{V: 1, RunID: "run-42", Seq: 2, TS: 2, Kind: wire.KindStatus, Status: &wire.Status{State: wire.StateRejected,
			Error: &wire.Error{Class: wire.AdmissionRejected, Message: "queue full"}}},
	}
	odd := sampleInput(true, " SECRET")
	odd.Request = map[string]any{
		"tools":  []any{"read", map[string]any{"name": "t", "input_schema": map[string]any{"x": 1e21}}, int64(3)},
		"nums":   []any{uint64(1 << 63), int64(-1 << 63), 1e-7, 123456789.125, float32(3.4e38)},
		"text":   "tab\t nl\n quote\" back\\ nul\x00 line\u2028 <&> é 😀",
		"nested": map[string]any{"": map[string]any{"a": []any{[]any{}, map[string]any{}}}},
	}
	return map[string]trajectory.Input{"rejected": rejected, "odd": odd}
}

// TestFuzzSeeds checks the committed seeds, or rewrites them with -update.
func TestFuzzSeeds(t *testing.T) {
	for name, in := range seedInputs() {
		data, _ := build(t, in, newMarkRedactor(secrets))
		path := filepath.Join(seedDir, name+".json")
		if *update {
			if err := os.MkdirAll(seedDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("seed %s: %v (run with -update)", name, err)
		}
		if !bytes.Equal(b, data) {
			t.Errorf("seed %s is not what Build writes now (run with -update)", name)
		}
		if _, err := trajectory.Decode(b); err != nil {
			t.Errorf("seed %s: %v", name, err)
		}
	}
}

// FuzzDecodeTrajectory asserts that Decode never panics, that each error
// is a *DecodeError matching ErrMalformed, and that whatever it accepts
// the JSON Schema validator accepts too (Decode is at least as strict as
// the schema) and decodes again.
func FuzzDecodeTrajectory(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join(seedDir, "*.json"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds in %s (%v)", seedDir, err)
	}
	for _, s := range append(seeds, goldenPath) {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{"", "null", "{}", `{"schema_version":1}`, strings.Repeat("[", 20000), `{"chunks":[{"tool_output":1e400}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := trajectory.Decode(data)
		if err != nil {
			var de *trajectory.DecodeError
			if !errors.Is(err, trajectory.ErrMalformed) || !errors.As(err, &de) {
				t.Fatalf("error %v (%T) is not a *DecodeError", err, err)
			}
			return
		}
		if err := trajectorytest.Check(data); err != nil {
			t.Fatalf("Decode accepted what the schema refuses: %v\n%s", err, data)
		}
		if tr.SchemaVersion != trajectory.SchemaVersion {
			t.Fatalf("accepted schema_version %d", tr.SchemaVersion)
		}
		if _, err := trajectory.Decode(bytes.Clone(data)); err != nil {
			t.Fatalf("second Decode: %v", err)
		}
	})
}
