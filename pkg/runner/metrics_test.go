package runner_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRunnerMetricsAndMicro: a router and a runner host on one registry
// (as `agentmesh up` has them) share the families they both move; the
// runner counts its runs in flight, and each ended run's tokens, cost and
// duration once; its micro metadata lists its adapters and their max
// active, and its micro stats count the deliveries it executed and the runs
// it ended. Runs come from two tenants.
func TestRunnerMetricsAndMicro(t *testing.T) {
	srv := natstest.RunJetStream(t)
	ctx := context.Background()
	m := service.NewMetrics(prometheus.NewRegistry())
	rd, hd := servicetest.Deps(t, srv, topology.Config{}), servicetest.Deps(t, srv, topology.Config{})
	rd.Metrics, hd.Metrics = m, m
	profiles, err := profile.New(profile.Profile{Name: "fixture", Adapter: "fixture", Transport: wire.TransportInProcess, Model: "fixture-1",
		Pricing: map[string]string{"input": "1.5", "output": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	adapters, err := adapter.NewRegistry(fixtureAdapter(t))
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.New(ctx, rd, profiles, adapters, router.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := runner.New(ctx, hd, adapters, runner.Config{ID: "r1", MaxActive: map[string]int{"fixture": 3}})
	if err != nil {
		t.Fatal(err)
	}
	servicetest.Start(t, func(ctx context.Context, _ *slog.Logger) error { return r.Run(ctx) })
	servicetest.Start(t, func(ctx context.Context, _ *slog.Logger) error { return h.Run(ctx) })

	info := servicetest.CheckMicro(t, hd.NC, "agentmesh-runner")
	if info.Metadata["adapters"] != "fixture" || info.Metadata["max_active"] != "fixture:3" || info.Metadata["runner_id"] != "r1" {
		t.Errorf("runner micro metadata = %v, want adapters fixture, max_active fixture:3, runner_id r1", info.Metadata)
	}

	inFlight := m.InFlight.WithLabelValues("fixture")
	c := clienttest.New(t, srv)
	slow, err := c.Submit(ctx, clienttest.FixtureRun(t, tenant, fixtureReq{Prompt: "x", Script: "slow", DelayMS: 20}))
	if err != nil {
		t.Fatal(err)
	}
	clienttest.WaitForOutput(ctx, t, c, tenant, slow)
	if got := testutil.ToFloat64(inFlight); got != 1 {
		t.Errorf("runs in flight during a run = %v, want 1", got)
	}
	clienttest.WaitFor(t, c, tenant, slow, wire.StateSucceeded)
	for _, tn := range []string{tenant, "globex"} {
		if _, evs := clienttest.Run(t, c, clienttest.FixtureRun(t, tn, fixtureReq{Prompt: "hi", Script: "hello"})); clienttest.Last(evs).State != wire.StateSucceeded {
			t.Fatalf("tenant %s: run ended %s", tn, clienttest.Describe(evs))
		}
	}
	natstest.Eventually(t, 5*time.Second, func() error {
		if got := testutil.ToFloat64(inFlight); got != 0 {
			return fmt.Errorf("runs in flight after the runs = %v, want 0", got)
		}
		return nil
	})
	// The hello script reports 3 input and 4 output tokens; the slow one none.
	if in, out := testutil.ToFloat64(m.Tokens.WithLabelValues("input")), testutil.ToFloat64(m.Tokens.WithLabelValues("output")); in != 6 || out != 8 {
		t.Errorf("tokens input %v output %v, want 6 and 8", in, out)
	}
	if got, want := testutil.ToFloat64(m.Cost), 2*(3*1.5+4*2)/1e6; math.Abs(got-want) > 1e-15 {
		t.Errorf("cost = %v, want %v", got, want)
	}
	if got := testutil.ToFloat64(m.Runs.WithLabelValues("succeeded", "fixture")); got != 3 {
		t.Errorf("succeeded runs = %v, want 3", got)
	}
	if got := testutil.CollectAndCount(m.RunDuration); got != 1 {
		t.Errorf("run duration series = %d, want 1 (fixture)", got)
	}

	if _, counts := servicetest.Endpoint(t, servicetest.MicroStats(t, hd.NC, "agentmesh-runner"), "cancel"); counts["deliveries"] != 3 || counts["runs_ended"] != 3 {
		t.Errorf("runner micro stats data = %v, want 3 deliveries and 3 runs ended", counts)
	}
}
