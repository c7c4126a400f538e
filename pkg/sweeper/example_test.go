package sweeper_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// A runner that dies after its run's first output: nobody will end that
// run, and it must not be executed again. Once the runner's lease expires
// the sweeper ends it failed with ProviderTransportError. Here the
// example plays the router (record, accepted and routed, the work item)
// and the runner (its lease, its claim and first chunk, then silence).
func Example() {
	nc, js, stop := natstest.Start()
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A lease lives 1 s without a heartbeat (30 s by default).
	if err := topology.Ensure(ctx, js, topology.Config{LeaseTTL: time.Second}); err != nil {
		fmt.Println(err)
		return
	}
	d := service.Deps{NC: nc, JS: js, Log: slog.New(slog.DiscardHandler), Health: &service.Health{},
		Metrics: service.NewMetrics(prometheus.NewRegistry())}
	store, _ := runs.Open(ctx, d)

	// The router's part.
	run, _ := store.Create(ctx, wire.RunRecord{RunID: "run-1", Tenant: "acme", Principal: "alice",
		Profile: "fixture", Adapter: "fixture", State: wire.StateRouted, Created: time.Now().UnixMilli()})
	w := store.Events().New("acme", "run-1")
	_ = w.StatusesFenced(ctx, wire.Status{State: wire.StateAccepted}, wire.Status{State: wire.StateRouted})
	work, _ := wire.Marshal(wire.Work{V: wire.Version, RunID: "run-1", Tenant: "acme", Principal: "alice", Adapter: "fixture"})
	_, _ = js.Publish(ctx, d.Names.Work(string(wire.TransportInProcess), "fixture", "acme"), work,
		jetstream.WithMsgID(subject.RunMsgID("acme", "run-1")))

	// The runner's part: it takes its lease but never renews it.
	lease, _ := store.HoldRunner(ctx, "runner-a")
	w, _ = store.Events().Open(ctx, "acme", "run-1")
	w.Author("runner-a", lease.Epoch(), 1)
	_ = w.StatusFenced(ctx, wire.Status{State: wire.StateRunning, Attempt: 1})
	_ = w.ChunkFenced(ctx, wire.Chunk{Type: wire.ChunkText, Content: "partial"})

	s, err := sweeper.New(ctx, d, sweeper.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	c, _ := client.New(nc, d.Names)
	st, err := c.Wait(ctx, "acme", run.Record.RunID)
	fmt.Println(st.State, st.Error.Class, err)
	rec, _ := store.Get(ctx, "acme", "run-1") // the record follows the terminal event
	for !rec.Record.State.Terminal() {
		time.Sleep(10 * time.Millisecond)
		rec, _ = store.Get(ctx, "acme", "run-1")
	}
	fmt.Println("record:", rec.Record.State, "owner", rec.Record.Owner, "had output", rec.Record.Committed)
	// Output:
	// failed ProviderTransportError <nil>
	// record: failed owner runner-a had output true
}
