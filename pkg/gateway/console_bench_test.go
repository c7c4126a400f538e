package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/ledger"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// benchRuns is how many run records BenchmarkConsoleRunsList holds.
const benchRuns = 10000

// BenchmarkConsoleRunsList: GET /console/runs over HTTP with 10,000 run
// records in the runs bucket (5 tenants, two profiles, 10 % not ended),
// each request authenticated (one key read) and rendered; p50 and p99
// of the request's latency per query shape. no-match walks the whole
// index (a filter nothing matches), the worst case of a page. The
// page=... cases are the console's other pages with the same runs held
// (and 14 days of 5 tenants' spend in the ledger).
func BenchmarkConsoleRunsList(b *testing.B) {
	s := natstest.RunJetStream(b)
	d := servicetest.Deps(b, s, topology.Config{})
	ctx := context.Background()
	keys, err := gateway.OpenKeys(ctx, d.JS, subject.Names{})
	if err != nil {
		b.Fatal(err)
	}
	turns, err := gateway.OpenTurns(ctx, d.JS, subject.Names{})
	if err != nil {
		b.Fatal(err)
	}
	opsKey, ops, err := keys.Create(ctx, "ops", "root")
	if err != nil {
		b.Fatal(err)
	}
	tenantKey, _, err := keys.Create(ctx, "t3", "alice")
	if err != nil {
		b.Fatal(err)
	}
	seedBenchRuns(b, d.NC, benchRuns)
	seedBenchSpend(b, d.JS)
	c, err := client.New(d.NC, subject.Names{})
	if err != nil {
		b.Fatal(err)
	}
	g, err := gateway.New(c, keys, turns, profile.Builtin(), slog.New(slog.DiscardHandler), gateway.Config{OperatorKeys: []string{ops.ID}})
	if err != nil {
		b.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	b.Cleanup(cancel)
	loadStart := time.Now()
	if err := g.EnableConsole(cctx, d.NC, d.JS, subject.Names{}); err != nil {
		b.Fatal(err)
	}
	b.Logf("index of %d records loaded in %s", benchRuns, time.Since(loadStart).Round(time.Millisecond))
	srv := httptest.NewServer(g.Handler())
	b.Cleanup(srv.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	b.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	get := func(key, path string) (time.Duration, error) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		took := time.Since(t0)
		if err != nil || resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET %s: %d %v %.200s", path, resp.StatusCode, err, body)
		}
		return took, nil
	}
	// A deep page: its cursor, 5,000 runs down.
	deep := fmt.Sprintf("%d.t%d.run-%05d", benchBase+5000, 5000%5, 5000)
	for _, q := range []struct{ name, key, path string }{
		{"first-page", opsKey, "/console/runs"},
		{"tenant", tenantKey, "/console/runs"},
		{"tenant+state", opsKey, "/console/runs?tenant=t3&state=failed&limit=100"},
		{"adapter", opsKey, "/console/runs?adapter=claude-code&limit=200"},
		{"deep-cursor", opsKey, "/console/runs?cursor=" + deep},
		{"no-match", opsKey, "/console/runs?profile=no-such-profile"},
		// The other pages, with the same 10,000 runs held.
		{"page=run", opsKey, "/console/runs/t4/run-00009"},
		{"page=spend-tenant", tenantKey, "/console/spend"},
		{"page=spend-operator", opsKey, "/console/spend"},
		{"page=exports", opsKey, "/console/exports"},
	} {
		b.Run(q.name, func(b *testing.B) {
			if _, err := get(q.key, q.path); err != nil { // warm
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				took, err := get(q.key, q.path)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, took)
			}
			b.StopTimer()
			slices.Sort(lat)
			p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(p(0.50), "p50-ms")
			b.ReportMetric(p(0.99), "p99-ms")
			b.ReportMetric(benchRuns, "runs")
		})
	}
}

// seedBenchSpend writes the ledger of the console's default 14 days: a
// day of 5 tenants, 11 principals' runs each, folded, as the ledger's
// writer leaves it.
func seedBenchSpend(b *testing.B, js jetstream.JetStream) {
	b.Helper()
	ctx := context.Background()
	store, err := ledger.Open(ctx, js, subject.Names{})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	for day := range 14 {
		ended := now.AddDate(0, 0, -day)
		for t := range 5 {
			tenant := fmt.Sprintf("t%d", t)
			for p := range 11 {
				rec := wire.RunRecord{V: wire.Version, RunID: fmt.Sprintf("spend-%d-%d", day, p), Tenant: tenant, Principal: fmt.Sprintf("p%d", p),
					Profile: "fixture", State: wire.StateSucceeded, Cost: "0.0123", Created: ended.UnixMilli() - 1000, Updated: ended.UnixMilli()}
				e, key, _ := ledger.Entry(rec)
				if err := store.Put(ctx, key, e); err != nil {
					b.Fatal(err)
				}
			}
			if err := store.Fold(ctx, tenant, ledger.Day(ended)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchBase is the created time of the first seeded record (unix ms).
const benchBase = 1_780_000_000_000

// seedBenchRuns publishes n run records to the runs bucket, as the
// router and the runners write them, at most 1,024 unacknowledged.
func seedBenchRuns(b *testing.B, nc *nats.Conn, n int) {
	b.Helper()
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(1024))
	if err != nil {
		b.Fatal(err)
	}
	states := []wire.State{wire.StateSucceeded, wire.StateSucceeded, wire.StateSucceeded, wire.StateFailed, wire.StateCancelled,
		wire.StateSucceeded, wire.StateTimedOut, wire.StateSucceeded, wire.StateSucceeded, wire.StateRouted}
	now := time.Now().UnixMilli()
	for i := range n {
		profile, adapter := "fixture", "fixture"
		if i%7 == 0 {
			profile, adapter = "claude-code", "claude-code"
		}
		rec := wire.RunRecord{V: wire.Version, RunID: fmt.Sprintf("run-%05d", i), Tenant: fmt.Sprintf("t%d", i%5), Principal: fmt.Sprintf("p%d", i%11),
			Profile: profile, Adapter: adapter, State: states[i%len(states)], Cost: "0.0123", Created: benchBase + int64(i), Updated: now,
			Labels: map[string]string{"team": strings.Repeat("x", i%9), "ticket": fmt.Sprint(i)}}
		if rec.State == wire.StateFailed {
			rec.Error = &wire.Error{Class: "ProviderStreamError", Message: "upstream broke"}
		}
		data, err := wire.Marshal(&rec)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := js.PublishAsync("$KV."+subject.Names{}.RunsBucket()+"."+subject.RunKey(rec.Tenant, rec.RunID), data); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("the run records were not all stored within a minute")
	}
}
