package runner_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/fstest"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Recorded failures of a model API, as the fixture replays them: the
// attempt's error before any output, classed as every adapter classes
// that HTTP status.
const (
	scriptOK         = `{"chunks": [{"type": "text", "content": "answered"}, {"type": "result", "metadata": {"usage": {"input_tokens": 2, "output_tokens": 3}, "stop_reason": "end_turn"}}]}`
	script429        = `{"error": {"class": "ProviderQuotaError", "message": "HTTP 429: rate_limit_error: too many requests"}}`
	script401        = `{"error": {"class": "ProviderAuthError", "message": "HTTP 401: invalid x-api-key"}}`
	script400        = `{"error": {"class": "ProviderError", "message": "HTTP 400: invalid_request_error: max_tokens: field required"}}`
	scriptUnavail    = `{"error": {"class": "ProviderUnavailable", "message": "no capacity for this model"}}`
	scriptReset      = `{"error": {"class": "ProviderTransportError", "message": "connection reset before first output", "retryable": true}}`
	scriptAfterFirst = `{"chunks": [{"type": "text", "content": "partial"}], "error": {"class": "ProviderTransportError", "message": "connection reset after output", "retryable": true}}`
)

// fallbackProfiles: a falls back to b, then c; each its own adapter (and
// model); a allows two attempts, the others one.
func fallbackProfiles(t *testing.T) *profile.Registry {
	t.Helper()
	free := map[string]string{"input": "0", "output": "0"}
	reg, err := profile.New(
		profile.Profile{Name: "a", Adapter: "fx-a", Transport: wire.TransportInProcess, Model: "model-a", Pricing: free,
			Policy: profile.Policy{MaxAttempts: 2, Fallback: []string{"b", "c"}}},
		profile.Profile{Name: "b", Adapter: "fx-b", Transport: wire.TransportInProcess, Model: "model-b", Pricing: free,
			Policy: profile.Policy{MaxAttempts: 1}},
		profile.Profile{Name: "c", Adapter: "fx-c", Transport: wire.TransportInProcess, Model: "model-c", Pricing: free,
			Policy: profile.Policy{MaxAttempts: 1}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// scripted is a fixture adapter named name whose scripts are the given
// JSON by script name.
func scripted(t *testing.T, name string, scripts map[string]string) adapter.Adapter {
	t.Helper()
	fs := fstest.MapFS{}
	for s, body := range scripts {
		fs[s+".json"] = &fstest.MapFile{Data: []byte(body)}
	}
	a, err := fixture.New(fixture.Config{Name: name, Scripts: fs})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fallbackMesh is a router knowing profiles a, b and c, and two runner
// pools: one serving a's adapter, one b's and c's (so a move goes to
// another pool). startA false leaves a's pool to start later.
type fallbackMesh struct {
	t        *testing.T
	srv      *server.Server
	profiles *profile.Registry
	fxA      adapter.Adapter
	c        *client.Client
	pools    []service.Deps // each runner pool's
}

// fallbacks is agentmesh_fallbacks_total{from, to} summed over the pools.
func (m *fallbackMesh) fallbacks(from, to string) float64 {
	var n float64
	for _, d := range m.pools {
		n += testutil.ToFloat64(d.Metrics.Fallbacks.WithLabelValues(from, to))
	}
	return n
}

func newFallbackMesh(t *testing.T, scripts map[string]map[string]string, startA bool) *fallbackMesh {
	t.Helper()
	srv := natstest.RunJetStream(t)
	m := &fallbackMesh{t: t, srv: srv, profiles: fallbackProfiles(t)}
	m.fxA = scripted(t, "fx-a", scripts["fx-a"])
	fxB, fxC := scripted(t, "fx-b", scripts["fx-b"]), scripted(t, "fx-c", scripts["fx-c"])
	all, err := adapter.NewRegistry(m.fxA, fxB, fxC)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := router.New(ctx, servicetest.Deps(t, srv, topology.Config{}), m.profiles, all, router.Config{})
	if err != nil {
		t.Fatal(err)
	}
	servicetest.Start(t, func(ctx context.Context, _ *slog.Logger) error { return r.Run(ctx) })
	m.startPool(fxB, fxC)
	if startA {
		m.startPool(m.fxA)
	}
	m.c = clienttest.New(t, srv)
	return m
}

func (m *fallbackMesh) startPool(served ...adapter.Adapter) {
	m.t.Helper()
	reg, err := adapter.NewRegistry(served...)
	if err != nil {
		m.t.Fatal(err)
	}
	d := servicetest.Deps(m.t, m.srv, topology.Config{})
	m.pools = append(m.pools, d)
	h, err := runner.New(context.Background(), d, reg, runner.Config{RetryBackoff: 10 * time.Millisecond})
	if err != nil {
		m.t.Fatal(err)
	}
	servicetest.Start(m.t, func(ctx context.Context, _ *slog.Logger) error { return h.Run(ctx) })
}

func (m *fallbackMesh) request(script, conversation string) wire.RunRequest {
	r := wire.RunRequest{RunID: client.NewRunID(), Tenant: tenant, Principal: "alice", Profile: "a", Conversation: conversation,
		Request: clienttest.Msgpack(m.t, fixtureReq{Prompt: "hi", Script: script})}
	return r
}

// routes are the profiles the run's routed statuses name, in order.
func routes(evs []wire.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Status != nil && ev.Status.State == wire.StateRouted {
			out = append(out, ev.Status.Profile)
		}
	}
	return out
}

// checkRan fails unless the run ended in state on profile p (adapter
// fx-p, model model-p), its terminal status and its record say so, its
// routed statuses name route, and its seq is gapless.
func (m *fallbackMesh) checkRan(id string, evs []wire.Event, state wire.State, p string, route ...string) wire.Status {
	m.t.Helper()
	clienttest.CheckGapless(m.t, evs)
	st := clienttest.Last(evs)
	if st.State != state || st.Profile != p || st.Pin == nil || st.Pin.Model != "model-"+p || st.Pin.Provider != "fx-"+p {
		m.t.Fatalf("terminal = %+v (pin %+v), want %s on profile %s (%s)", st, st.Pin, state, p, clienttest.Describe(evs))
	}
	if got := routes(evs); !equal(got, route) {
		m.t.Fatalf("routed statuses name %q, want %q (%s)", got, route, clienttest.Describe(evs))
	}
	var rec wire.RunRecord
	natstest.Eventually(m.t, 10*time.Second, func() error {
		var err error
		if rec, err = m.c.Status(context.Background(), tenant, id); err == nil && !rec.State.Terminal() {
			err = errors.New("record not ended yet")
		}
		return err
	})
	if rec.State != state || rec.Profile != p || rec.Adapter != "fx-"+p || rec.Pin == nil || rec.Pin.Model != "model-"+p {
		m.t.Fatalf("record = %s profile %s adapter %s pin %+v, want %s on profile %s", rec.State, rec.Profile, rec.Adapter, rec.Pin, state, p)
	}
	return st
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFallbackOnQuotaBeforeOutput: a 429 before the first chunk moves the
// run to a's first fallback, run by another pool; the run's terminal
// status and record name b and its pin, a routed status shows the move,
// and b's attempts count from one.
func TestFallbackOnQuotaBeforeOutput(t *testing.T) {
	m := newFallbackMesh(t, map[string]map[string]string{
		"fx-a": {"s": script429}, "fx-b": {"s": scriptOK}, "fx-c": {"s": scriptOK},
	}, true)
	id, evs := clienttest.Run(t, m.c, m.request("s", ""))
	st := m.checkRan(id, evs, wire.StateSucceeded, "b", "a", "b")
	if st.Attempt != 1 {
		t.Fatalf("terminal attempt = %d, want 1 (b's first)", st.Attempt)
	}
	for _, ev := range evs {
		if s := ev.Status; s != nil && s.State == wire.StateRouted && s.Profile == "b" && !errors.Is(s.Error, wire.ProviderQuotaError) {
			t.Fatalf("the move's routed status carries %v, want a's ProviderQuotaError", s.Error)
		}
	}
}

// TestFallbackChainOfTwo: a retryable reset that used up a's two attempts
// moves the run to b, whose provider is unavailable, then to c, which
// runs it.
func TestFallbackChainOfTwo(t *testing.T) {
	m := newFallbackMesh(t, map[string]map[string]string{
		"fx-a": {"s": scriptReset}, "fx-b": {"s": scriptUnavail}, "fx-c": {"s": scriptOK},
	}, true)
	id, evs := clienttest.Run(t, m.c, m.request("s", ""))
	m.checkRan(id, evs, wire.StateSucceeded, "c", "a", "b", "c")
	running := 0
	for _, ev := range evs {
		if ev.Status != nil && ev.Status.State == wire.StateRunning {
			running++
		}
	}
	if running != 4 { // a twice, b once, c once
		t.Fatalf("%d running statuses, want 4 (%s)", running, clienttest.Describe(evs))
	}
	if ab, bc, ac := m.fallbacks("a", "b"), m.fallbacks("b", "c"), m.fallbacks("a", "c"); ab != 1 || bc != 1 || ac != 0 {
		t.Errorf("agentmesh_fallbacks_total a→b %v, b→c %v, a→c %v; want 1, 1, 0", ab, bc, ac)
	}
}

// TestFallbackEveryProfileFails: when every profile fails, the run ends
// with the last one's error, on the last profile.
func TestFallbackEveryProfileFails(t *testing.T) {
	m := newFallbackMesh(t, map[string]map[string]string{
		"fx-a": {"s": script429}, "fx-b": {"s": script429}, "fx-c": {"s": script401},
	}, true)
	id, evs := clienttest.Run(t, m.c, m.request("s", ""))
	st := m.checkRan(id, evs, wire.StateFailed, "c", "a", "b", "c")
	if !errors.Is(st.Error, wire.ProviderAuthError) {
		t.Fatalf("terminal error = %v, want c's ProviderAuthError", st.Error)
	}
}

// TestNoFallback: a failure after the first chunk, a request the provider
// refused (a 400), and a conversation that has a checkpoint each end the
// run on its own profile.
func TestNoFallback(t *testing.T) {
	m := newFallbackMesh(t, map[string]map[string]string{
		"fx-a": {"after": scriptAfterFirst, "bad": script400, "ok": scriptOK, "quota": script429},
		"fx-b": {"after": scriptOK, "bad": scriptOK, "ok": scriptOK, "quota": scriptOK},
		"fx-c": {"after": scriptOK, "bad": scriptOK, "ok": scriptOK, "quota": scriptOK},
	}, true)
	t.Run("after first output", func(t *testing.T) {
		id, evs := clienttest.Run(t, m.c, m.request("after", ""))
		st := m.checkRan(id, evs, wire.StateFailed, "a", "a")
		if !errors.Is(st.Error, wire.ProviderTransportError) {
			t.Fatalf("terminal error = %v, want ProviderTransportError", st.Error)
		}
	})
	t.Run("400", func(t *testing.T) {
		id, evs := clienttest.Run(t, m.c, m.request("bad", ""))
		st := m.checkRan(id, evs, wire.StateFailed, "a", "a")
		if st.Error == nil || st.Error.Class != wire.ProviderError {
			t.Fatalf("terminal error = %v, want the 400's ProviderError", st.Error)
		}
	})
	t.Run("conversation with a checkpoint", func(t *testing.T) {
		id, evs := clienttest.Run(t, m.c, m.request("ok", "conv1")) // pins conv1 to a
		m.checkRan(id, evs, wire.StateSucceeded, "a", "a")
		id, evs = clienttest.Run(t, m.c, m.request("quota", "conv1"))
		st := m.checkRan(id, evs, wire.StateFailed, "a", "a")
		if !errors.Is(st.Error, wire.ProviderQuotaError) {
			t.Fatalf("terminal error = %v, want a's ProviderQuotaError", st.Error)
		}
	})
	t.Run("fresh conversation moves", func(t *testing.T) {
		id, evs := clienttest.Run(t, m.c, m.request("quota", "conv2"))
		m.checkRan(id, evs, wire.StateSucceeded, "b", "a", "b")
	})
}

// TestFallbackMoveFinishedByRedelivery: a runner killed mid-move leaves
// the run's work for the next delivery, which finishes the move without
// running a again; the run runs once, on b. Killed after the move's
// routed status (the commit), and after the record's move too.
func TestFallbackMoveFinishedByRedelivery(t *testing.T) {
	for _, recordMoved := range []bool{false, true} {
		name := map[bool]string{false: "after the routed status", true: "after the record moved"}[recordMoved]
		t.Run(name, func(t *testing.T) {
			// What a's runner had done when it died: its attempt failed
			// (no event of it is needed: the move fences on the last one).
			m, ctx, id, store, bp, pin := committedMove(t)
			if recordMoved {
				fb := wire.Fallback{Profile: bp.Name, Adapter: bp.Adapter, Transport: bp.Transport, Pin: pin, Policy: wire.AttemptPolicy{MaxAttempts: 1}}
				if _, moved, err := store.Move(ctx, tenant, id, fb); err != nil || !moved {
					t.Fatalf("move = %v, %v", moved, err)
				}
			}
			m.startPool(m.fxA) // the work's next delivery
			evs := clienttest.Collect(t, m.c, tenant, id)
			m.checkRan(id, evs, wire.StateSucceeded, "b", "a", "b")
			if got := clienttest.Describe(evs); got != "[accepted routed routed running text result succeeded]" {
				t.Fatalf("events = %s, want one run on b after the move", got)
			}
		})
	}
}

// TestCancelDuringMove: a run whose move committed (its routed status to
// b) and went no further is queued again: a cancel ends it, and the old
// work's next delivery then acks it without moving or running it.
func TestCancelDuringMove(t *testing.T) {
	m, ctx, id, store, _, _ := committedMove(t)
	reply, err := m.c.Cancel(ctx, tenant, id)
	if err != nil || !reply.Cancelled {
		t.Fatalf("cancel = %+v, %v", reply, err)
	}
	m.startPool(m.fxA)
	evs := clienttest.Collect(t, m.c, tenant, id)
	if got := clienttest.Describe(evs); got != "[accepted routed routed cancelled]" {
		t.Fatalf("events = %s, want the cancel to end the moving run", got)
	}
	// The old work is acked: nothing of the run is left queued.
	natstest.Eventually(t, 10*time.Second, func() error {
		keys, err := store.Dispatched(ctx)
		if err == nil && len(keys) > 0 {
			err = fmt.Errorf("work still queued for %v", keys)
		}
		return err
	})
}

// committedMove starts a mesh whose a fails with a 429 and whose a pool
// is down, submits a run of a and, once it is routed and recorded,
// publishes the routed status of its move to b: the state a's runner
// leaves when it dies right after the move's commit. It returns the mesh,
// a context ending with the test, the run id, a store of the mesh, and b
// with its pin.
func committedMove(t *testing.T) (*fallbackMesh, context.Context, string, *runs.Store, *profile.Profile, wire.Pin) {
	t.Helper()
	m := newFallbackMesh(t, map[string]map[string]string{
		"fx-a": {"s": script429}, "fx-b": {"s": scriptOK}, "fx-c": {"s": scriptOK},
	}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	id, err := m.c.Submit(ctx, m.request("s", ""))
	if err != nil {
		t.Fatal(err)
	}
	clienttest.WaitForRouted(ctx, t, m.c, tenant, id)
	natstest.Eventually(t, 10*time.Second, func() error {
		_, err := m.c.Status(ctx, tenant, id)
		return err
	})
	store, err := runs.Open(ctx, servicetest.Deps(t, m.srv, topology.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	bp, pin, err := m.profiles.Resolve("b")
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := store.Events().OpenTail(ctx, tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.StatusFenced(ctx, wire.Status{State: wire.StateRouted, Profile: "b", Pin: &pin,
		Error: wire.Errorf(wire.ProviderQuotaError, "HTTP 429")}); err != nil {
		t.Fatal(err)
	}
	return m, ctx, id, store, bp, pin
}
