package main

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	_, nc, p := servicetest.Serve(t, map[string]string{"AGENTMESH_LEASE_TTL": "3s"}, run)

	if got := servicetest.CheckMicro(t, nc, "agentmesh-sweeper").Metadata["lease_ttl"]; got != "3s" {
		t.Errorf("micro metadata lease_ttl = %q, want 3s", got)
	}
	p.CheckHTTP(t, "agentmesh_lease_expiries_total")
	p.Stop(t)
}

func TestConfig(t *testing.T) {
	servicetest.CheckSpecs[Config](t, []servicetest.ConfigCase{
		{Name: "defaults", Env: nil, Want: ""},
		{Name: "reconcile", Env: map[string]string{"AGENTMESH_SWEEPER_RECONCILE_EVERY": "1ms"}, Want: "AGENTMESH_SWEEPER_RECONCILE_EVERY: must be at least 1s"},
		{Name: "exports", Env: map[string]string{"AGENTMESH_SWEEPER_EXPORTS_EVERY": "1ms"}, Want: "AGENTMESH_SWEEPER_EXPORTS_EVERY: must be at least 1s"},
		{Name: "artifacts", Env: map[string]string{"AGENTMESH_SWEEPER_ARTIFACTS_EVERY": "1ms"}, Want: "AGENTMESH_SWEEPER_ARTIFACTS_EVERY: must be at least 1s"},
	})
}
