package mesh_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vmihailenco/msgpack/v5"
)

// collectIn is collect for a run of tenant tn.
func collectIn(t *testing.T, c *client.Client, tn, runID string) []wire.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []wire.Event
	for ev, err := range c.Events(ctx, tn, runID, 1) {
		if err != nil {
			t.Fatalf("events of %s.%s: %v (got %s)", tn, runID, err, describe(out))
		}
		out = append(out, ev)
	}
	return out
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

// rawSubmit publishes b on tenant tn's submit subject with msgID.
func rawSubmit(t *testing.T, js jetstream.JetStream, tn, msgID string, b []byte) {
	t.Helper()
	msg := nats.NewMsg(subject.Names{}.Submit(tn))
	msg.Data = b
	if msgID != "" {
		msg.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

func TestUndecodableSubmissionsEndRejected(t *testing.T) {
	srv := natstest.RunJetStream(t)
	n := startNode(t, srv, mesh.Config{})
	c := newClient(t, srv)
	good := func(id string) map[string]any {
		return map[string]any{"v": 1, "run_id": id, "tenant": tenant, "principal": "alice", "profile": "fixture",
			"request": msgpack.RawMessage(request(t, fixtureReq{Prompt: "x"}))}
	}
	enc := func(v any) []byte { return request(t, v) }
	with := func(id, k string, v any) []byte { m := good(id); m[k] = v; return enc(m) }
	tests := []struct {
		name string
		in   func(id string) []byte
	}{
		{"unknown top-level field", func(id string) []byte { return with(id, "priority", 9) }},
		{"version 2", func(id string) []byte { return with(id, "v", 2) }},
		{"no version", func(id string) []byte { m := good(id); delete(m, "v"); return enc(m) }},
		{"JSON instead of msgpack", func(id string) []byte { b, _ := json.Marshal(good(id)); return b }},
		{"empty body", func(string) []byte { return nil }},
		{"truncated msgpack", func(id string) []byte { b := enc(good(id)); return b[:len(b)/2] }},
		{"an array, not a map", func(id string) []byte { return enc([]any{1, id, tenant}) }},
		{"run_id of the wrong type", func(id string) []byte { return with(id, "run_id", 42) }},
		{"labels of the wrong type", func(id string) []byte { return with(id, "labels", []string{"a"}) }},
		{"deadline_ms as a string", func(id string) []byte { return with(id, "deadline_ms", "soon") }},
		{"garbage bytes", func(string) []byte { return []byte{0xc1, 0xc1, 0xff} }},
		{"trailing bytes after the map", func(id string) []byte { return append(enc(good(id)), 0x01) }},
		{"run_id differs from Nats-Msg-Id", func(id string) []byte { return enc(good(id + "-other")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := client.NewRunID()
			rawSubmit(t, n.d.JS, tenant, subject.RunMsgID(tenant, id), tt.in(id))
			evs := collect(t, c, id)
			if got := describe(evs); got != "[accepted rejected]" {
				t.Fatalf("events = %s, want [accepted rejected]", got)
			}
			st := last(evs)
			if !errors.Is(st.Error, wire.AgenticRequestValidationError) {
				t.Fatalf("error = %v, want AgenticRequestValidationError", st.Error)
			}
			if _, err := c.Wait(context.Background(), tenant, id); err != nil {
				t.Fatalf("client wait: %v", err)
			}
			// The record follows the terminal event (pkg/runs' ending protocol).
			waitFor(t, c, id, wire.StateRejected)
		})
	}
	t.Run("a bare run id as Nats-Msg-Id", func(t *testing.T) {
		id := client.NewRunID()
		rawSubmit(t, n.d.JS, tenant, id, enc(good(id)))
		st := last(collect(t, c, id))
		if st.State != wire.StateRejected || !errors.Is(st.Error, wire.AgenticRequestValidationError) {
			t.Fatalf("terminal = %+v", st)
		}
	})
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
	fx, err := fixture.New(fixture.Config{ScriptsDir: "../../testdata/fixture"})
	if err != nil {
		t.Fatal(err)
	}
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
	t.Helper()
	natstest.Eventually(t, 20*time.Second, func() error {
		rec, err := c.Status(context.Background(), tn, runID)
		if err != nil {
			return err
		}
		if rec.State != state {
			return fmt.Errorf("run %s is %s, want %s", runID, rec.State, state)
		}
		return nil
	})
}

// panicky is a test-only adapter that panics in its stream when the
// prompt says so, and otherwise answers after a pause.
type panicky struct{ started atomic.Int32 }

func (*panicky) Name() string { return "fixture" }
func (*panicky) Capabilities() wire.Capabilities {
	return wire.Capabilities{Transport: wire.TransportInProcess}
}
func (*panicky) RuntimeKeys() []string { return nil }
func (*panicky) Validate(b []byte) (any, error) {
	var r fixtureReq
	if err := wire.DecodeStrict(b, &r); err != nil {
		return nil, wire.Errorf(wire.AgenticRequestValidationError, "%v", err)
	}
	return r, nil
}
func (p *panicky) Stream(ctx context.Context, call adapter.Call) iter.Seq2[wire.Chunk, error] {
	return func(yield func(wire.Chunk, error) bool) {
		p.started.Add(1)
		r := call.Request.(fixtureReq)
		if !yield(wire.Chunk{Type: wire.ChunkText, Content: "partial"}, nil) {
			return
		}
		if r.Script == "panic" {
			var m map[string]int
			//lint:ignore SA5000 the nil map write is the point: a real runtime panic
			m["boom"]++ // a nil map write: a real runtime panic
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(r.DelayMS) * time.Millisecond):
		}
		yield(wire.Chunk{Type: wire.ChunkResult}, nil)
	}
}

func TestAdapterPanicFailsOnlyItsRun(t *testing.T) {
	srv := natstest.RunJetStream(t)
	cfg := mesh.Config{}
	cfg.Runner.MaxActive = map[string]int{"fixture": 4}
	a := &panicky{}
	startNodeWith(t, srv, cfg, profile.Builtin(), a)
	c := newClient(t, srv)
	ctx := context.Background()
	var ok []string
	for range 3 {
		id, err := c.Submit(ctx, runReq(t, fixtureReq{Prompt: "fine", DelayMS: 300}))
		if err != nil {
			t.Fatal(err)
		}
		ok = append(ok, id)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if n := a.started.Load(); n < 3 {
			return fmt.Errorf("%d runs started", n)
		}
		return nil
	})
	bad, err := c.Submit(ctx, runReq(t, fixtureReq{Prompt: "boom", Script: "panic"}))
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, bad)
	st := last(evs)
	if st.State != wire.StateFailed || !errors.Is(st.Error, wire.ProviderProtocolError) {
		t.Fatalf("panicking run: %+v (%s)", st, describe(evs))
	}
	for _, id := range ok {
		if st := last(collect(t, c, id)); st.State != wire.StateSucceeded {
			t.Fatalf("run %s beside the panic: %s %v", id, st.State, st.Error)
		}
	}
	// The runner goes on taking work.
	id, err := c.Submit(ctx, runReq(t, fixtureReq{Prompt: "after"}))
	if err != nil {
		t.Fatal(err)
	}
	if st := last(collect(t, c, id)); st.State != wire.StateSucceeded {
		t.Fatalf("run after the panic: %s", st.State)
	}
}

// A mesh whose context ends right after it started stops without an error
// from any service (the sweeper used to report its lease watch's
// "context canceled").
func TestMeshStopsQuietlyRightAfterStart(t *testing.T) {
	srv := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, srv)
	fx, err := fixture.New(fixture.Config{ScriptsDir: "../../testdata/fixture"})
	if err != nil {
		t.Fatal(err)
	}
	adapters, err := adapter.NewRegistry(fx)
	if err != nil {
		t.Fatal(err)
	}
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
