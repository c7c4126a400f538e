package mesh_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestMeshThroughTLSAndCredentials: on a server that takes only TLS connections
// with a client certificate of its CA and an nkey user, or a user JWT of
// the one account its operator signed (a .creds file), every service
// connects as a service binary does (service.Start and, for each of
// router, runner, sweeper and exporter, a connection of its own through
// service.ConnectConfig, all configured by the AGENTMESH_NATS_* variables),
// and a run goes through end to end. A service missing its credential or
// its client certificate, or with another user's, fails to start with the
// server's reason.
func TestMeshThroughTLSAndCredentials(t *testing.T) {
	t.Run("nkey", func(t *testing.T) {
		srv, sec := natstest.RunSecure(t)
		meshThrough(t, srv.ClientURL(), sec, "AGENTMESH_NATS_NKEY", sec.Seed, sec.StrangerSeed)
	})
	t.Run("creds", func(t *testing.T) {
		srv, op := natstest.RunOperator(t)
		meshThrough(t, srv.ClientURL(), op.Secure, "AGENTMESH_NATS_CREDS", op.Creds, op.StrangerCreds)
	})
}

// meshThrough runs the mesh on url with the TLS files of sec and the
// credential file credFile in variable credVar; strangerFile is another
// user's credential.
func meshThrough(t *testing.T, url string, sec natstest.Secure, credVar, credFile, strangerFile string) {
	t.Helper()
	env := servicetest.SecureEnv(sec) // its nkey, if any, replaced:
	delete(env, "AGENTMESH_NATS_NKEY")
	env[credVar], env["AGENTMESH_HTTP_ADDR"] = credFile, ""
	cfg := servicetest.LoadSpec[service.Config](t, url, env)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	for _, bad := range []struct {
		name string
		cfg  func(service.Config) service.Config
		want string
	}{
		{"no credential", func(c service.Config) service.Config { c.NatsNkey, c.NatsCreds = "", ""; return c }, "Authorization Violation"},
		{"another user's", func(c service.Config) service.Config {
			if c.NatsNkey != "" {
				c.NatsNkey = strangerFile
			} else {
				c.NatsCreds = strangerFile
			}
			return c
		}, "Authorization Violation"},
		{"no client certificate", func(c service.Config) service.Config { c.NatsTLSCert, c.NatsTLSKey = "", ""; return c }, "tls"},
	} {
		if infra, err := service.Start(context.Background(), "agentmesh-router", bad.cfg(cfg), log); err == nil {
			infra.Close()
			t.Fatalf("%s: service.Start connected", bad.name)
		} else if !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("%s: service.Start = %v, want an error holding %q", bad.name, err, bad.want)
		}
	}

	ctx := context.Background()
	infra, err := service.Start(ctx, "agentmesh-test", cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := infra.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	adapters, err := catalog.Dirs{}.Registry(profile.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // Connect runs on the mesh's goroutine
	services := map[string]bool{}
	meshtest.Serve(t, infra.Deps, profile.Builtin(), adapters, mesh.Config{
		Topology: cfg.Topology(),
		Connect: func(name string) (service.Deps, error) {
			mu.Lock()
			services[name] = true
			mu.Unlock()
			nc, js, err := service.ConnectConfig(cfg, "agentmesh-"+name, log)
			return service.Deps{NC: nc, JS: js}, err
		},
	}, 20*time.Second)

	nc, _, err := service.ConnectConfig(cfg, "test-client", log)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !nc.TLSRequired() {
		t.Fatal("the client's connection is not TLS")
	}
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	req, err := wire.Marshal(map[string]any{"prompt": "through TLS and an nkey"})
	if err != nil {
		t.Fatal(err)
	}
	_, evs := clienttest.Run(t, c, wire.RunRequest{Tenant: "acme", Principal: "p", Profile: "fixture", Request: req})
	if st := evs[len(evs)-1].Status; st == nil || st.State != wire.StateSucceeded {
		t.Fatalf("run: %s, want succeeded", clienttest.Describe(evs))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"router", "runner", "sweeper", "exporter"} {
		if !services[name] {
			t.Errorf("%s did not connect on its own connection", name)
		}
	}
}
