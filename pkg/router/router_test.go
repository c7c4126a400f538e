package router_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const tenant = "acme"

// start runs a router, and nothing else, on srv with the topology topo,
// the profiles given (the built-in ones when nil) and the fixture adapter,
// until the test ends. It returns the router's deps.
func start(t *testing.T, srv *server.Server, topo topology.Config, profiles *profile.Registry) service.Deps {
	t.Helper()
	d := servicetest.Deps(t, srv, topo)
	startOn(t, d, topo, profiles)
	return d
}

// startOn is start on the deps d, built for the topology topo.
func startOn(t *testing.T, d service.Deps, topo topology.Config, profiles *profile.Registry) {
	t.Helper()
	fx, err := fixture.New(fixture.Config{ScriptsDir: "../../testdata/fixture"})
	if err != nil {
		t.Fatal(err)
	}
	adapters, err := adapter.NewRegistry(fx)
	if err != nil {
		t.Fatal(err)
	}
	if profiles == nil {
		profiles = profile.Builtin()
	}
	r, err := router.New(context.Background(), d, profiles, adapters, router.Config{AdapterQueueMax: topo.WorkQueueMax})
	if err != nil {
		t.Fatal(err)
	}
	servicetest.Start(t, func(ctx context.Context, _ *slog.Logger) error { return r.Run(ctx) })
}

type fixtureReq struct {
	Prompt string `msgpack:"prompt"`
}

func request(t *testing.T, v any) []byte { return clienttest.Msgpack(t, v) }

func runReq(t *testing.T, prompt string) wire.RunRequest {
	return clienttest.FixtureRun(t, tenant, fixtureReq{Prompt: prompt})
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

// TestConfig: Validate checks the values New would run with, the
// defaults filled in, and names every bad field.
func TestConfig(t *testing.T) {
	tests := []struct {
		name string
		in   router.Config
		want []string // the fields named; none for valid
	}{
		{name: "the defaults", in: router.Config{}},
		{name: "set", in: router.Config{Workers: 2, AckWait: time.Second, DefaultDeadline: time.Minute, MaxDeadline: time.Hour, AdapterQueueMax: 1}},
		{name: "negative workers", in: router.Config{Workers: -1}, want: []string{"Workers"}},
		{name: "short ack wait", in: router.Config{AckWait: time.Millisecond}, want: []string{"AckWait"}},
		{name: "default beyond the default max", in: router.Config{DefaultDeadline: 25 * time.Hour}, want: []string{"DefaultDeadline"}},
		{name: "max below the default default", in: router.Config{MaxDeadline: time.Minute}, want: []string{"DefaultDeadline"}},
		{name: "every problem", in: router.Config{Workers: -1, AckWait: -1, MaxDeadline: -1, AdapterQueueMax: -1},
			want: []string{"Workers", "AckWait", "AdapterQueueMax", "MaxDeadline", "DefaultDeadline"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.in.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, router.ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig", err)
			}
			var got []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var fe *service.FieldError
				if !errors.As(e, &fe) {
					t.Fatalf("Validate(): %v is not a FieldError", e)
				}
				got = append(got, fe.Field)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("Validate() names %v, want %v: %v", got, tt.want, err)
			}
		})
	}
	srv := natstest.RunJetStream(t)
	d := servicetest.Deps(t, srv, topology.Config{})
	if _, err := router.New(context.Background(), d, profile.Builtin(), nil, router.Config{Workers: -1}); !errors.Is(err, router.ErrInvalidConfig) {
		t.Fatalf("New with bad config = %v, want ErrInvalidConfig", err)
	}
}

func TestRejections(t *testing.T) {
	srv := natstest.RunJetStream(t)
	d := start(t, srv, topology.Config{}, nil)
	c := clienttest.New(t, srv)
	ctx := context.Background()
	good := func() wire.RunRequest { return runReq(t, "x") }
	tests := []struct {
		name string
		in   func() wire.RunRequest
		want wire.Class
	}{
		{"bad principal token", func() wire.RunRequest { r := good(); r.Principal = "bob smith"; return r }, wire.AgenticRequestValidationError},
		{"bad conversation token", func() wire.RunRequest { r := good(); r.Conversation = "a.b"; return r }, wire.AgenticRequestValidationError},
		{"tenant differs from subject", func() wire.RunRequest { r := good(); r.Tenant = "other"; return r }, wire.AgenticRequestValidationError},
		{"unknown profile", func() wire.RunRequest { r := good(); r.Profile = "nope"; return r }, wire.ProfileError},
		{"unknown request field", func() wire.RunRequest {
			r := good()
			r.Request = request(t, map[string]any{"prompt": "x", "temperature": 0.2})
			return r
		}, wire.AgenticRequestValidationError},
		{"unknown runtime key", func() wire.RunRequest { r := good(); r.Runtime = map[string]any{"workspace": "x"}; return r }, wire.AgenticHandlerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.in()
			r.V = wire.Version
			// Publish directly: the client would refuse some of these at the edge.
			if _, err := d.JS.Publish(ctx, d.Names.Submit(tenant), request(t, &r), jetstream.WithMsgID(subject.RunMsgID(tenant, r.RunID))); err != nil {
				t.Fatal(err)
			}
			evs := clienttest.Collect(t, c, tenant, r.RunID)
			if got := clienttest.Describe(evs); got != "[accepted rejected]" {
				t.Fatalf("events = %s, want [accepted rejected]", got)
			}
			st := clienttest.Last(evs)
			if st.Error == nil || !errors.Is(st.Error, tt.want) {
				t.Fatalf("error = %v, want class %s", st.Error, tt.want)
			}
		})
	}

	t.Run("a payload naming no run is dropped and counted", func(t *testing.T) {
		dropped := func() float64 { return testutil.ToFloat64(d.Metrics.Dropped.WithLabelValues("router", "run_id")) }
		before := dropped()
		for _, garbage := range [][]byte{[]byte("not msgpack"), {0xc1}, {0x81, 0xa1}} {
			if _, err := d.JS.Publish(ctx, d.Names.Submit(tenant), garbage); err != nil {
				t.Fatal(err)
			}
		}
		natstest.Eventually(t, 10*time.Second, func() error {
			if got := dropped() - before; got != 3 {
				return fmt.Errorf("dropped %v, want 3", got)
			}
			return nil
		})
		id, err := c.Submit(ctx, good())
		if err != nil {
			t.Fatal(err)
		}
		clienttest.WaitFor(t, c, tenant, id, wire.StateRouted) // no runner takes it
	})
}

func TestUndecodableSubmissionsEndRejected(t *testing.T) {
	srv := natstest.RunJetStream(t)
	d := start(t, srv, topology.Config{}, nil)
	c := clienttest.New(t, srv)
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
		{"version 4", func(id string) []byte { return with(id, "v", 4) }},
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
			rawSubmit(t, d.JS, tenant, subject.RunMsgID(tenant, id), tt.in(id))
			evs := clienttest.Collect(t, c, tenant, id)
			if got := clienttest.Describe(evs); got != "[accepted rejected]" {
				t.Fatalf("events = %s, want [accepted rejected]", got)
			}
			st := clienttest.Last(evs)
			if !errors.Is(st.Error, wire.AgenticRequestValidationError) {
				t.Fatalf("error = %v, want AgenticRequestValidationError", st.Error)
			}
			if _, err := c.Wait(context.Background(), tenant, id); err != nil {
				t.Fatalf("client wait: %v", err)
			}
			// The record follows the terminal event (pkg/runs' ending protocol).
			clienttest.WaitFor(t, c, tenant, id, wire.StateRejected)
		})
	}
	// Contract v1 has the bare run id as Nats-Msg-Id: a v1 request may
	// still use it; a request of a later version may not.
	t.Run("a bare run id as Nats-Msg-Id", func(t *testing.T) {
		id := client.NewRunID()
		rawSubmit(t, d.JS, tenant, id, with(id, "v", 2))
		st := clienttest.Last(clienttest.Collect(t, c, tenant, id))
		if st.State != wire.StateRejected || !errors.Is(st.Error, wire.AgenticRequestValidationError) {
			t.Fatalf("terminal = %+v", st)
		}
	})
	t.Run("a bare run id of a v1 request", func(t *testing.T) {
		id := client.NewRunID()
		rawSubmit(t, d.JS, tenant, id, enc(good(id)))
		clienttest.WaitFor(t, c, tenant, id, wire.StateRouted) // no runner takes it
	})
}

func TestFullQueueRejectsAtOnce(t *testing.T) {
	srv := natstest.RunJetStream(t)
	start(t, srv, topology.Config{WorkQueueMax: 1}, nil)
	c := clienttest.New(t, srv)
	ctx := context.Background()
	queued, err := c.Submit(ctx, runReq(t, "waits"))
	if err != nil {
		t.Fatal(err)
	}
	clienttest.WaitFor(t, c, tenant, queued, wire.StateRouted)
	full, err := c.Submit(ctx, runReq(t, "no room"))
	if err != nil {
		t.Fatal(err)
	}
	evs := clienttest.Collect(t, c, tenant, full)
	// The adapter's bound is checked against a count at most 250 ms old,
	// before anything is written: rejected straight from accepted. When
	// that count is older than the queued run, the work stream's exact
	// bound refuses the dispatch, and the run was recorded routed on the
	// way (docs/contract-notes.md).
	if got := clienttest.Describe(evs); got != "[accepted rejected]" && got != "[accepted routed rejected]" {
		t.Fatalf("events = %s", got)
	}
	if st := clienttest.Last(evs); !errors.Is(st.Error, wire.AdmissionRejected) {
		t.Fatalf("error = %v, want AdmissionRejected", st.Error)
	}
}

func TestProfileMaxWaitingRejectsAtOnce(t *testing.T) {
	srv := natstest.RunJetStream(t)
	profiles, err := profile.New(profile.Profile{Name: "fixture", Adapter: "fixture", Transport: wire.TransportInProcess,
		Model: "fixture-1", Policy: profile.Policy{MaxWaiting: 2}})
	if err != nil {
		t.Fatal(err)
	}
	d := start(t, srv, topology.Config{}, profiles)
	c := clienttest.New(t, srv)
	ctx := context.Background()
	for range 2 {
		id, err := c.Submit(ctx, runReq(t, "waits"))
		if err != nil {
			t.Fatal(err)
		}
		clienttest.WaitFor(t, c, tenant, id, wire.StateRouted)
	}
	// A run's record says routed before its work is dispatched.
	natstest.Eventually(t, 10*time.Second, func() error {
		s, err := d.JS.Stream(ctx, d.Names.WorkStream())
		if err != nil {
			return err
		}
		if got := s.CachedInfo().State.Msgs; got != 2 {
			return fmt.Errorf("work stream holds %d items, want 2", got)
		}
		return nil
	})
	id, err := c.Submit(ctx, runReq(t, "no room"))
	if err != nil {
		t.Fatal(err)
	}
	evs := clienttest.Collect(t, c, tenant, id)
	if st := clienttest.Last(evs); clienttest.Describe(evs) != "[accepted rejected]" || !errors.Is(st.Error, wire.AdmissionRejected) {
		t.Fatalf("events = %s, error %v; want rejected with AdmissionRejected", clienttest.Describe(evs), st.Error)
	}
}

// TestCancelQueued: the router's cancel responder ends a run no runner
// took, and says so.
func TestCancelQueued(t *testing.T) {
	srv := natstest.RunJetStream(t)
	start(t, srv, topology.Config{}, nil)
	c := clienttest.New(t, srv)
	ctx := context.Background()
	id, err := c.Submit(ctx, runReq(t, "queued"))
	if err != nil {
		t.Fatal(err)
	}
	clienttest.WaitFor(t, c, tenant, id, wire.StateRouted)
	reply, err := c.Cancel(ctx, tenant, id)
	if err != nil || !reply.Cancelled || reply.State != wire.StateCancelled {
		t.Fatalf("cancel = %+v, %v", reply, err)
	}
	if got := clienttest.Describe(clienttest.Collect(t, c, tenant, id)); got != "[accepted routed cancelled]" {
		t.Fatalf("events = %s", got)
	}
	again, err := c.Cancel(ctx, tenant, id)
	if err != nil || !again.Ended || again.State != wire.StateCancelled {
		t.Fatalf("cancel of an ended run = %+v, %v; want ended", again, err)
	}
}

// A workspace source names a CLI run's workspace: a run of an adapter of
// another transport, which has none, is refused with a typed error, never
// dispatched with the source dropped (TestWorkspaceSourceRoutes is the
// CLI run's).
func TestWorkspaceSourceRefusedOffSubprocess(t *testing.T) {
	srv := natstest.RunJetStream(t)
	start(t, srv, topology.Config{}, nil)
	c := clienttest.New(t, srv)
	req := runReq(t, "with a source")
	req.Workspace = &wire.WorkspaceSource{Git: &wire.GitSource{URL: "file:///srv/repo.git"}}
	id, err := c.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	st := clienttest.Last(clienttest.Collect(t, c, tenant, id))
	if st.State != wire.StateRejected || !errors.Is(st.Error, wire.AgenticOperationUnsupported) || !strings.Contains(st.Error.Error(), "not a subprocess adapter") {
		t.Fatalf("terminal = %+v, want rejected with AgenticOperationUnsupported", st)
	}
}
