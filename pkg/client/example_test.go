package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/fixture"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
)

// Submit a run and follow its events, against a whole mesh on an embedded
// server (in production the mesh runs as its own services).
func Example() {
	dir, _ := os.MkdirTemp("", "agentmesh-example")
	defer os.RemoveAll(dir)
	srv, _ := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	srv.Start()
	defer srv.WaitForShutdown()
	defer srv.Shutdown()
	srv.ReadyForConnections(10e9)

	// The mesh: router, runner and sweeper with the offline fixture adapter.
	meshConn, js, _ := service.Connect(srv.ClientURL(), "example-mesh", slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer meshConn.Close()
	fx, _ := fixture.New(fixture.Config{ScriptsDir: "../../testdata/fixture"})
	adapters, _ := adapter.NewRegistry(fx)
	d := service.Deps{NC: meshConn, JS: js, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}
	ctx, stop := context.WithCancel(context.Background())
	// The streams exist before the client submits (mesh.Run ensures them
	// too, concurrently with this example otherwise).
	if err := topology.Ensure(ctx, js, topology.Config{}); err != nil {
		stop()
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- mesh.Run(ctx, d, profile.Builtin(), adapters, mesh.Config{}) }()
	defer func() { stop(); <-done }()

	// The client side.
	// A tenant connects with its own inbox prefix, _INBOX_acme.
	nc, _ := client.Connect(srv.ClientURL(), "acme")
	defer nc.Close()
	c, _ := client.New(nc, subject.Names{})
	req, _ := wire.Marshal(map[string]any{"prompt": "hello"})
	id, err := c.Submit(ctx, wire.RunRequest{Tenant: "acme", Principal: "alice", Profile: "fixture", Request: req})
	if err != nil {
		fmt.Println(err)
		return
	}
	for ev, err := range c.Events(ctx, "acme", id, 1) {
		if err != nil {
			fmt.Println(err)
			return
		}
		if ev.Kind == wire.KindStatus {
			fmt.Println(ev.Seq, "status", ev.Status.State)
		} else {
			fmt.Println(strings.TrimSpace(fmt.Sprint(ev.Seq, " chunk ", ev.Chunk.Type, " ", ev.Chunk.Content)))
		}
	}
	// Output:
	// 1 status accepted
	// 2 status routed
	// 3 status running
	// 4 chunk system
	// 5 chunk thinking The prompt has 5 bytes; echo it.
	// 6 chunk text echo: hello
	// 7 chunk tool_use
	// 8 chunk tool_result
	// 9 chunk result
	// 10 status succeeded
}
