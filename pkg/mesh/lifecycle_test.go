package mesh_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// collectIn is collect for a run of tenant tn.
func collectIn(t *testing.T, c *client.Client, tn, runID string) []wire.Event {
	return clienttest.Collect(t, c, tn, runID)
}

func TestSameRunIDInTwoTenantsIsTwoRuns(t *testing.T) {
	srv := natstest.RunJetStream(t)
	startNode(t, srv, mesh.Config{})
	c := newClient(t, srv)
	ctx := context.Background()
	const id = "job-42"
	for _, tn := range []string{"alpha", "beta"} {
		r := runReq(t, fixtureReq{Prompt: "hello " + tn})
		r.RunID, r.Tenant = id, tn
		if _, err := c.Submit(ctx, r); err != nil {
			t.Fatalf("submit in %s: %v", tn, err)
		}
	}
	for _, tn := range []string{"alpha", "beta"} {
		evs := collectIn(t, c, tn, id)
		checkGapless(t, evs)
		if st := last(evs); st.State != wire.StateSucceeded {
			t.Fatalf("%s's %s: %s (%s)", tn, id, st.State, describe(evs))
		}
	}
	// The same id twice in one tenant is still one run.
	r := runReq(t, fixtureReq{Prompt: "again"})
	r.RunID, r.Tenant = id, "alpha"
	if _, err := c.Submit(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctx, r); err != nil {
		t.Fatal(err)
	}
	// A third tenant's run after both resubmissions: once it has ended, the
	// resubmissions have been handled (one router, submissions in order).
	probe := runReq(t, fixtureReq{Prompt: "probe"})
	probe.Tenant = "gamma"
	if _, err := c.Submit(ctx, probe); err != nil {
		t.Fatal(err)
	}
	collectIn(t, c, "gamma", probe.RunID)
	if evs := collectIn(t, c, "alpha", id); len(evs) != 10 || describe(evs) != "[accepted routed running system thinking text tool_use tool_result result succeeded]" {
		t.Fatalf("alpha's %s after resubmission: %s", id, describe(evs))
	}
}

func TestOneTenantsBurstDoesNotRejectAnothers(t *testing.T) {
	srv := natstest.RunJetStream(t)
	cfg := mesh.Config{WithoutRunner: true}
	cfg.Topology.WorkQueueMax = 1024
	cfg.Topology.WorkQueueTenantMax = 20
	startNode(t, srv, cfg)
	c := newClient(t, srv)
	ctx := context.Background()
	// Tenant alpha submits 1,000 runs with no runner taking them: 20 queue,
	// the rest are rejected at once. Beta's runs, interleaved, all queue.
	var betaIDs []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 250 {
				r := runReq(t, fixtureReq{Prompt: "burst"})
				r.Tenant = "alpha"
				if _, err := c.Submit(ctx, r); err != nil {
					t.Error(err)
					return
				}
				if w == 0 && i%25 == 0 {
					b := runReq(t, fixtureReq{Prompt: "steady"})
					b.Tenant = "beta"
					if _, err := c.Submit(ctx, b); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					betaIDs = append(betaIDs, b.RunID)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, id := range betaIDs {
		waitForIn(t, c, "beta", id, wire.StateRouted)
	}
	// Now run them: beta's every run succeeds.
	fx := newFixture(t)
	rc := mesh.Config{WithoutRouter: true, WithoutSweeper: true}
	rc.Runner.MaxActive = map[string]int{"fixture": 8}
	startNodeWith(t, srv, rc, profile.Builtin(), fx)
	for _, id := range betaIDs {
		if st := last(collectIn(t, c, "beta", id)); st.State != wire.StateSucceeded {
			t.Fatalf("beta's run %s: %s %v", id, st.State, st.Error)
		}
	}
	if len(betaIDs) != 10 {
		t.Fatalf("beta submitted %d runs, want 10", len(betaIDs))
	}
}

func waitForIn(t *testing.T, c *client.Client, tn, runID string, state wire.State) {
	clienttest.WaitFor(t, c, tn, runID, state)
}

// A mesh whose context ends right after it started stops without an error
// from any service (the sweeper used to report its lease watch's
// "context canceled").
func TestMeshStopsQuietlyRightAfterStart(t *testing.T) {
	srv := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, srv)
	adapters := fixtureAdapters(t)
	for i := range 30 {
		d := service.Deps{NC: nc, JS: js, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- mesh.Run(ctx, d, profile.Builtin(), adapters, mesh.Config{}) }()
		time.Sleep(time.Duration(i%10) * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("stop %d ms after start: %v", i%10, err)
		}
	}
	// A stopped mesh may leave a topology create it sent in flight; one
	// the server completes while it shuts down leaves its stream's
	// goroutines running (which goleak then finds). Ensuring the topology
	// to the end waits for every create before it.
	if err := topology.Ensure(context.Background(), js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
}

// A follower that goes longer than its refollow interval without an event
// follows again on a fresh consumer and still yields every event once, in
// order.
func TestEventsFollowAgainAfterSilence(t *testing.T) {
	srv := natstest.RunJetStream(t)
	startNode(t, srv, mesh.Config{})
	nc, _ := natstest.Connect(t, srv)
	c, err := client.New(nc, subject.Names{}, client.WithRefollowAfter(150*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	want := collect(t, newClient(t, srv), submitSlow(t, newClient(t, srv), 10)) // the same script, followed plainly
	id := submitSlow(t, c, 400)                                                 // 400 ms between events: > 150 ms
	got := collect(t, c, id)
	checkGapless(t, got)
	if describe(got) != describe(want) {
		t.Fatalf("events = %s, want %s", describe(got), describe(want))
	}
}

func submitSlow(t *testing.T, c *client.Client, delayMS int) string {
	t.Helper()
	id, err := c.Submit(context.Background(), runReq(t, fixtureReq{Prompt: "slow", Script: "slow", DelayMS: delayMS}))
	if err != nil {
		t.Fatal(err)
	}
	return id
}
