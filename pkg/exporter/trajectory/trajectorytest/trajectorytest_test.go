package trajectorytest_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory/trajectorytest"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type pass struct{}

func (pass) String(s string) string     { return s }
func (pass) Counts() []trajectory.Fired { return nil }

func sample(t *testing.T) []byte {
	t.Helper()
	data, _, err := trajectory.Build(trajectory.Input{
		Record: wire.RunRecord{Tenant: "t", RunID: "r", Principal: "p", Profile: "fixture"},
		Events: []wire.Event{
			{V: 1, RunID: "r", Seq: 1, Kind: wire.KindChunk, Chunk: &wire.Chunk{Type: wire.ChunkText, Content: "hi"}},
			{V: 1, RunID: "r", Seq: 2, Kind: wire.KindStatus, Status: &wire.Status{State: wire.StateSucceeded}},
		},
	}, pass{})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestValidate(t *testing.T) {
	data := sample(t)
	r := &recorder{TB: t}
	trajectorytest.Validate(r, data)
	if r.failed != "" {
		t.Fatalf("a valid trajectory failed: %s", r.failed)
	}
	bad := strings.Replace(string(data), `"metadata":{}`, `"metadata":{"raw":"x"}`, 1)
	trajectorytest.Validate(r, []byte(bad))
	if !strings.Contains(r.failed, "raw") || !strings.Contains(r.failed, "schema v1") {
		t.Errorf("Validate of an extra metadata key: %q", r.failed)
	}
	if err := trajectorytest.Check([]byte("{")); err == nil {
		t.Errorf("Check accepted a truncated document")
	}
}

func TestCheckConcurrent(t *testing.T) {
	data := sample(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := trajectorytest.Check(data); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
