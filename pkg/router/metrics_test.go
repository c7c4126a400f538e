package router_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// value is the sum of the values of family name's samples whose labels
// include labels, on reg (a histogram's: its counts); ok is false when
// there is none.
func value(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) (v float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	samples:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, want := range labels {
				if have[k] != want {
					continue samples
				}
			}
			ok = true
			switch mf.GetType() {
			case dto.MetricType_GAUGE:
				v += m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				v += m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				v += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return v, ok
}

// TestQueueDepthAndCounts: the router exports its own families only; the
// work queue depth over two tenants follows dispatched work no runner takes;
// a rejected run is counted once at its terminal status; and micro stats
// count the submissions and routed runs.
func TestQueueDepthAndCounts(t *testing.T) {
	srv := natstest.RunJetStream(t)
	topo := topology.Config{}
	d := servicetest.Deps(t, srv, topo)
	reg := prometheus.NewRegistry()
	d.Metrics = service.NewMetrics(reg)
	startOn(t, d, topo, nil)
	c := clienttest.New(t, srv)
	ctx := context.Background()

	for _, name := range []string{"agentmesh_lease_expiries_total", "agentmesh_exports_total", "agentmesh_runs_in_flight", "agentmesh_chunks_total"} {
		if _, ok := value(t, reg, name, nil); ok {
			t.Errorf("the router exports %s, which it never moves", name)
		}
	}
	if v, ok := value(t, reg, "agentmesh_work_queue_depth", map[string]string{"adapter": "fixture"}); !ok || v != 0 {
		t.Fatalf("queue depth before any run = %v (present %t), want 0", v, ok)
	}
	const perTenant = 3
	for _, tn := range []string{tenant, "globex"} {
		for range perTenant {
			r := clienttest.FixtureRun(t, tn, fixtureReq{Prompt: "x"})
			id, err := c.Submit(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			clienttest.WaitFor(t, c, tn, id, wire.StateRouted) // no runner takes it
		}
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if v, _ := value(t, reg, "agentmesh_work_queue_depth", map[string]string{"adapter": "fixture"}); v != 2*perTenant {
			return fmt.Errorf("queue depth = %v, want %d", v, 2*perTenant)
		}
		return nil
	})

	bad := runReq(t, "x")
	bad.Profile = "nope"
	id, err := c.Submit(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	clienttest.WaitFor(t, c, tenant, id, wire.StateRejected)
	// Counted once the router's End and settle return, just after the
	// client saw the status.
	natstest.Eventually(t, 5*time.Second, func() error {
		if v, _ := value(t, reg, "agentmesh_runs_total", map[string]string{"state": "rejected"}); v != 1 {
			return fmt.Errorf("rejected runs = %v, want 1", v)
		}
		_, counts := servicetest.Endpoint(t, servicetest.MicroStats(t, d.NC, "agentmesh-router"), "cancel")
		if counts["runs_routed"] != 2*perTenant || counts["submissions"] != 2*perTenant+1 {
			return fmt.Errorf("micro stats data = %v, want %d runs routed of %d submissions", counts, 2*perTenant, 2*perTenant+1)
		}
		return nil
	})
	if v, _ := value(t, reg, "agentmesh_run_duration_seconds", nil); v != 1 {
		t.Errorf("run durations observed = %v, want 1 (the rejected run, once)", v)
	}
}

// TestCancelErrorHeaders: a failed cancel is a micro error answer (the
// Nats-Service-Error headers, counted in the endpoint's stats) whose body
// the client still decodes.
func TestCancelErrorHeaders(t *testing.T) {
	srv := natstest.RunJetStream(t)
	d := start(t, srv, topology.Config{}, nil)
	c := clienttest.New(t, srv)
	// The router registers its cancel endpoint once its Run has started,
	// which may be after this request on a busy machine: no responders
	// until then.
	var msg *nats.Msg
	natstest.Eventually(t, 10*time.Second, func() (err error) {
		msg, err = d.NC.Request(d.Names.Cancel(tenant, "nosuchrun"), nil, 10*time.Second)
		if err != nil && !errors.Is(err, nats.ErrNoResponders) {
			t.Fatal(err)
		}
		return err
	})
	if got, want := msg.Header.Get(wire.ContentTypeHeader), wire.TypeCancelReply.ContentType().String(); got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	if got := msg.Header.Get(micro.ErrorCodeHeader); got != "400" {
		t.Errorf("%s = %q, want 400", micro.ErrorCodeHeader, got)
	}
	if got := msg.Header.Get(micro.ErrorHeader); got != "AgenticRequestValidationError: no run nosuchrun for tenant acme" {
		t.Errorf("%s = %q", micro.ErrorHeader, got)
	}
	reply, err := c.Cancel(context.Background(), tenant, "nosuchrun")
	if !errors.Is(err, wire.AgenticRequestValidationError) || reply.RunID != "nosuchrun" {
		t.Errorf("client Cancel = %+v, %v; want the decoded reply and its validation error", reply, err)
	}
	// micro counts a request once its handler returned, after it answered.
	natstest.Eventually(t, 5*time.Second, func() error {
		if e, _ := servicetest.Endpoint(t, servicetest.MicroStats(t, d.NC, "agentmesh-router"), "cancel"); e.NumRequests != 2 || e.NumErrors != 2 {
			return fmt.Errorf("cancel endpoint stats: %d requests, %d errors; want 2 and 2", e.NumRequests, e.NumErrors)
		}
		return nil
	})
}
