// Package meshtest runs the rest of the mesh beside a service under test
// (Start), runs a whole mesh on a test's own dependencies (Serve), submits
// a run through it and waits for its end (Complete), and checks a runner
// service against it (CheckRunner).
package meshtest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Start runs the services cfg selects from pkg/mesh, with the built-in
// profiles and the fixture adapter, against natsURL until the test ends, so
// that a service under test has the rest of the mesh to work with.
func Start(t testing.TB, natsURL string, cfg mesh.Config) {
	t.Helper()
	StartWith(t, service.Config{NatsURL: natsURL, ShutdownTimeout: 10 * time.Second}, cfg)
}

// StartWith is Start on the infrastructure common describes (service.Start:
// its URL, credentials and TLS, HTTP address, ...). It returns the deps the
// mesh runs on, whose connection the test may use too.
func StartWith(t testing.TB, common service.Config, cfg mesh.Config) service.Deps {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	adapters, err := catalog.Dirs{}.Registry(profile.Builtin())
	if err != nil {
		t.Fatalf("meshtest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	infra, err := service.Start(ctx, "meshtest", common, log)
	if err != nil {
		cancel()
		t.Fatalf("meshtest: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mesh.Run(ctx, infra.Deps, profile.Builtin(), adapters, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("meshtest: mesh: %v", err)
		}
		if err := infra.Close(); err != nil {
			t.Errorf("meshtest: close mesh: %v", err)
		}
	})
	return infra.Deps
}

// Node is one service or mesh that Go runs: Stop cancels it, and Done
// yields what it returned. A test that stops a node itself and reads Done
// puts a nil back for the cleanup Go registered.
type Node struct {
	Stop context.CancelFunc
	Done chan error
}

// Go runs run on a goroutine of its own until the test ends, then cancels
// its context and fails the test if run returns an error or takes longer
// than stopWithin to return; name names run in those failures.
func Go(t testing.TB, name string, stopWithin time.Duration, run func(context.Context) error) *Node {
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{Stop: cancel, Done: make(chan error, 1)}
	go func() { n.Done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-n.Done:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(stopWithin):
			t.Errorf("%s did not stop within %s", name, stopWithin)
		}
	})
	return n
}

// Serve runs mesh.Run with d, profiles, adapters and cfg as Go runs it,
// and returns once the mesh is ready: once the router's consumer exists
// (the topology is then complete) or, with cfg.WithoutRouter, once the
// events stream does.
func Serve(t testing.TB, d service.Deps, profiles *profile.Registry, adapters *adapter.Registry, cfg mesh.Config, stopWithin time.Duration) *Node {
	t.Helper()
	n := Go(t, "mesh", stopWithin, func(ctx context.Context) error { return mesh.Run(ctx, d, profiles, adapters, cfg) })
	natstest.Eventually(t, 10*time.Second, func() error {
		if cfg.WithoutRouter {
			_, err := d.JS.Stream(context.Background(), d.Names.EventsStream())
			return err
		}
		_, err := d.JS.Consumer(context.Background(), d.Names.SubmitStream(), d.Names.RouterConsumer())
		return err
	})
	return n
}

// Complete submits a run of the fixture profile with prompt through nc and
// waits up to 30s for it to end, failing the test unless it succeeded.
func Complete(t testing.TB, nc *nats.Conn, prompt string) {
	t.Helper()
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatalf("meshtest: %v", err)
	}
	req, err := wire.Marshal(map[string]any{"prompt": prompt})
	if err != nil {
		t.Fatalf("meshtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := c.Submit(ctx, wire.RunRequest{Tenant: "default", Principal: "test", Profile: "fixture", Request: req})
	if err != nil {
		t.Fatalf("meshtest: %v", err)
	}
	st, err := c.Wait(ctx, "default", id)
	if err != nil {
		t.Fatalf("meshtest: run %s: %v", id, err)
	}
	if st.State != wire.StateSucceeded {
		t.Fatalf("meshtest: run %s ended %s (error %v), want succeeded", id, st.State, st.Error)
	}
}

// CheckRunner checks a runner service against s: run (the service's run
// function, its configuration loaded with AGENTMESH_RUNNER_ID=id) registers
// as agentmesh-runner with that id, serves HTTP, executes a run that the
// rest of the mesh routes, and shuts down cleanly.
func CheckRunner(t testing.TB, s *server.Server, id string, run func(ctx context.Context, log *slog.Logger) error) {
	t.Helper()
	nc, _ := natstest.Connect(t, s)
	p := servicetest.Start(t, run)
	if got := servicetest.CheckMicro(t, nc, "agentmesh-runner").Metadata["runner_id"]; got != id {
		t.Errorf("micro metadata runner_id = %q, want %s", got, id)
	}
	p.CheckHTTP(t, "agentmesh_runs_in_flight")
	Start(t, s.ClientURL(), mesh.Config{WithoutRunner: true})
	Complete(t, nc, "executed by the runner service")
	p.Stop(t)
}
