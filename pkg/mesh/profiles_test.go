package mesh_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
)

// TestEachProfileRunsWithItsOwnSettings: two profiles on one remote
// adapter, each with its own base_url (two recorded-stream servers) and
// credential, each reach their own server with their own credential; a
// conversation pinned to one of them stays on that one's server even when
// the next run names the other.
func TestEachProfileRunsWithItsOwnSettings(t *testing.T) {
	const keyA, keyB = "sk-test-profile-a-41c7", "sk-test-profile-b-9e02"
	t.Setenv("AGENTMESH_TEST_KEY_A", keyA)
	t.Setenv("AGENTMESH_TEST_KEY_B", keyB)
	srvA, err := replay.Start("../../testdata/remote/openai")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srvA.Close() })
	srvB, err := replay.Start("../../testdata/remote/openai")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srvB.Close() })
	const pricing = "pricing: {input: \"1.25\", output: \"10\", cache_read: \"0.125\", reasoning: \"10\"}\n"
	profile := func(name, model string, srv *replay.Server, env string) string {
		return fmt.Sprintf("schema: 1\nname: %s\nadapter: openai\ntransport: remote\nmodel: %s\nbase_url: %s/text\nallow_loopback: true\ncredential_env: %s\n%s",
			name, model, srv.URL(), env, pricing)
	}
	// openai-a sorts first: it is the profile whose settings every openai
	// run used before each profile had its own instance.
	c := profilesMesh(t, map[string]string{
		"openai-a.yaml": profile("openai-a", "gpt-5.5", srvA, "AGENTMESH_TEST_KEY_A"),
		"openai-b.yaml": profile("openai-b", "gpt-5.4", srvB, "AGENTMESH_TEST_KEY_B"),
	})
	run := func(profileName, conversation string) {
		t.Helper()
		r := runReq(t, map[string]any{"prompt": "hi"})
		r.Profile, r.Conversation = profileName, conversation
		_, evs := clienttest.Run(t, c, r)
		if st := last(evs); st.State != wire.StateSucceeded {
			t.Fatalf("%s: %s %v", profileName, describe(evs), st.Error)
		}
	}
	// check asserts what each server has received: every request with its
	// own profile's credential and model, and how many.
	check := func(wantA, wantB int) {
		t.Helper()
		for _, s := range []struct {
			name       string
			srv        *replay.Server
			key, model string
			want       int
		}{{"A", srvA, keyA, "gpt-5.5", wantA}, {"B", srvB, keyB, "gpt-5.4", wantB}} {
			reqs := s.srv.Requests()
			if len(reqs) != s.want {
				t.Fatalf("server %s received %d requests, want %d", s.name, len(reqs), s.want)
			}
			for i, r := range reqs {
				if got := r.Header.Get("Authorization"); got != "Bearer "+s.key {
					t.Errorf("server %s request %d: Authorization %q, want its own profile's credential", s.name, i, got)
				}
				if !strings.Contains(string(r.Body), `"model":"`+s.model+`"`) {
					t.Errorf("server %s request %d: body %s, want model %s", s.name, i, r.Body, s.model)
				}
			}
		}
	}
	run("openai-b", "")
	check(0, 1)
	run("openai-a", "")
	check(1, 1)
	// The conversation is pinned to openai-b by its first run; the second
	// names openai-a, resolves to the same provider and so runs on the
	// pinned profile, with its settings.
	run("openai-b", "conv-1")
	check(1, 2)
	run("openai-a", "conv-1")
	check(1, 3)
}

// profilesMesh runs the mesh on the profile documents files (name → body)
// with every adapter they name, and returns a client of it.
func profilesMesh(t *testing.T, files map[string]string) *client.Client {
	t.Helper()
	return catalogMesh(t, files, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
}

// catalogMesh runs a mesh on a new server with the profiles of files (a
// file name to its YAML) and the adapters the catalog builds for them,
// logging to log and registering its metrics in reg, and returns a client
// of it.
func catalogMesh(t *testing.T, files map[string]string, log *slog.Logger, reg *prometheus.Registry) *client.Client {
	t.Helper()
	return newClient(t, catalogServer(t, files, log, reg))
}

// catalogServer is catalogMesh's mesh, returning its server.
func catalogServer(t *testing.T, files map[string]string, log *slog.Logger, reg *prometheus.Registry) *server.Server {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ac := catalog.Dirs{ProfilesDir: dir, FixtureDir: "../../testdata/fixture", WorkspaceRoot: t.TempDir()}
	profiles, err := ac.Profiles()
	if err != nil {
		t.Fatal(err)
	}
	adapters, err := ac.Registry(profiles)
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, srv)
	d := service.Deps{NC: nc, JS: js, Log: log, Metrics: service.NewMetrics(reg), Health: &service.Health{}}
	meshtest.Serve(t, d, profiles, adapters, mesh.Config{}, 30*time.Second)
	return srv
}
