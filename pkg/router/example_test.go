package router_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// A router on its own: a valid submission is dispatched as work on the
// tenant's work subject of its adapter, carrying the pin and the handoff
// a runner claims it from; one naming no profile the mesh has ends
// rejected with a typed error. No runner runs here, so the work waits.
func Example() {
	nc, js, stop := natstest.Start()
	defer stop()
	fx, _ := fixture.New(fixture.Config{ScriptsDir: "../../testdata/fixture"})
	adapters, _ := adapter.NewRegistry(fx)
	d := service.Deps{NC: nc, JS: js, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := topology.Ensure(ctx, js, topology.Config{Names: d.Names})
	var r *router.Router
	if err == nil {
		r, err = router.New(ctx, d, profile.Builtin(), adapters, router.Config{})
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// A client submits two runs.
	c, _ := client.New(nc, d.Names)
	req, _ := wire.Marshal(map[string]any{"prompt": "hello"})
	ok, _ := c.Submit(ctx, wire.RunRequest{RunID: "run-1", Tenant: "acme", Principal: "alice", Profile: "fixture", Request: req})
	bad, _ := c.Submit(ctx, wire.RunRequest{RunID: "run-2", Tenant: "acme", Principal: "alice", Profile: "no-such-profile", Request: req})

	// The work of the first, as a runner of the fixture pool would pull it.
	work := d.Names.Work(string(wire.TransportInProcess), fx.Name(), "acme")
	cons, _ := js.CreateConsumer(ctx, d.Names.WorkStream(), jetstream.ConsumerConfig{FilterSubject: work, AckPolicy: jetstream.AckExplicitPolicy})
	msg, err := cons.Next()
	if err != nil {
		fmt.Println(err)
		return
	}
	w, _ := wire.Decode[wire.Work](msg.Data())
	fmt.Println(msg.Subject(), msg.Headers().Get(jetstream.MsgIDHeader))
	fmt.Println(w.RunID == ok, w.Adapter, w.Profile, w.Pin.Provider, w.Pin.Model, "max attempts", w.Policy.MaxAttempts)
	fmt.Println("handoff: record", w.Handoff.Record.State, "last event seq", w.Handoff.Seq)

	st, err := c.Wait(ctx, "acme", bad)
	fmt.Println(bad, st.State, st.Error.Class, err)
	// Output:
	// agentmesh.work.in_process.fixture.acme acme.run-1
	// true fixture fixture fixture fixture-1 max attempts 3
	// handoff: record routed last event seq 2
	// run-2 rejected ProfileError <nil>
}
