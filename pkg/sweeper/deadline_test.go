package sweeper_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	fixtureadapter "github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// runIn runs a component's Run method in the background until the test
// ends, failing the test unless it returns nil.
func runIn(t *testing.T, run func(ctx context.Context) error) {
	t.Helper()
	servicetest.Start(t, func(ctx context.Context, _ *slog.Logger) error { return run(ctx) })
}

// TestQueuedRunPastDeadlineTimesOut: a run routed but never taken is timed
// out by the sweeper's reconcile once its deadline passed, and a runner
// arriving later finds it ended and drops its work.
func TestQueuedRunPastDeadlineTimesOut(t *testing.T) {
	srv := natstest.RunJetStream(t)
	ctx := context.Background()
	fx, err := fixtureadapter.New(fixtureadapter.Config{ScriptsDir: "../../testdata/fixture"})
	if err != nil {
		t.Fatal(err)
	}
	adapters, err := adapter.NewRegistry(fx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.New(ctx, servicetest.Deps(t, srv, topology.Config{}), profile.Builtin(), adapters, router.Config{})
	if err != nil {
		t.Fatal(err)
	}
	runIn(t, r.Run)
	sd := servicetest.Deps(t, srv, topology.Config{})
	sw, err := sweeper.New(ctx, sd, sweeper.Config{ReconcileEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runIn(t, sw.Run)

	c := clienttest.New(t, srv)
	const tenant = "acme"
	req := clienttest.FixtureRun(t, tenant, map[string]any{"prompt": "nobody runs me"})
	req.DeadlineMS = 200
	id, err := c.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	evs := clienttest.Collect(t, c, tenant, id)
	if got := clienttest.Describe(evs); got != "[accepted routed timed_out]" {
		t.Fatalf("events = %s", got)
	}
	if st := clienttest.Last(evs); !errors.Is(st.Error, wire.DeadlineExceeded) {
		t.Fatalf("error = %v", st.Error)
	}
	// Counted once the sweeper's End returns, just after the client saw it.
	natstest.Eventually(t, 5*time.Second, func() error {
		_, counts := servicetest.Endpoint(t, servicetest.MicroStats(t, sd.NC, "agentmesh-sweeper"), "reconcile")
		if counts["runs_timed_out"] != 1 || counts["runs_expired"] != 0 {
			return fmt.Errorf("sweeper micro stats data = %v, want 1 run timed out, none expired", counts)
		}
		return nil
	})
	if got := testutil.ToFloat64(sd.Metrics.Runs.WithLabelValues("timed_out", "fixture")); got != 1 {
		t.Errorf("timed out runs counted = %v, want 1", got)
	}

	d := servicetest.Deps(t, srv, topology.Config{})
	h, err := runner.New(ctx, d, adapters, runner.Config{})
	if err != nil {
		t.Fatal(err)
	}
	runIn(t, h.Run)
	natstest.Eventually(t, 10*time.Second, func() error {
		st, err := d.JS.Stream(ctx, d.Names.WorkStream())
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs != 0 {
			return fmt.Errorf("%d work items left", info.State.Msgs)
		}
		return nil
	})
	if got := clienttest.Describe(clienttest.Collect(t, c, tenant, id)); got != "[accepted routed timed_out]" {
		t.Fatalf("after a runner came: %s", got)
	}
}
