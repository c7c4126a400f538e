package runner_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// A runner host for the fixture adapter, behind a router: a run that fails
// retryably before its first output is tried again, one that fails after
// it is not, and a running run is cancelled. Its record names the runner
// that held it and the attempt it ended in.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nc, js, stop := natstest.Start()
	defer stop()
	d := service.Deps{NC: nc, JS: js, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}
	fx, _ := fixture.New(fixture.Config{ScriptsDir: "../../testdata/fixture"})
	adapters, _ := adapter.NewRegistry(fx)
	var r *router.Router
	var h *runner.Host
	err := topology.Ensure(ctx, js, topology.Config{})
	if err == nil {
		r, err = router.New(ctx, d, profile.Builtin(), adapters, router.Config{})
	}
	if err == nil {
		h, err = runner.New(ctx, d, adapters, runner.Config{ID: "runner-a"})
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 2)
	go func() { done <- r.Run(ctx) }()
	go func() { done <- h.Run(ctx) }()
	defer func() { cancel(); <-done; <-done }()

	c, _ := client.New(nc, d.Names)
	submit := func(fields map[string]any) string {
		req, _ := wire.Marshal(fields)
		id, _ := c.Submit(ctx, wire.RunRequest{Tenant: "acme", Principal: "alice", Profile: "fixture", Request: req})
		return id
	}
	report := func(name, id string) {
		st, _ := c.Wait(ctx, "acme", id)
		rec, _ := c.Status(ctx, "acme", id)
		for !rec.State.Terminal() { // the record follows the terminal event
			time.Sleep(10 * time.Millisecond)
			rec, _ = c.Status(ctx, "acme", id)
		}
		state := string(st.State)
		if st.Error != nil {
			state += " (" + string(st.Error.Class) + ")"
		}
		fmt.Println(name, state, "attempt", rec.Attempt, "owner", rec.Owner, "had output", rec.Committed)
	}

	report("retry-then-ok:", submit(map[string]any{"prompt": "p", "script": "retry-then-ok"}))
	report("fail-after-output:", submit(map[string]any{"prompt": "p", "script": "fail-after-output"}))

	slow := submit(map[string]any{"prompt": "p", "script": "slow", "delay_ms": 20})
	for ev, err := range c.Events(ctx, "acme", slow, 1) {
		if err != nil || ev.Kind == wire.KindChunk {
			break // running, with output
		}
	}
	reply, _ := c.Cancel(ctx, "acme", slow)
	fmt.Println("cancel:", reply.Cancelled)
	report("slow:", slow)
	// Output:
	// retry-then-ok: succeeded attempt 2 owner runner-a had output true
	// fail-after-output: failed (ProviderTransportError) attempt 1 owner runner-a had output true
	// cancel: true
	// slow: cancelled attempt 1 owner runner-a had output true
}
