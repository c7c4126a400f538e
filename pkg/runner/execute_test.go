package runner_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
)

const tenant = "acme"

// start runs a router (with the built-in profiles) and a runner host with
// config rc, each on its own connection, on srv until the test ends; both
// know the adapters served.
func start(t *testing.T, srv *server.Server, rc runner.Config, served ...adapter.Adapter) {
	t.Helper()
	adapters, err := adapter.NewRegistry(served...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := router.New(ctx, servicetest.Deps(t, srv, topology.Config{}), profile.Builtin(), adapters, router.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := runner.New(ctx, servicetest.Deps(t, srv, topology.Config{}), adapters, rc)
	if err != nil {
		t.Fatal(err)
	}
	servicetest.Start(t, func(ctx context.Context, _ *slog.Logger) error { return r.Run(ctx) })
	servicetest.Start(t, func(ctx context.Context, _ *slog.Logger) error { return h.Run(ctx) })
}

// fixtureAdapter is the fixture adapter with the repository's scripts.
func fixtureAdapter(t *testing.T) adapter.Adapter {
	t.Helper()
	fx, err := fixture.New(fixture.Config{ScriptsDir: "../../testdata/fixture"})
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

type fixtureReq struct {
	Prompt  string `msgpack:"prompt"`
	Script  string `msgpack:"script,omitempty"`
	DelayMS int    `msgpack:"delay_ms,omitempty"`
}

func runReq(t *testing.T, req fixtureReq) wire.RunRequest {
	return clienttest.FixtureRun(t, tenant, req)
}

func TestDeadlineEndsTimedOut(t *testing.T) {
	srv := natstest.RunJetStream(t)
	start(t, srv, runner.Config{}, fixtureAdapter(t))
	c := clienttest.New(t, srv)
	r := runReq(t, fixtureReq{Prompt: "slow", Script: "slow", DelayMS: 100})
	r.DeadlineMS = 500
	_, evs := clienttest.Run(t, c, r)
	st := clienttest.Last(evs)
	if st.State != wire.StateTimedOut || !errors.Is(st.Error, wire.DeadlineExceeded) {
		t.Fatalf("terminal = %+v (%s), want timed_out with DeadlineExceeded", st, clienttest.Describe(evs))
	}
	clienttest.CheckGapless(t, evs)
}

func TestRetryBeforeFirstOutputOnly(t *testing.T) {
	srv := natstest.RunJetStream(t)
	start(t, srv, runner.Config{RetryBackoff: 10 * time.Millisecond}, fixtureAdapter(t))
	c := clienttest.New(t, srv)

	_, evs := clienttest.Run(t, c, runReq(t, fixtureReq{Prompt: "x", Script: "retry-then-ok"}))
	if st := clienttest.Last(evs); st.State != wire.StateSucceeded || st.Attempt != 2 {
		t.Fatalf("retry: terminal %+v, events %s; want succeeded on attempt 2", st, clienttest.Describe(evs))
	}
	if evs[2].Status.Attempt != 1 || evs[3].Status.State != wire.StateRunning || evs[3].Status.Attempt != 2 {
		t.Fatalf("retry: events %s, want running attempt 1 then 2", clienttest.Describe(evs))
	}
	clienttest.CheckGapless(t, evs)

	_, evs = clienttest.Run(t, c, runReq(t, fixtureReq{Prompt: "x", Script: "fail-after-output"}))
	if got := clienttest.Describe(evs); got != "[accepted routed running text failed]" {
		t.Fatalf("failure after output: events %s, want one text and no replay", got)
	}
	if st := clienttest.Last(evs); st.Attempt != 1 || !errors.Is(st.Error, wire.ProviderTransportError) {
		t.Fatalf("failure after output: terminal %+v", st)
	}
}

func TestProviderErrorChunkFailsRun(t *testing.T) {
	srv := natstest.RunJetStream(t)
	start(t, srv, runner.Config{}, fixtureAdapter(t))
	c := clienttest.New(t, srv)
	_, evs := clienttest.Run(t, c, runReq(t, fixtureReq{Prompt: "x", Script: "provider-error"}))
	if got := clienttest.Describe(evs); got != "[accepted routed running text error failed]" {
		t.Fatalf("events = %s", got)
	}
	// The error chunk was typed ProviderQuotaError by the provider.
	if st := clienttest.Last(evs); !errors.Is(st.Error, wire.ProviderQuotaError) {
		t.Fatalf("terminal error = %v, want ProviderQuotaError", st.Error)
	}
}

func TestAdapterPanicFailsOnlyItsRun(t *testing.T) {
	srv := natstest.RunJetStream(t)
	a := &panicky{}
	start(t, srv, runner.Config{MaxActive: map[string]int{"fixture": 4}}, a)
	c := clienttest.New(t, srv)
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
	evs := clienttest.Collect(t, c, tenant, bad)
	st := clienttest.Last(evs)
	if st.State != wire.StateFailed || !errors.Is(st.Error, wire.ProviderProtocolError) {
		t.Fatalf("panicking run: %+v (%s)", st, clienttest.Describe(evs))
	}
	for _, id := range ok {
		if st := clienttest.Last(clienttest.Collect(t, c, tenant, id)); st.State != wire.StateSucceeded {
			t.Fatalf("run %s beside the panic: %s %v", id, st.State, st.Error)
		}
	}
	// The runner goes on taking work.
	_, evs = clienttest.Run(t, c, runReq(t, fixtureReq{Prompt: "after"}))
	if st := clienttest.Last(evs); st.State != wire.StateSucceeded {
		t.Fatalf("run after the panic: %s", st.State)
	}
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
