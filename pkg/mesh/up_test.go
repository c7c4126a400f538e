package mesh_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/runner/runnerservice"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/serviceconfig"
)

// upEnv sets a value other than the default for variables of every
// service: the common ones, the router's, the runners' (the sandbox's
// limits, the git allowlist), the sweeper's, the exporter's and the
// gateway's.
var upEnv = map[string]string{
	"AGENTMESH_PREFIX": "stage", "AGENTMESH_LEASE_TTL": "45s", "AGENTMESH_WORK_QUEUE_MAX": "99", "AGENTMESH_LOG_LEVEL": "warn",
	"AGENTMESH_PROFILES_DIR": "../../profiles", "AGENTMESH_FIXTURE_DIR": "../../testdata/fixture", "AGENTMESH_WORKSPACE_ROOT": "/srv/ws",
	"AGENTMESH_ROUTER_WORKERS": "3", "AGENTMESH_ROUTER_MAX_DEADLINE": "2h",
	"AGENTMESH_RUNNER_ID": "r-7", "AGENTMESH_RUNNER_GIT_ALLOW": "https://git.example.com/", "AGENTMESH_RUNNER_DRAIN_TIMEOUT": "7s",
	"AGENTMESH_RUNNER_MAX_ACTIVE": "fixture:5",
	"AGENTMESH_SANDBOX_MEMORY":    "536870912", "AGENTMESH_SANDBOX_PROCS": "77", "AGENTMESH_SANDBOX_WALL_TIME": "9m",
	"AGENTMESH_SWEEPER_RECONCILE_EVERY": "17s", "AGENTMESH_EXPORTER_WORKERS": "2",
	"AGENTMESH_GATEWAY_MAX_BODY_BYTES": "2097152", "AGENTMESH_GATEWAY_OPERATOR_KEYS": "0123456789ab,ba9876543210",
}

// TestUpConfigIsEachBinarys builds each service's configuration twice from
// one environment, as its binary's main reads it (service.LoadService on
// its Config) and as agentmesh up reads it (mesh.LoadUpConfig), and
// requires them equal; then that the services up runs get it (the
// configuration mesh.Up hands mesh.Run), but for up's own: the gateway's
// address and console (its flags), the runner's adapters (its flag) and
// every service's NATS connection (the embedded server).
func TestUpConfigIsEachBinarys(t *testing.T) {
	for k, v := range upEnv {
		t.Setenv(k, v)
	}
	got, err := mesh.LoadUpConfig()
	if err != nil {
		t.Fatal(err)
	}
	var (
		router   serviceconfig.Router
		sweeper  serviceconfig.Sweeper
		exporter serviceconfig.Exporter
		gateway  serviceconfig.Gateway
	)
	load := func(name string, spec any, common *service.Config) {
		t.Helper()
		if err := service.LoadService(name, spec, common); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	load("router", &router, router.Common())
	load("sweeper", &sweeper, sweeper.Common())
	load("exporter", &exporter, exporter.Common())
	load("gateway", &gateway, gateway.Common())
	for _, c := range []struct {
		name       string
		binary, up any
	}{{"router", router, got.Router}, {"sweeper", sweeper, got.Sweeper}, {"exporter", exporter, got.Exporter}, {"gateway", gateway, got.Gateway}} {
		if !reflect.DeepEqual(c.binary, c.up) {
			t.Errorf("%s: up reads\n\t%+v\nits binary reads\n\t%+v", c.name, c.up, c.binary)
		}
	}
	for _, s := range []runnerservice.Service{runnerservice.Subprocess, runnerservice.Remote} {
		spec := s.NewSpec()
		load(s.Name, spec, spec.Common())
		want := spec.Config
		want.HTTPAddr = got.Runner.HTTPAddr // each binary its own metrics port; up serves one
		if !reflect.DeepEqual(want, got.Runner) {
			t.Errorf("%s: up reads\n\t%+v\nits binary reads\n\t%+v", s.Name, got.Runner, want)
		}
	}
	if got.Runner.SandboxMode != runnerservice.SandboxOn || got.Runner.SandboxMemory != 512<<20 || got.Runner.SandboxProcs != 77 {
		t.Errorf("up's runner sandbox: %+v; want on with the environment's limits", got.Runner.SandboxSettings)
	}

	// What up runs with.
	profiles, err := got.Router.Profiles()
	if err != nil {
		t.Fatal(err)
	}
	mc := got.Mesh(mesh.UpOptions{Gateway: "127.0.0.1:0", Console: true}, profiles)
	if !reflect.DeepEqual(mc.Topology, router.Topology()) || !reflect.DeepEqual(mc.Router, router.Router) ||
		!reflect.DeepEqual(mc.Sweeper, sweeper.Sweeper) || !reflect.DeepEqual(mc.Exporter, exporter.Exporter) {
		t.Errorf("mesh config differs from the binaries':\n%+v", mc)
	}
	if want := got.Runner.Host(profiles); !reflect.DeepEqual(mc.Runner, want) || mc.Runner.MaxActive["fixture"] != 5 || mc.Runner.ID != "r-7" {
		t.Errorf("runner config = %+v, want %+v", mc.Runner, want)
	}
	gw := gateway.Gateway
	gw.Addr, gw.Console = "127.0.0.1:0", true
	if mc.Gateway == nil || !reflect.DeepEqual(*mc.Gateway, gw) {
		t.Errorf("gateway config = %+v, want %+v", mc.Gateway, gw)
	}
	if mc := got.Mesh(mesh.UpOptions{}, profiles); mc.Gateway != nil {
		t.Errorf("no --gateway: gateway %+v, want none", mc.Gateway)
	}
}

// TestUpConfigChecks: up refuses what a binary refuses, naming the
// variable once, also when several services read it.
func TestUpConfigChecks(t *testing.T) {
	for env, want := range map[string]string{
		"AGENTMESH_SANDBOX_MEMORY":   "config: AGENTMESH_SANDBOX_MEMORY: must be >= 0, got -1",
		"AGENTMESH_LEASE_TTL":        "config: AGENTMESH_LEASE_TTL: must be at least 1s, got -1s",
		"AGENTMESH_ROUTER_WORKERS":   "config: AGENTMESH_ROUTER_WORKERS: must be > 0, got -1",
		"AGENTMESH_EXPORTER_WORKERS": "config: AGENTMESH_EXPORTER_WORKERS",
	} {
		t.Run(env, func(t *testing.T) {
			v := "-1"
			if env == "AGENTMESH_LEASE_TTL" {
				v = "-1s"
			}
			t.Setenv(env, v)
			_, err := mesh.LoadUpConfig()
			if err == nil || !errors.Is(err, service.ErrConfig) || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), env+":") != 1 {
				t.Errorf("%s=%s: %v; want once %q", env, v, err, want)
			}
		})
	}
}
