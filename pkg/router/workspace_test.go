package router_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/pi"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// A CLI run's workspace source routes through: its work carries the
// source, in contract v2, to the runners of its pool (no runner runs
// here, so the work waits to be pulled).
func TestWorkspaceSourceRoutes(t *testing.T) {
	ctx := context.Background()
	srv := natstest.RunJetStream(t)
	d := servicetest.Deps(t, srv, topology.Config{})
	a, err := pi.New(cli.Config{Binary: os.Args[0], InstallHint: "the test binary", WorkspaceRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	adapters, err := adapter.NewRegistry(a)
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := profile.New(profile.Profile{Name: pi.Name, Adapter: pi.Name, Transport: wire.TransportSubprocess,
		Model: "fake-model", Binary: os.Args[0], InstallHint: "the test binary"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.New(ctx, d, profiles, adapters, router.Config{})
	if err != nil {
		t.Fatal(err)
	}
	servicetest.Start(t, func(ctx context.Context, _ *slog.Logger) error { return r.Run(ctx) })

	c := clienttest.New(t, srv)
	src := wire.WorkspaceSource{Git: &wire.GitSource{URL: "file:///srv/repo.git", Ref: "main"}}
	id, err := c.Submit(ctx, wire.RunRequest{RunID: "with-a-source", Tenant: tenant, Principal: "alice", Profile: pi.Name,
		Request: request(t, map[string]string{"prompt": "edit it"}), Workspace: &src})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := d.JS.CreateConsumer(ctx, d.Names.WorkStream(), jetstream.ConsumerConfig{
		FilterSubject: d.Names.Work(string(wire.TransportSubprocess), pi.Name, tenant), AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next()
	if err != nil {
		t.Fatal(err)
	}
	w, err := wire.Decode[wire.Work](msg.Data())
	if err != nil {
		t.Fatal(err)
	}
	if w.RunID != id || w.V < 2 || w.Workspace == nil || w.Workspace.Git == nil || *w.Workspace.Git != *src.Git {
		t.Fatalf("work %s v%d, workspace %+v; want run %s's source in v2", w.RunID, w.V, w.Workspace, id)
	}
}
