package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bench"
	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
)

// startACPMesh starts a server and a mesh that hosts adapter acp over the
// fake ACP agent (bench.ACPProfile).
func startACPMesh(tb testing.TB) *bench.Mesh {
	tb.Helper()
	srv := natstest.RunJetStream(tb)
	a := bench.NewACP(tb)
	return bench.StartMesh(tb, srv, bench.MeshConfig{
		Adapters: []adapter.Adapter{a.Adapter()}, Profiles: []profile.Profile{a.Profile()},
	})
}

// BenchmarkSessionFollowUp reports, for sessions of adapter acp over the
// fake ACP agent (issue 25, acceptance 4), p50 of the first turn's submit
// → first content chunk (agent process start, initialize, session/new,
// the prompt) and of the follow-up turn's client.Send → first content
// chunk (one input control request through the router to the runner, one
// session/prompt to the live agent), and followup/first, the ratio of the
// two p50s. One iteration is one session: submitted, a follow-up after
// its first turn, cancelled after its second and followed to its end, so
// each iteration starts and reaps one agent process.
func BenchmarkSessionFollowUp(b *testing.B) {
	m := startACPMesh(b)
	measure(b, func(ctx context.Context) (bench.Turns, error) { return m.SessionTurns(ctx, 1, 1) })
	var all bench.Turns
	for b.Loop() {
		t := measure(b, func(ctx context.Context) (bench.Turns, error) { return m.SessionTurns(ctx, 1, 0) })
		all.First = append(all.First, t.First...)
		all.FollowUp = append(all.FollowUp, t.FollowUp...)
	}
	first, follow := all.First.Percentile(50), all.FollowUp.Percentile(50)
	b.ReportMetric(0, "ns/op") // an iteration is a session of two turns: not a figure of its own
	b.ReportMetric(millis(first), "first-ms-p50")
	b.ReportMetric(millis(follow), "followup-ms-p50")
	b.ReportMetric(float64(follow)/float64(first), "followup/first")
	b.Logf("%d sessions: first turn (submit → first content chunk) p50 %s p90 %s; follow-up (Send → first content chunk) p50 %s p90 %s; followup/first %.3f",
		len(all.First), first, all.First.Percentile(90), follow, all.FollowUp.Percentile(90), float64(follow)/float64(first))
}

// millis is d in milliseconds.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestSessionMeasurementsComplete runs SessionTurns at a tiny size: each
// session must take its follow-up, end cancelled and leave no agent
// process (goleak and the adapter's teardown see to the rest). It asserts
// no timing.
func TestSessionMeasurementsComplete(t *testing.T) {
	m := startACPMesh(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	got, err := m.SessionTurns(ctx, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.First) != 2 || len(got.FollowUp) != 2 {
		t.Fatalf("%d first turns and %d follow-ups, want 2 each", len(got.First), len(got.FollowUp))
	}
	for i := range got.First {
		if got.First[i] <= 0 || got.FollowUp[i] <= 0 {
			t.Errorf("sample %d: first %s, follow-up %s; want both > 0", i, got.First[i], got.FollowUp[i])
		}
	}
}
