package service_test

import (
	"runtime"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/prometheus/client_golang/prometheus"
)

func families(t *testing.T, g prometheus.Gatherer) []string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	return names
}

// TestMetricsRegisterOwnFamilies: a fresh registry holds only
// agentmesh_build_info; a family shows once a component registered it,
// and two components registering it (one process, one registry) share it.
func TestMetricsRegisterOwnFamilies(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := service.NewMetrics(reg)
	if got := families(t, reg); !slices.Equal(got, []string{"agentmesh_build_info"}) {
		t.Fatalf("families of fresh metrics = %v, want only agentmesh_build_info", got)
	}
	m.LeaseExpiries.Inc() // moved by nobody that registered it: not exported
	m.Register(m.Cost, m.LeaseExpiries)
	m.Register(m.LeaseExpiries) // a second component: no panic, one family
	m.LeaseExpiries.Inc()
	want := []string{"agentmesh_build_info", "agentmesh_cost_total", "agentmesh_lease_expiries_total"}
	if got := families(t, reg); !slices.Equal(got, want) {
		t.Fatalf("families = %v, want %v", got, want)
	}
	m.Unregister(m.Cost)
	m.Unregister(m.Cost)
	if got := families(t, reg); slices.Contains(got, "agentmesh_cost_total") {
		t.Errorf("families after Unregister = %v", got)
	}

	mfs, _ := reg.Gather()
	labels := map[string]string{}
	for _, lp := range mfs[0].GetMetric()[0].GetLabel() {
		labels[lp.GetName()] = lp.GetValue()
	}
	if labels["version"] != service.Version || labels["goversion"] != runtime.Version() || labels["commit"] == "" {
		t.Errorf("build info labels = %v, want version %s, goversion %s and a commit", labels, service.Version, runtime.Version())
	}
}

// TestDefaultHTTPPorts: one block of ports on the loopback, one per
// service, none shared.
func TestDefaultHTTPPorts(t *testing.T) {
	seen := map[int]string{}
	for name, port := range service.DefaultHTTPPorts {
		if port < 9460 || port > 9466 {
			t.Errorf("%s: port %d outside 9460-9466", name, port)
		}
		if other, dup := seen[port]; dup {
			t.Errorf("%s and %s share port %d", name, other, port)
		}
		seen[port] = name
	}
	for _, name := range []string{"router", "subprocess-runner", "remote-runner", "sweeper", "exporter", "up", "gateway"} {
		if service.DefaultHTTPPorts[name] == 0 {
			t.Errorf("%s has no default port", name)
		}
	}
	if got := service.DefaultHTTPAddr("router"); got != "127.0.0.1:9460" {
		t.Errorf("DefaultHTTPAddr(router) = %q", got)
	}
}
