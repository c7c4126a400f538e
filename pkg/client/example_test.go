package client_test

import (
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
)

// exampleMesh starts a whole mesh on an embedded server (in production
// the mesh runs as its own services) and returns its URL and what stops
// it, or an error.
func exampleMesh() (string, func(), error) {
	dir, _ := os.MkdirTemp("", "agentmesh-example")
	srv, _ := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	srv.Start()
	srv.ReadyForConnections(10e9)
	stopServer := func() { srv.Shutdown(); srv.WaitForShutdown(); os.RemoveAll(dir) }

	// The mesh: router, runner and sweeper with the offline fixture adapter.
	meshConn, js, _ := service.Connect(srv.ClientURL(), "example-mesh", slog.New(slog.NewTextHandler(io.Discard, nil)))
	fx, _ := fixture.New(fixture.Config{ScriptsDir: "../../testdata/fixture"})
	adapters, _ := adapter.NewRegistry(fx)
	d := service.Deps{NC: meshConn, JS: js, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}
	ctx, stop := context.WithCancel(context.Background())
	// The streams exist before the client submits (mesh.Run ensures them
	// too, concurrently with this example otherwise).
	if err := topology.Ensure(ctx, js, topology.Config{}); err != nil {
		stop()
		meshConn.Close()
		stopServer()
		return "", nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mesh.Run(ctx, d, profile.Builtin(), adapters, mesh.Config{}) }()
	return srv.ClientURL(), func() { stop(); <-done; meshConn.Close(); stopServer() }, nil
}

// Submit a run and follow its events, against a whole mesh on an embedded
// server.
func Example() {
	url, stop, err := exampleMesh()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx := context.Background()

	// The client side.
	// A tenant connects with its own inbox prefix, _INBOX_acme.
	nc, _ := client.Connect(url, "acme")
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

// Follow many runs of a tenant through one consumer: each Start has its
// own iterator, fed from the follower's consumer on the tenant's events.
func ExampleClient_FollowTenant() {
	url, stop, err := exampleMesh()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx := context.Background()

	nc, _ := client.Connect(url, "acme")
	defer nc.Close()
	c, _ := client.New(nc, subject.Names{})
	tf, err := c.FollowTenant(ctx, "acme")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tf.Close()
	var runs []iter.Seq2[wire.Event, error]
	for _, prompt := range []string{"one", "two", "three"} {
		req, _ := wire.Marshal(map[string]any{"prompt": prompt})
		_, events, err := tf.Start(ctx, wire.RunRequest{Tenant: "acme", Principal: "alice", Profile: "fixture", Request: req})
		if err != nil {
			fmt.Println(err)
			return
		}
		runs = append(runs, events)
	}
	for i, events := range runs {
		for ev, err := range events {
			switch {
			case err != nil:
				fmt.Println(err)
				return
			case ev.Kind == wire.KindChunk && ev.Chunk.Type == wire.ChunkText:
				fmt.Println(i, ev.Chunk.Content)
			case ev.Terminal():
				fmt.Println(i, ev.Status.State, "at seq", ev.Seq)
			}
		}
	}
	// Output:
	// 0 echo: one
	// 0 succeeded at seq 10
	// 1 echo: two
	// 1 succeeded at seq 10
	// 2 echo: three
	// 2 succeeded at seq 10
}
