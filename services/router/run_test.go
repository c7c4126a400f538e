package main

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	s, nc, p := servicetest.Serve(t, map[string]string{"AGENTMESH_FIXTURE_DIR": "../../testdata/fixture"}, run)

	info := servicetest.CheckMicro(t, nc, "agentmesh-router")
	logged, _ := p.Log(t, "router started")["registry_version"].(string)
	if got := info.Metadata["registry_version"]; logged == "" || got != logged {
		t.Errorf("micro metadata registry_version = %q, logged %q; want the same, non-empty", got, logged)
	}
	p.CheckHTTP(t, "agentmesh_work_queue_depth")
	meshtest.Start(t, s.ClientURL(), mesh.Config{WithoutRouter: true})
	meshtest.Complete(t, nc, "routed by the router service")
	p.Stop(t)
}

func TestValidate(t *testing.T) {
	servicetest.CheckSpecs[Config](t, []servicetest.ConfigCase{
		{Name: "defaults", Env: nil, Want: ""},
		{Name: "workers zero is the default", Env: map[string]string{"AGENTMESH_ROUTER_WORKERS": "0"}, Want: ""},
		{Name: "workers", Env: map[string]string{"AGENTMESH_ROUTER_WORKERS": "-1"}, Want: "AGENTMESH_ROUTER_WORKERS: must be > 0, got -1"},
		{Name: "ack wait", Env: map[string]string{"AGENTMESH_ROUTER_ACK_WAIT": "10ms"}, Want: "AGENTMESH_ROUTER_ACK_WAIT: must be at least 1s"},
		{Name: "default deadline", Env: map[string]string{"AGENTMESH_ROUTER_DEFAULT_DEADLINE": "48h"}, Want: "AGENTMESH_ROUTER_DEFAULT_DEADLINE: must be in (0, max deadline 24h0m0s]"},
		{Name: "default deadline beyond the max", Env: map[string]string{"AGENTMESH_ROUTER_MAX_DEADLINE": "10m"}, Want: "AGENTMESH_ROUTER_DEFAULT_DEADLINE"},
		{Name: "max deadline", Env: map[string]string{"AGENTMESH_ROUTER_MAX_DEADLINE": "-1s"}, Want: "AGENTMESH_ROUTER_MAX_DEADLINE: must be > 0"},
	})
}
