// Package exportertest starts an exporter for a test or a benchmark: on a
// test server with the topology ensured, with its trajectory store, its
// consent rules watched, and the consent grants and export records beside
// it (Start).
package exportertest

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exporter"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Fixture is an exporter and the stores it works with, on one server.
type Fixture struct {
	JS       jetstream.JetStream
	Exporter *exporter.Exporter
	Consent  *consent.Store
	Records  *exports.Records
	Store    trajstore.Store
}

// Start runs a JetStream test server, ensures the default topology on it,
// and returns an exporter (the default exporter.Config and export
// settings) watching the consent rules until tb ends, with the consent
// grants, the export records and the trajectory store it uses.
func Start(tb testing.TB) Fixture {
	tb.Helper()
	srv := natstest.RunJetStream(tb)
	nc, js := natstest.Connect(tb, srv)
	ctx := context.Background()
	names := subject.Names{}
	if err := topology.Ensure(ctx, js, topology.Config{}); err != nil {
		tb.Fatal(err)
	}
	d := service.Deps{NC: nc, JS: js, Names: names, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}
	store, err := exporter.OpenStore(ctx, js, names, exports.Settings{})
	if err != nil {
		tb.Fatal(err)
	}
	x, err := exporter.New(ctx, d, store, exporter.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	stop, err := x.WatchRules(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	grants, err := consent.Open(ctx, js, names)
	if err != nil {
		tb.Fatal(err)
	}
	records, err := exports.Open(ctx, js, names)
	if err != nil {
		tb.Fatal(err)
	}
	return Fixture{JS: js, Exporter: x, Consent: grants, Records: records, Store: store}
}
