package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/exporter"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The configuration under test, relative to this package.
const clusterConf = "../nats/cluster.conf"

const tenant = "acme"

// tenantAPIPrefix is where accounts.conf imports the mesh's JetStream API
// into a tenant's account.
const tenantAPIPrefix = "$JS.agentmesh.API"

// users are the NATS users of accounts.conf and the variables holding their
// passwords.
var users = map[string]string{
	"router":      "NATS_ROUTER_PASSWORD",
	"runner":      "NATS_RUNNER_PASSWORD",
	"sweeper":     "NATS_SWEEPER_PASSWORD",
	"exporter":    "NATS_EXPORTER_PASSWORD",
	"gateway":     "NATS_GATEWAY_PASSWORD",
	"tenant-acme": "NATS_TENANT_ACME_PASSWORD",
	"ops":         "NATS_OPS_PASSWORD",
}

// serverName is the name in the test server's certificate, the client
// Service's name in deploy/k8s; clients dial 127.0.0.1 and name it.
const serverName = "nats-client.agentmesh.svc"

// mesh is a running server, the users' passwords and the TLS files every
// client presents (the services' AGENTMESH_NATS_TLS_* variables).
type mesh struct {
	srv       *server.Server
	passwords map[string]string
	tls       natstest.TLSFiles
	auth      service.NATSAuth
}

// authEnv is m.auth as the variables a service or the agentmesh command
// reads it from.
func (m *mesh) authEnv() []string {
	v := service.NATSAuthVariables
	return []string{v.NatsTLSCa + "=" + m.auth.NatsTLSCa, v.NatsTLSCert + "=" + m.auth.NatsTLSCert,
		v.NatsTLSKey + "=" + m.auth.NatsTLSKey, v.NatsTLSServerName + "=" + m.auth.NatsTLSServerName}
}

// startServer loads cluster.conf with the environment a node gets, then
// turns it into one loopback node: the account, users and permissions are
// the file's, unchanged.
func startServer(t *testing.T) *mesh {
	t.Helper()
	m := &mesh{passwords: map[string]string{}}
	for user, env := range users {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		m.passwords[user] = hex.EncodeToString(b)
		t.Setenv(env, m.passwords[user])
	}
	m.tls = natstest.WriteTLS(t, serverName)
	m.auth = service.NATSAuth{NatsTLSCa: m.tls.CA, NatsTLSCert: m.tls.ClientCert, NatsTLSKey: m.tls.ClientKey, NatsTLSServerName: serverName}
	t.Setenv("NATS_TLS_CERT", m.tls.ServerCert)
	t.Setenv("NATS_TLS_KEY", m.tls.ServerKey)
	t.Setenv("NATS_TLS_CA", m.tls.CA)
	store := t.TempDir()
	t.Setenv("NATS_SERVER_NAME", "deploytest")
	t.Setenv("NATS_STORE_DIR", store)
	for i := 1; i <= 3; i++ {
		t.Setenv(fmt.Sprintf("NATS_ROUTE_%d", i), fmt.Sprintf("nats://nats-%d.invalid:6222", i-1))
	}
	opts, err := server.ProcessConfigFile(clusterConf)
	if err != nil {
		t.Fatalf("load %s: %v", clusterConf, err)
	}
	addObserver(t, m, opts)
	if opts.TLSConfig == nil || opts.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("%s: no TLS block verifying client certificates", clusterConf)
	}
	if opts.Cluster.Name != "agentmesh" || len(opts.Routes) != 3 || opts.StoreDir != store || !opts.JetStream {
		t.Fatalf("%s: cluster %q with %d routes, store %q, jetstream %v; want a three-route JetStream cluster node", clusterConf, opts.Cluster.Name, len(opts.Routes), opts.StoreDir, opts.JetStream)
	}
	// One node on loopback: no cluster, no routes, no monitoring port.
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.HTTPHost, opts.HTTPPort = "", 0
	opts.Cluster = server.ClusterOpts{}
	opts.Routes, opts.RoutesStr = nil, ""
	opts.NoSigs = true
	opts.NoLog = os.Getenv("DEPLOYTEST_SERVER_LOG") == ""
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	if !opts.NoLog {
		s.ConfigureLogger()
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	m.srv = s
	return m
}

// observer is a user the test adds to the mesh's account, with no
// permission limits, to watch subjects no service of the mesh subscribes
// to (another tenant's submit subject) and to inspect consumers.
// tenantObserver is one it adds to tenant acme's account, with no
// permission limits either, to see what the account's imports alone let
// through. Neither is part of deploy/nats; every other user is the
// file's, unchanged.
const (
	observer       = "observer"
	tenantObserver = "tenant-observer"
)

func addObserver(t *testing.T, m *mesh, opts *server.Options) {
	t.Helper()
	for user, account := range map[string]string{observer: "AGENTMESH", tenantObserver: "TENANT_" + strings.ToUpper(tenant)} {
		var acc *server.Account
		for _, a := range opts.Accounts {
			if a.Name == account {
				acc = a
			}
		}
		if acc == nil {
			t.Fatalf("%s: no account %s", clusterConf, account)
		}
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		m.passwords[user] = hex.EncodeToString(b)
		opts.Users = append(opts.Users, &server.User{Username: user, Password: m.passwords[user], Account: acc})
	}
}

// url is the server's client URL carrying user's credentials, the form
// AGENTMESH_NATS_URL takes in deploy/k8s.
func (m *mesh) url(user string) string {
	u, err := url.Parse(m.srv.ClientURL())
	if err != nil {
		panic(err)
	}
	u.User = url.UserPassword(user, m.passwords[user])
	return u.String()
}

// asyncErrs records the asynchronous errors of a connection: a publish or
// subscription the server refused arrives here.
type asyncErrs struct {
	mu   sync.Mutex
	errs []error
}

func (a *asyncErrs) handler(_ *nats.Conn, sub *nats.Subscription, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if sub != nil {
		err = fmt.Errorf("subscription %s: %w", sub.Subject, err)
	}
	a.errs = append(a.errs, err)
}

func (a *asyncErrs) take() []error {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.errs
	a.errs = nil
	return out
}

// connect dials as user. Every connection's asynchronous errors are
// returned; a service connection must end the test with none.
func (m *mesh) connect(t *testing.T, user string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, *asyncErrs) {
	t.Helper()
	errs := &asyncErrs{}
	auth, err := m.auth.Options(service.NATSAuthVariables)
	if err != nil {
		t.Fatal(err)
	}
	opts = slices.Concat([]nats.Option{nats.Name("deploytest-" + user), nats.ErrorHandler(errs.handler)}, auth, opts)
	nc, err := nats.Connect(m.url(user), opts...)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, errs
}

func logger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func deps(nc *nats.Conn, js jetstream.JetStream) service.Deps {
	return service.Deps{
		NC: nc, JS: js, Log: logger(),
		Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{},
	}
}

// runService runs run until the test ends and checks it returned cleanly.
func runService(t *testing.T, name string, run func(context.Context) error) {
	t.Helper()
	meshtest.Go(t, name, 30*time.Second, run)
}

// startMesh runs the router, a runner host with the fixture adapter, the
// sweeper, the exporter and the HTTP gateway, each on its own user, with
// trajectory export enabled as the operator enables it
// (AGENT_TRAJECTORY_EXPORT_ENABLED=1, read by each service as services/*
// read it), and puts the records of their connections' asynchronous
// errors in errs. It returns the gateway's base URL (plain HTTP on
// loopback).
func startMesh(t *testing.T, m *mesh, errs map[string]*asyncErrs) (gatewayURL string) {
	t.Helper()
	ctx := context.Background()
	topo := topology.Config{LeaseTTL: 2 * time.Second}
	t.Setenv(exports.EnvEnabled, "1")
	export, err := exports.LoadSettings(os.LookupEnv)
	if err != nil || !export.Enabled || export.ArtifactRoot != "" {
		t.Fatalf("export settings %+v, %v; want enabled, in the object store", export, err)
	}

	// The router starts first and creates the topology.
	rnc, rjs, rerrs := m.connect(t, "router")
	errs["router"] = rerrs
	if err := topology.Ensure(ctx, rjs, topo); err != nil {
		t.Fatalf("topology as router: %v", err)
	}
	profiles := meshProfiles(t, startModelAPI(t))
	adapters, err := catalog.Dirs{FixtureDir: "../../testdata/fixture"}.Registry(profiles)
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.New(ctx, deps(rnc, rjs), profiles, adapters, router.Config{ExportEnabled: export.Enabled})
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	runService(t, "router", r.Run)

	// Every other service ensures the topology too (an update of what
	// exists), as service.Start does.
	nnc, njs, nerrs := m.connect(t, "runner")
	errs["runner"] = nerrs
	if err := topology.Ensure(ctx, njs, topo); err != nil {
		t.Fatalf("topology as runner: %v", err)
	}
	h, err := runner.New(ctx, deps(nnc, njs), adapters, runner.Config{ID: "runner-1"})
	if err != nil {
		t.Fatalf("runner: %v", err)
	}
	runService(t, "runner", h.Run)

	snc, sjs, serrs := m.connect(t, "sweeper")
	errs["sweeper"] = serrs
	if err := topology.Ensure(ctx, sjs, topo); err != nil {
		t.Fatalf("topology as sweeper: %v", err)
	}
	sweptBytes, err := exporter.OpenStore(ctx, sjs, subject.Names{}, export)
	if err != nil {
		t.Fatalf("sweeper: %v", err)
	}
	// Exports are swept at start and then on request only (the test's
	// `agentmesh exports sweep`), so that request's counts are its own.
	sw, err := sweeper.New(ctx, deps(snc, sjs), sweeper.Config{ReconcileEvery: time.Second,
		Exports: &sweeper.ExportsConfig{Store: sweptBytes, Every: time.Hour}})
	if err != nil {
		t.Fatalf("sweeper: %v", err)
	}
	runService(t, "sweeper", sw.Run)

	// The exporter as services/exporter runs it: service.Start dials
	// AGENTMESH_NATS_URL with the credentials in the URL and ensures the
	// topology, then the exporter opens the object store and runs (it
	// registers with micro itself).
	cfg := service.Config{NatsURL: m.url("exporter"), NATSAuth: m.auth, ShutdownTimeout: 5 * time.Second, Replicas: 1,
		EventsMaxAge: 24 * time.Hour, WorkQueueMax: 1024, LeaseTTL: 2 * time.Second}
	infra := startInfra(t, ctx, "exporter", cfg, errs)
	store, err := exporter.OpenStore(ctx, infra.Deps.JS, infra.Deps.Names, export)
	if err != nil {
		t.Fatalf("exporter: %v", err)
	}
	x, err := exporter.New(ctx, infra.Deps, store, exporter.Config{Retention: export.Retention, Workers: 2})
	if err != nil {
		t.Fatalf("exporter: %v", err)
	}
	runService(t, "exporter", x.Run)

	// The gateway as services/gateway runs it: service.Start on its own
	// user, gateway.Open on the service's deps (the key and turn stores, a
	// client on its connection), then Serve, which registers with micro.
	// Its models are the router's profiles.
	gcfg := cfg
	gcfg.NatsURL = m.url("gateway")
	ginfra := startInfra(t, ctx, "gateway", gcfg, errs)
	g, err := gateway.Open(ctx, ginfra.Deps, profiles, gateway.Config{Addr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runService(t, "gateway", func(ctx context.Context) error { return g.Serve(ctx, ln) })
	return "http://" + ln.Addr().String()
}

// meshProfiles are the mesh's models: the built-in fixture and "oa", the
// openai adapter (a remote profile, so one the gateway keeps conversations
// of) against the model API at modelURL.
func meshProfiles(t *testing.T, modelURL string) *profile.Registry {
	t.Helper()
	profiles, err := profile.New(
		profile.Profile{Name: "fixture", Adapter: "fixture", Transport: wire.TransportInProcess, Model: "fixture-1",
			Pricing: map[string]string{"input": "0", "output": "0"}},
		profile.Profile{Name: "oa", Adapter: "openai", Transport: wire.TransportRemote, Model: "gpt-5.5",
			BaseURL: modelURL, AllowLoopback: true, Pricing: map[string]string{"input": "1.25", "output": "10", "cache_read": "0.125", "reasoning": "10"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return profiles
}

// startInfra is service.Start for service name (agentmesh-<name>) as its
// binary runs it, its connection's asynchronous errors in errs[name]. Its
// close is registered first, so it runs after the service has stopped.
func startInfra(t *testing.T, ctx context.Context, name string, cfg service.Config, errs map[string]*asyncErrs) *service.Infra {
	t.Helper()
	infra, err := service.Start(ctx, "agentmesh-"+name, cfg, logger())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	e := &asyncErrs{}
	infra.Deps.NC.SetErrorHandler(e.handler)
	errs[name] = e
	t.Cleanup(func() {
		if err := infra.Close(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	})
	return infra
}

// noConsumersLeft waits until none of streams has a consumer, as seen by
// the observer user: a list or an object read ends by deleting its
// ordered consumer, a request of its own that on a loaded machine can
// land seconds later (make test on a fresh clone saw one left after 2 s).
func (m *mesh) noConsumersLeft(ctx context.Context, t *testing.T, after string, streams ...string) {
	t.Helper()
	_, ojs, _ := m.connect(t, observer)
	for _, stream := range streams {
		st, err := ojs.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		natstest.Eventually(t, 10*time.Second, func() error {
			info, err := st.Info(ctx)
			if err != nil {
				return err
			}
			if info.State.Consumers != 0 {
				return fmt.Errorf("%s: %d consumers left after %s, want 0", stream, info.State.Consumers, after)
			}
			return nil
		})
	}
}

// jsonLines decodes out, a command's output of one JSON value a line.
func jsonLines[T any](t *testing.T, command string, out []byte) []T {
	t.Helper()
	var vs []T
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%s line %q: %v", command, line, err)
		}
		vs = append(vs, v)
	}
	return vs
}

// startModelAPI serves the recorded OpenAI Responses tool round trip
// (testdata/remote/openai/tool-roundtrip.json) until the test ends: a
// request holding a function_call_output gets the answer, any other the
// tool call. It returns the API's base URL.
func startModelAPI(t *testing.T) string {
	t.Helper()
	rec, err := replay.Load("../../testdata/remote/openai/tool-roundtrip.json")
	if err != nil || len(rec) != 2 {
		t.Fatalf("tool-roundtrip.json: %v, %d responses, want 2", err, len(rec))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		resp := rec[0]
		if bytes.Contains(b, []byte(`"function_call_output"`)) {
			resp = rec[1]
		}
		resp.Write(w)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// randomRunReq is a fixture run of principal alice, who never grants
// export consent.
func randomRunReq(t *testing.T, tenantName string, req map[string]any) wire.RunRequest {
	t.Helper()
	return runReqOf(t, tenantName, "alice", req)
}

func runReqOf(t *testing.T, tenantName, principal string, req map[string]any) wire.RunRequest {
	t.Helper()
	b, err := wire.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return wire.RunRequest{RunID: client.NewRunID(), Tenant: tenantName, Principal: principal, Profile: "fixture", Request: b}
}

// isPermissionError reports whether err is the server refusing a publish
// or subscription, or a JetStream API request refused for lack of
// permission.
func isPermissionError(err error) bool {
	return errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(strings.ToLower(fmt.Sprint(err)), "permissions violation")
}

// waitAsyncPermission waits for the server's refusal of a publish or
// subscription (op) on a subject starting with subj to reach errs.
func waitAsyncPermission(t *testing.T, errs *asyncErrs, op, subj string) {
	t.Helper()
	want := strings.ToLower(op) + ` to "` + strings.ToLower(subj)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, err := range errs.take() {
			if isPermissionError(err) && strings.Contains(strings.ToLower(err.Error()), want) {
				return
			}
			t.Logf("other async error: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no permission violation for %s to %s", op, subj)
}

// checkedServiceErrs is where startMesh puts the records of the services'
// connections' asynchronous errors, each checked to hold none as the test
// ends. Called before the services start (cleanups run last-in
// first-out), it checks once they have stopped: nothing any service did,
// start-up to shutdown, was refused.
func checkedServiceErrs(t *testing.T) map[string]*asyncErrs {
	serviceErrs := map[string]*asyncErrs{}
	t.Cleanup(func() {
		for name, e := range serviceErrs {
			for _, err := range e.take() {
				t.Errorf("%s connection: %v", name, err)
			}
		}
	})
	return serviceErrs
}

func TestDeployPermissions(t *testing.T) {
	m := startServer(t)
	serviceErrs := checkedServiceErrs(t)
	gatewayURL := startMesh(t, m, serviceErrs)

	// A bound for a hung check, not a timing: the subtests below share it,
	// with the build of cmd/agentmesh on a cold cache among them.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tnc, tjs, terrs := m.connect(t, "tenant-acme", nats.CustomInboxPrefix(client.InboxPrefix(tenant)))
	c, err := client.New(tnc, subject.Names{}, client.WithAPIPrefix(tenantAPIPrefix))
	if err != nil {
		t.Fatal(err)
	}
	// The tenant's JetStream is the mesh's, imported under tenantAPIPrefix;
	// defaultJS asks under the usual $JS.API.
	defaultJS := tjs
	if tjs, err = jetstream.NewWithAPIPrefix(tnc, tenantAPIPrefix); err != nil {
		t.Fatal(err)
	}

	// The agentmesh binary, built once for the subtests that run it.
	binDir := t.TempDir()
	agentmeshBin := sync.OnceValues(func() (string, error) {
		bin := filepath.Join(binDir, "agentmesh")
		if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/agentmesh").CombinedOutput(); err != nil {
			return "", fmt.Errorf("build cmd/agentmesh: %v\n%s", err, out)
		}
		return bin, nil
	})

	t.Run("a client without TLS or without a certificate of the CA is refused", func(t *testing.T) {
		strangerCert, strangerKey := natstest.StrangerCert(t)
		for _, tc := range []struct {
			name string
			auth service.NATSAuth
			want string
		}{
			{"no TLS", service.NATSAuth{}, "tls: failed to verify certificate"},
			{"no client certificate", service.NATSAuth{NatsTLSCa: m.tls.CA, NatsTLSServerName: serverName}, "tls"},
			{"another CA's certificate", service.NATSAuth{NatsTLSCa: m.tls.CA, NatsTLSCert: strangerCert, NatsTLSKey: strangerKey, NatsTLSServerName: serverName}, "tls"},
		} {
			opts, err := tc.auth.Options(service.NATSAuthVariables)
			if err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect(m.url("tenant-acme"), opts...)
			if err == nil {
				nc.Close()
				t.Fatalf("%s: connected as tenant-acme", tc.name)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: %v, want an error holding %q", tc.name, err, tc.want)
			}
		}
	})

	t.Run("tenant runs to the end", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		id, err := c.Submit(ctx, randomRunReq(t, tenant, map[string]any{"prompt": "hi"}))
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		var states []string
		for ev, err := range c.Events(ctx, tenant, id, 1) {
			if err != nil {
				t.Fatalf("events: %v (after %v)", err, states)
			}
			if ev.Kind == wire.KindStatus {
				states = append(states, string(ev.Status.State))
			}
		}
		if got := strings.Join(states, " "); got != "accepted routed running succeeded" {
			t.Fatalf("states = %s", got)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			rec, err := c.Status(ctx, tenant, id)
			if err != nil {
				t.Fatalf("status: %v", err)
			}
			if rec.State == wire.StateSucceeded {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("record state %s, want succeeded", rec.State)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	t.Run("tenant follows its runs through one consumer", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		// One run before the follower exists: its iterator reads its
		// history on a consumer of its own, through the proxy too.
		before, err := c.Submit(ctx, randomRunReq(t, tenant, map[string]any{"prompt": "before"}))
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		if st, err := c.Wait(ctx, tenant, before); err != nil || st.State != wire.StateSucceeded {
			t.Fatalf("wait = %+v, %v", st, err)
		}
		tf, err := c.FollowTenant(ctx, tenant)
		if err != nil {
			t.Fatalf("follow tenant %s through the proxy: %v", tenant, err)
		}
		defer func() { _ = tf.Close() }()
		states := func(evs iter.Seq2[wire.Event, error]) string {
			var got []string
			for ev, err := range evs {
				if err != nil {
					t.Fatalf("events: %v (after %v)", err, got)
				}
				if ev.Kind == wire.KindStatus {
					got = append(got, string(ev.Status.State))
				}
			}
			return strings.Join(got, " ")
		}
		var ids []string
		var evs []iter.Seq2[wire.Event, error]
		for range 3 {
			req := randomRunReq(t, tenant, map[string]any{"prompt": "hi"})
			req.RunID = ""
			id, e, err := tf.Start(ctx, req)
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			ids, evs = append(ids, id), append(evs, e)
		}
		for i, e := range evs {
			if got := states(e); got != "accepted routed running succeeded" {
				t.Errorf("run %s: states %s", ids[i], got)
			}
		}
		if got := states(tf.Events(ctx, before, 1)); got != "accepted routed running succeeded" {
			t.Errorf("run %s, from before the follower: states %s", before, got)
		}
		// Another tenant's events are out of reach of a tenant follower.
		terrs.take()
		denied(t, terrs, tenantAPIPrefix+".CONSUMER.CREATE.AGENTMESH_EVENTS.", func(ctx context.Context) error {
			other, err := c.FollowTenant(ctx, "other")
			if err == nil {
				_ = other.Close()
			}
			return err
		})
	})

	t.Run("tenant cancels a running run", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		id, err := c.Submit(ctx, randomRunReq(t, tenant, map[string]any{"prompt": "slow", "delay_ms": 200}))
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		var last wire.Status
		for ev, err := range c.Events(ctx, tenant, id, 1) {
			if err != nil {
				t.Fatalf("events: %v", err)
			}
			if ev.Kind == wire.KindStatus {
				last = *ev.Status
			}
			if ev.Kind == wire.KindChunk && ev.Seq == 4 {
				// Running, after its first chunk: the router forwards the
				// cancel to the runner that owns the run. (Not at the
				// running status: a cancel that lands while the runner
				// still awaits that status's acknowledgement can leave the
				// run without a terminal status — a pkg/runner race, see
				// deploy/README.md.)
				// Its status, through the tenant's own imports, is its
				// last event's: running, held by the runner, with output.
				rec, err := c.Status(ctx, tenant, id)
				if err != nil || rec.State != wire.StateRunning || rec.Owner == "" || !rec.Committed {
					t.Fatalf("status while running = %+v, %v; want running, an owner, committed", rec, err)
				}
				reply, err := c.Cancel(ctx, tenant, id)
				if err != nil || !reply.Cancelled {
					t.Fatalf("cancel = %+v, %v", reply, err)
				}
			}
		}
		if last.State != wire.StateCancelled {
			t.Fatalf("terminal state %s, want cancelled", last.State)
		}
		rec, err := c.Status(ctx, tenant, id)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		if rec.State != wire.StateCancelled {
			t.Fatalf("record state %s, want cancelled", rec.State)
		}
	})

	t.Run("tenant cancels a queued run", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		// Keep the runner busy (max_active 1), then cancel the next run
		// while it waits: the router ends it itself.
		busy, err := c.Submit(ctx, randomRunReq(t, tenant, map[string]any{"prompt": "busy", "delay_ms": 300}))
		if err != nil {
			t.Fatal(err)
		}
		clienttest.WaitForOutput(ctx, t, c, tenant, busy) // the runner's one slot is taken
		id, err := c.Submit(ctx, randomRunReq(t, tenant, map[string]any{"prompt": "queued"}))
		if err != nil {
			t.Fatal(err)
		}
		clienttest.WaitForRouted(ctx, t, c, tenant, id)
		if reply, err := c.Cancel(ctx, tenant, id); err != nil || !reply.Cancelled || reply.State != wire.StateCancelled {
			t.Fatalf("cancel = %+v, %v", reply, err)
		}
		if st, err := c.Wait(ctx, tenant, id); err != nil || st.State != wire.StateCancelled {
			t.Fatalf("wait = %+v, %v", st, err)
		}
		if st, err := c.Wait(ctx, tenant, busy); err != nil || st.State != wire.StateSucceeded {
			t.Fatalf("busy run: %+v, %v", st, err)
		}
	})

	t.Run("the agentmesh CLI runs, reads and cancels as the tenant", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		bin, err := agentmeshBin()
		if err != nil {
			t.Fatal(err)
		}
		// Only what a tenant's operator sets: the URL with the tenant's
		// credentials, the tenant and the API prefix of its account; the
		// inbox prefix defaults to _INBOX_acme.
		env := append(append(os.Environ(), m.authEnv()...), "AGENTMESH_NATS_URL="+m.url("tenant-acme"), "AGENTMESH_TENANT="+tenant,
			"AGENTMESH_JS_API_PREFIX="+tenantAPIPrefix, "AGENTMESH_INBOX_PREFIX=", "AGENTMESH_PREFIX=")
		cli := func(args ...string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = env
			return cmd
		}
		states := func(out []byte) []string {
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				var ev wire.Event
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("run output %q: %v", line, err)
				}
				if ev.Kind == wire.KindStatus {
					got = append(got, string(ev.Status.State))
				}
			}
			return got
		}

		id := client.NewRunID()
		out, err := cli("run", "-p", "fixture", "--json", "--run-id", id, "hi").Output()
		if err != nil {
			t.Fatalf("agentmesh run: %v\n%s", err, out)
		}
		if got := strings.Join(states(out), " "); got != "accepted routed running succeeded" {
			t.Fatalf("agentmesh run: states %s", got)
		}
		out, err = cli("status", "--json", id).Output()
		if err != nil {
			t.Fatalf("agentmesh status: %v\n%s", err, out)
		}
		var rec wire.RunRecord
		if err := json.Unmarshal(out, &rec); err != nil || rec.State != wire.StateSucceeded {
			t.Fatalf("agentmesh status: %v %s", err, out)
		}

		// A slow run, cancelled from a second CLI once its first chunk is out.
		slow := client.NewRunID()
		run := cli("run", "-p", "fixture", "--json", "--run-id", slow, "--delay-ms", "200", "slow")
		stdout, err := run.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		var seen []string
		for lines.Scan() {
			var ev wire.Event
			if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
				t.Fatalf("run output %q: %v", lines.Text(), err)
			}
			if ev.Kind == wire.KindStatus {
				seen = append(seen, string(ev.Status.State))
			}
			if ev.Kind == wire.KindChunk && len(seen) > 0 && seen[len(seen)-1] == "running" {
				if out, err := cli("cancel", slow).CombinedOutput(); err != nil || !strings.Contains(string(out), "cancelled run "+slow) {
					t.Errorf("agentmesh cancel: %v %s", err, out)
				}
				seen = append(seen, "(cancel)")
			}
		}
		err = run.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("agentmesh run of a cancelled run: %v, want exit 1", err)
		}
		if len(seen) == 0 || seen[len(seen)-1] != "cancelled" {
			t.Fatalf("agentmesh run: states %v, want the last cancelled", seen)
		}
		// A tenant other than the user's is refused with a clear error.
		out, err = cli("status", "--tenant", "other", id).CombinedOutput()
		if err == nil {
			t.Fatalf("agentmesh status as another tenant succeeded: %s", out)
		}
		t.Logf("status as another tenant: %s", bytes.TrimSpace(out))
	})

	t.Run("micro discovers every service", func(t *testing.T) {
		// Services may answer $SRV requests, not ask them: the ops user
		// asks, as `nats micro ls --inbox-prefix _INBOX_ops` would.
		nc, _, errs := m.connect(t, "ops", nats.CustomInboxPrefix("_INBOX_ops"))
		defer func() {
			for _, err := range errs.take() {
				t.Errorf("ops connection: %v", err)
			}
		}()
		found := map[string]bool{}
		sub, err := nc.SubscribeSync(nc.NewRespInbox())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := nc.PublishRequest("$SRV.PING", sub.Subject, nil); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(found) < 5 && time.Now().Before(deadline) {
			msg, err := sub.NextMsg(time.Until(deadline))
			if err != nil {
				break
			}
			var ping micro.Ping
			if err := json.Unmarshal(msg.Data, &ping); err == nil {
				found[ping.Name] = true
			}
		}
		for _, name := range []string{"agentmesh-router", "agentmesh-runner", "agentmesh-sweeper", "agentmesh-exporter", "agentmesh-gateway"} {
			if !found[name] {
				t.Errorf("%s did not answer $SRV.PING (found %v)", name, found)
			}
		}
	})

	t.Run("a consented run is exported, read and swept by the operator", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		bin, err := agentmeshBin()
		if err != nil {
			t.Fatal(err)
		}
		ops, mustOps := m.opsCLI(ctx, t, bin)
		listed := func(args ...string) []wire.ExportRecord {
			t.Helper()
			return jsonLines[wire.ExportRecord](t, "exports list", mustOps(append([]string{"exports", "list", "--json"}, args...)...))
		}

		const principal = "carol"
		if out := mustOps("consent", "grant", "--principal", principal); !strings.Contains(string(out), "acme/carol: granted") {
			t.Fatalf("consent grant: %s", out)
		}
		if out := mustOps("consent", "show", "--principal", principal); !strings.Contains(string(out), "granted") {
			t.Fatalf("consent show: %s", out)
		}
		rules := filepath.Join(t.TempDir(), "rules.yaml")
		if err := os.WriteFile(rules, []byte("- name: ticket\n  pattern: 'TICKET-[0-9]{6}'\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		mustOps("redaction", "set", "--file", rules)
		if out := mustOps("redaction", "show"); !strings.Contains(string(out), "TICKET-[0-9]{6}") {
			t.Fatalf("redaction show: %s", out)
		}
		// The spend ledger and the limits: ops reads the spend and sets a
		// principal's budget (one no run reaches) and the tenant's quota.
		mustOps("budget", "set", "--principal", "dave", "--amount", "1000", "--period", "month")
		if out := mustOps("budget", "show", "--principal", "dave"); !strings.Contains(string(out), "1000 USD a month") {
			t.Fatalf("budget show: %s", out)
		}
		mustOps("quota", "set", "--max-running", "100")
		mustOps("spend", "--by", "day", "--json")

		// One run of the granted principal, one of alice (never granted).
		const secret = "AKIAIOSFODNN7EXAMPLE" // an AWS access key id: a built-in detector
		id, err := c.Submit(ctx, runReqOf(t, tenant, principal, map[string]any{"prompt": "deploy with " + secret}))
		if err != nil {
			t.Fatal(err)
		}
		if st, err := c.Wait(ctx, tenant, id); err != nil || st.State != wire.StateSucceeded {
			t.Fatalf("wait = %+v, %v", st, err)
		}
		other, err := c.Submit(ctx, randomRunReq(t, tenant, map[string]any{"prompt": "hi"}))
		if err != nil {
			t.Fatal(err)
		}
		if st, err := c.Wait(ctx, tenant, other); err != nil || st.State != wire.StateSucceeded {
			t.Fatalf("wait = %+v, %v", st, err)
		}

		// The exporter exports carol's run, and only hers.
		natstest.Eventually(t, 20*time.Second, func() error {
			for _, r := range listed() {
				if r.RunID == id && r.Stored {
					return nil
				}
			}
			return fmt.Errorf("no stored export of run %s", id)
		})
		for _, all := range [][]string{nil, {"--all"}} {
			recs := listed(all...)
			if len(recs) != 1 || recs[0].RunID != id || recs[0].Principal != principal || recs[0].Tenant != tenant {
				t.Fatalf("exports list %v = %+v, want only run %s of %s", all, recs, id, principal)
			}
		}
		data := mustOps("exports", "get", id)
		var traj struct {
			RunID     string         `json:"run_id"`
			Principal string         `json:"principal"`
			Redaction map[string]any `json:"redaction"`
		}
		if err := json.Unmarshal(data, &traj); err != nil || traj.RunID != id || traj.Principal != principal {
			t.Fatalf("exports get: %v %s", err, data)
		}
		if bytes.Contains(data, []byte(secret)) || !bytes.Contains(data, []byte("builtin:aws_access_key_id")) {
			t.Fatalf("exports get: the seeded key is stored, or its redaction not recorded: %s", data)
		}
		if out := mustOps("exports", "verify", id); !strings.Contains(string(out), ": ok, sha256 ") {
			t.Fatalf("exports verify: %s", out)
		}
		// The same reads in this process on an ops connection, whose
		// asynchronous errors are seen: listing keys and reading chunks
		// go through ordered consumers that the reader deletes when done.
		// A refused delete would leave them (and a refused request shows
		// as a violation on the connection).
		onc, opsJS, oerrs := m.connect(t, "ops", nats.CustomInboxPrefix("_INBOX_ops"))
		records, err := exports.Open(ctx, opsJS, subject.Names{})
		if err != nil {
			t.Fatal(err)
		}
		for _, who := range []string{tenant, ""} {
			if entries, err := records.List(ctx, who); err != nil || len(entries) != 1 || entries[0].Record.RunID != id {
				t.Fatalf("list exports of %q as ops: %+v, %v", who, entries, err)
			}
		}
		e, err := records.Get(ctx, tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		opsStore, err := exporter.OpenStore(ctx, opsJS, subject.Names{}, exports.Settings{})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := opsStore.Get(ctx, e.Record.Object); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get %s as ops: %v (%d bytes, the CLI got %d)", e.Record.Object, err, len(got), len(data))
		}
		m.noConsumersLeft(ctx, t, "the operator's reads", "KV_agentmesh_exports", "OBJ_agentmesh_trajectories")
		if err := onc.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, err := range oerrs.take() {
			t.Errorf("ops connection: %v", err)
		}

		// Withdrawal expires it; the sweep, on the operator's request,
		// removes the bytes and then the record.
		if out := mustOps("consent", "withdraw", "--principal", principal); !strings.Contains(string(out), "withdrawn") {
			t.Fatalf("consent withdraw: %s", out)
		}
		if out := mustOps("exports", "sweep"); !strings.HasPrefix(string(out), "swept 1, failed 0, pending 0") {
			t.Fatalf("exports sweep: %s", out)
		}
		if recs := listed("--all"); len(recs) != 0 {
			t.Fatalf("exports list after the sweep = %+v, want none", recs)
		}
		if out, err := ops("exports", "get", id); err == nil {
			t.Fatalf("exports get of a swept export: %s", out)
		}
		_, ojs, _ := m.connect(t, observer)
		obs, err := ojs.ObjectStore(ctx, "agentmesh_trajectories")
		if err != nil {
			t.Fatal(err)
		}
		lister, err := obs.List(ctx)
		if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
			t.Fatal(err)
		}
		if len(lister) != 0 {
			t.Fatalf("object store after the sweep: %d objects, want none (%s)", len(lister), lister[0].Name)
		}
	})

	t.Run("tenant cannot read consent, exports, redaction rules or trajectories, nor sweep", func(t *testing.T) {
		terrs.take()
		for _, js := range []jetstream.JetStream{tjs, defaultJS} {
			prefix := tenantAPIPrefix
			if js == defaultJS {
				prefix = "$JS.API"
			}
			for _, bucket := range []string{"agentmesh_consent", "agentmesh_exports", "agentmesh_redaction"} {
				denied(t, terrs, prefix+".STREAM.INFO.KV_"+bucket, func(ctx context.Context) error {
					_, err := js.KeyValue(ctx, bucket)
					return err
				})
			}
			denied(t, terrs, prefix+".STREAM.INFO.OBJ_agentmesh_trajectories", func(ctx context.Context) error {
				_, err := js.ObjectStore(ctx, "agentmesh_trajectories")
				return err
			})
		}
		// Reads and writes without opening the buckets.
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".DIRECT.GET.KV_agentmesh_consent.$KV.agentmesh_consent.acme.alice")
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".STREAM.MSG.GET.KV_agentmesh_consent")
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".DIRECT.GET.KV_agentmesh_exports.$KV.agentmesh_exports.acme.r1")
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".STREAM.MSG.GET.KV_agentmesh_exports")
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".DIRECT.GET.KV_agentmesh_redaction.$KV.agentmesh_redaction.acme")
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".DIRECT.GET.OBJ_agentmesh_trajectories.$O.agentmesh_trajectories.M.x")
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".CONSUMER.CREATE.OBJ_agentmesh_trajectories.snoop.$O.agentmesh_trajectories.C.x")
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".CONSUMER.CREATE.KV_agentmesh_exports.snoop.$KV.agentmesh_exports.>")
		deniedPublish(t, tnc, terrs, "$KV.agentmesh_consent.acme.alice")
		deniedPublish(t, tnc, terrs, "$KV.agentmesh_redaction.acme")
		deniedPublish(t, tnc, terrs, "$O.agentmesh_trajectories.M.x")
		deniedSubscribe(t, tnc, terrs, "$O.agentmesh_trajectories.>")
		denied(t, terrs, "agentmesh.exports.sweep", func(ctx context.Context) error {
			_, err := tnc.RequestWithContext(ctx, "agentmesh.exports.sweep", nil)
			return err
		})
	})

	t.Run("the operator cannot write export records or trajectories, nor read runs", func(t *testing.T) {
		nc, _, errs := m.connect(t, "ops", nats.CustomInboxPrefix("_INBOX_ops"))
		deniedPublish(t, nc, errs, "$KV.agentmesh_exports.acme.r1")
		deniedPublish(t, nc, errs, "$O.agentmesh_trajectories.M.x")
		deniedPublish(t, nc, errs, "$JS.API.STREAM.PURGE.OBJ_agentmesh_trajectories")
		deniedPublish(t, nc, errs, "$JS.API.STREAM.INFO.KV_agentmesh_runs")
		deniedPublish(t, nc, errs, "$JS.API.DIRECT.GET.KV_agentmesh_runs.$KV.agentmesh_runs.acme.r1")
		deniedPublish(t, nc, errs, "$JS.API.CONSUMER.CREATE.AGENTMESH_EVENTS.snoop.agentmesh.events.acme.>")
	})

	t.Run("a run's artifacts: the runner writes them and reads snapshots, the gateway and the operator read them, the sweeper removes them", func(t *testing.T) {
		open := func(user string, opts ...nats.Option) (*artifacts.Store, *nats.Conn, *asyncErrs) {
			nc, js, errs := m.connect(t, user, opts...)
			s, err := artifacts.Open(ctx, js, subject.Names{})
			if err != nil {
				t.Fatalf("open the artifacts as %s: %v", user, err)
			}
			return s, nc, errs
		}
		runner, _, _ := open("runner")
		gw, gnc, gerrs := open("gateway")
		ops, onc, oerrs := open("ops", nats.CustomInboxPrefix("_INBOX_ops"))
		sw, _, _ := open("sweeper")

		id, err := ops.PushSnapshot(ctx, "acme", strings.NewReader("a workspace"))
		if err != nil {
			t.Fatalf("operator pushes a snapshot: %v", err)
		}
		rc, _, err := runner.OpenSnapshot(ctx, "acme", id)
		if err != nil {
			t.Fatalf("runner opens the snapshot: %v", err)
		}
		if b, err := io.ReadAll(rc); err != nil || string(b) != "a workspace" {
			t.Fatalf("runner reads the snapshot: %q, %v", b, err)
		}
		_ = rc.Close()
		ref, err := runner.Put(ctx, "acme", "art-1", "patch", strings.NewReader("diff --git a/x b/x\n"))
		if err != nil {
			t.Fatalf("runner puts an artifact: %v", err)
		}
		if err := runner.SetHead(ctx, "acme", "conv-1", artifacts.Head{Source: wire.WorkspaceSource{Snapshot: id}, Patch: &ref, RunID: "art-1"}); err != nil {
			t.Fatalf("runner sets a head: %v", err)
		}
		if _, err := runner.Head(ctx, "acme", "conv-1"); err != nil {
			t.Fatalf("runner reads a head: %v", err)
		}
		for name, s := range map[string]*artifacts.Store{"gateway": gw, "ops": ops} {
			list, err := s.List(ctx, "acme", "art-1")
			if err != nil || len(list) != 1 {
				t.Fatalf("%s lists the run's artifacts: %+v, %v", name, list, err)
			}
			rc, _, err := s.Open(ctx, "acme", "art-1", "patch")
			if err != nil {
				t.Fatalf("%s opens the patch: %v", name, err)
			}
			if b, err := io.ReadAll(rc); err != nil || string(b) != "diff --git a/x b/x\n" {
				t.Fatalf("%s reads the patch: %q, %v", name, b, err)
			}
			_ = rc.Close()
		}
		if err := runner.Withdraw(ctx, "acme", "art-1"); err != nil {
			t.Fatalf("runner withdraws the run's artifacts: %v", err)
		}
		res, err := (&artifacts.Sweeper{Store: sw}).Sweep(ctx)
		if err != nil || res.Swept != 1 {
			t.Fatalf("sweeper sweeps the withdrawn artifact: %+v, %v", res, err)
		}
		if ok, err := sw.Bytes().Exists(ctx, ref.Name); err != nil || ok {
			t.Fatalf("swept bytes exist = %v, %v", ok, err)
		}

		// Neither the gateway nor the operator writes artifacts.
		for _, c := range []struct {
			nc   *nats.Conn
			errs *asyncErrs
		}{{gnc, gerrs}, {onc, oerrs}} {
			c.errs.take()
			deniedPublish(t, c.nc, c.errs, "$KV.agentmesh_artifacts.acme.art-1.patch")
			deniedPublish(t, c.nc, c.errs, "$O.agentmesh_artifact_bytes.M.x")
			deniedPublish(t, c.nc, c.errs, "$JS.API.STREAM.PURGE.OBJ_agentmesh_artifact_bytes")
			deniedPublish(t, c.nc, c.errs, "$KV.agentmesh_heads.acme.conv-1")
		}
		// The gateway pushes no snapshots.
		deniedPublish(t, gnc, gerrs, "$O.agentmesh_snapshots.C.x")
		// A tenant reaches none of it.
		terrs.take()
		for _, b := range []string{"KV_agentmesh_artifacts", "KV_agentmesh_heads", "OBJ_agentmesh_artifact_bytes", "OBJ_agentmesh_snapshots"} {
			deniedPublish(t, tnc, terrs, tenantAPIPrefix+".STREAM.INFO."+b)
		}
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".DIRECT.GET.KV_agentmesh_artifacts.$KV.agentmesh_artifacts.acme.art-1.patch")
		deniedPublish(t, tnc, terrs, "$O.agentmesh_snapshots.C.x")
		deniedPublish(t, tnc, terrs, "$KV.agentmesh_heads.acme.conv-1")
	})

	t.Run("tenant cannot submit for another tenant", func(t *testing.T) {
		terrs.take()
		denied(t, terrs, "agentmesh.submit.other", func(ctx context.Context) error {
			_, err := c.Submit(ctx, randomRunReq(t, "other", map[string]any{"prompt": "x"}))
			return err
		})
		deniedPublish(t, tnc, terrs, "agentmesh.submit.other")
		deniedPublish(t, tnc, terrs, "agentmesh.submit.acme.extra")
	})

	t.Run("tenant cannot read another tenant's events", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		terrs.take()
		const create = tenantAPIPrefix + ".CONSUMER.CREATE.AGENTMESH_EVENTS."
		// pkg/client's ordered consumer, filtered to the other tenant.
		denied(t, terrs, create, func(ctx context.Context) error {
			for _, err := range c.Events(ctx, "other", "r1", 1) {
				return err
			}
			return nil
		})
		// Nor an unfiltered consumer, nor a filter outside agentmesh.events.acme.
		denied(t, terrs, create+"snoop", func(ctx context.Context) error {
			_, err := tjs.CreateOrUpdateConsumer(ctx, "AGENTMESH_EVENTS", jetstream.ConsumerConfig{Name: "snoop"})
			return err
		})
		denied(t, terrs, create+"snoop.agentmesh.events.>", func(ctx context.Context) error {
			_, err := tjs.CreateOrUpdateConsumer(ctx, "AGENTMESH_EVENTS", jetstream.ConsumerConfig{Name: "snoop", FilterSubject: "agentmesh.events.>"})
			return err
		})
		// Several filters cannot be put in the API subject, so that request
		// has none and is refused too.
		denied(t, terrs, create+"snoop", func(ctx context.Context) error {
			_, err := tjs.CreateOrUpdateConsumer(ctx, "AGENTMESH_EVENTS", jetstream.ConsumerConfig{Name: "snoop", FilterSubjects: []string{"agentmesh.events.acme.x", "agentmesh.events.other.>"}})
			return err
		})
		// The mesh's JetStream API under its own name is not the tenant's.
		denied(t, terrs, "$JS.API.CONSUMER.CREATE.AGENTMESH_EVENTS.snoop", func(ctx context.Context) error {
			_, err := defaultJS.CreateOrUpdateConsumer(ctx, "AGENTMESH_EVENTS", jetstream.ConsumerConfig{Name: "snoop", FilterSubject: "agentmesh.events.acme.x"})
			return err
		})
		// The tenant's own filter in the API subject with a body asking for
		// another's is refused by the consumer-create proxy.
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req := []byte(`{"stream_name":"AGENTMESH_EVENTS","config":{"name":"snoop","filter_subject":"agentmesh.events.other.>","ack_policy":"none"}}`)
		resp, err := tnc.RequestWithContext(rctx, create+"snoop.agentmesh.events.acme.x", req)
		if err != nil || !strings.Contains(string(resp.Data), `"err_code":10003`) || !strings.Contains(string(resp.Data), "differs from the subject's filter") {
			t.Fatalf("consumer whose filter differs from the API subject's: %v %s", err, respData(resp))
		}
		t.Logf("the proxy refused a mismatched filter: %s", resp.Data)
		// Core subscriptions to events, and to anyone else's replies.
		deniedSubscribe(t, tnc, terrs, "agentmesh.events.other.>")
		deniedSubscribe(t, tnc, terrs, "agentmesh.events.acme.>") // events are read through JetStream only
		deniedSubscribe(t, tnc, terrs, "_INBOX.>")
		deniedSubscribe(t, tnc, terrs, "_INBOX_other.>")
		deniedSubscribe(t, tnc, terrs, ">")
		// Another tenant's run record.
		denied(t, terrs, tenantAPIPrefix+".DIRECT.GET.KV_agentmesh_runs.$KV.agentmesh_runs.other.r1", func(ctx context.Context) error {
			_, err := c.Status(ctx, "other", "r1")
			return err
		})
		// Another tenant's run's last event, and events by sequence.
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".DIRECT.GET.AGENTMESH_EVENTS.agentmesh.events.other.r1")
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".DIRECT.GET.AGENTMESH_EVENTS")
		// A record by sequence, which would reach any tenant's.
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".DIRECT.GET.KV_agentmesh_runs")
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".STREAM.MSG.GET.KV_agentmesh_runs")
		deniedPublish(t, tnc, terrs, "$JS.API.DIRECT.GET.KV_agentmesh_runs")
	})

	t.Run("tenant reads its own conversation's history, not another's", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		terrs.take()
		req := randomRunReq(t, tenant, map[string]any{"prompt": "remember me"})
		req.Conversation = "conv-" + req.RunID
		id, err := c.Submit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := c.Wait(ctx, tenant, id); err != nil || st.State != wire.StateSucceeded {
			t.Fatalf("wait = %+v, %v", st, err)
		}
		h, err := c.History(ctx, tenant, req.Conversation)
		if err != nil || len(h.Runs) != 1 || h.Runs[0].RunID != id || h.Runs[0].Prompt != "remember me" || len(h.Runs[0].Chunks) == 0 {
			t.Fatalf("history = %+v, %v; want run %s with its prompt and chunks", h, err, id)
		}
		denied(t, terrs, tenantAPIPrefix+".DIRECT.GET.KV_agentmesh_conversations.$KV.agentmesh_conversations.other."+req.Conversation, func(ctx context.Context) error {
			_, err := c.History(ctx, "other", req.Conversation)
			return err
		})
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".DIRECT.GET.KV_agentmesh_conversations")
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".STREAM.MSG.GET.KV_agentmesh_conversations")
		deniedPublish(t, tnc, terrs, "$KV.agentmesh_conversations.acme."+req.Conversation)
	})

	t.Run("tenant cannot list another tenant's run ids", func(t *testing.T) {
		terrs.take()
		// STREAM.INFO with a subjects_filter lists a stream's subjects: the
		// run ids of every tenant, in the runs bucket and the events stream.
		for _, stream := range []string{"KV_agentmesh_runs", "AGENTMESH_EVENTS", "AGENTMESH_SUBMIT"} {
			for _, js := range []jetstream.JetStream{tjs, defaultJS} {
				prefix := tenantAPIPrefix
				if js == defaultJS {
					prefix = "$JS.API"
				}
				denied(t, terrs, prefix+".STREAM.INFO."+stream, func(ctx context.Context) error {
					s, err := js.Stream(ctx, stream)
					if err != nil {
						return err
					}
					_, err = s.Info(ctx, jetstream.WithSubjectFilter(">"))
					return err
				})
			}
		}
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".STREAM.LIST")
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".CONSUMER.LIST.AGENTMESH_EVENTS")
		deniedPublish(t, tnc, terrs, tenantAPIPrefix+".CONSUMER.INFO.AGENTMESH_EVENTS.router")
	})

	t.Run("a reply subject the tenant names stays in its account", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		// In one account, the answer to a request goes to whatever reply
		// subject the requester named, with the responder's rights: a
		// direct get answered into $KV.agentmesh_runs.<other>.<id> wrote
		// another tenant's run record, a PubAck or a cancel answer into
		// agentmesh.work.* or a cancel subject reached the services.
		// Across an import the reply becomes a _R_ subject leading back
		// into the tenant's account.
		id, err := c.Submit(ctx, randomRunReq(t, tenant, map[string]any{"prompt": "hi"}))
		if err != nil {
			t.Fatal(err)
		}
		if st, err := c.Wait(ctx, tenant, id); err != nil || st.State != wire.StateSucceeded {
			t.Fatalf("wait = %+v, %v", st, err)
		}
		_, rjs, rerrs := m.connect(t, "router")
		defer func() {
			for _, err := range rerrs.take() {
				t.Errorf("router connection: %v", err)
			}
		}()
		// The runner user's cancel subscription stands for every core
		// subscriber of the mesh; the runs bucket for every stream.
		nnc, _, _ := m.connect(t, "runner")
		victim, err := nnc.SubscribeSync("agentmesh.runner.victim.cancel")
		if err != nil {
			t.Fatal(err)
		}
		if err := nnc.Flush(); err != nil {
			t.Fatal(err)
		}
		get := tenantAPIPrefix + ".DIRECT.GET.KV_agentmesh_runs.$KV.agentmesh_runs." + tenant + "." + id
		for _, reply := range []string{"agentmesh.runner.victim.cancel", "$KV.agentmesh_runs.other.victim", "agentmesh.work.in_process.fixture"} {
			if err := tnc.PublishRequest(get, reply, nil); err != nil {
				t.Fatal(err)
			}
			cancelReq := nats.NewMsg("agentmesh.control." + tenant + "." + id + ".cancel")
			cancelReq.Reply = reply
			if err := tnc.PublishMsg(cancelReq); err != nil {
				t.Fatal(err)
			}
		}
		// The same requests with the tenant's own inbox are answered: the
		// mesh has handled the ones above.
		if _, err := c.Status(ctx, tenant, id); err != nil {
			t.Fatalf("status: %v", err)
		}
		if reply, err := c.Cancel(ctx, tenant, id); err != nil || !reply.Ended {
			t.Fatalf("cancel of an ended run = %+v, %v", reply, err)
		}
		if msg, err := victim.NextMsg(200 * time.Millisecond); err == nil {
			t.Fatalf("a tenant's reply subject reached a mesh subscriber: %s %q", msg.Subject, msg.Data)
		}
		kv, err := rjs.KeyValue(ctx, "agentmesh_runs")
		if err != nil {
			t.Fatal(err)
		}
		if e, err := kv.Get(ctx, "other.victim"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("another tenant's run record was written through a reply subject: %v %v", e, err)
		}
		work, err := rjs.Stream(ctx, "AGENTMESH_WORK")
		if err != nil {
			t.Fatal(err)
		}
		info, err := work.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != 0 {
			t.Fatalf("AGENTMESH_WORK holds %d messages, want 0 (the runs have ended)", info.State.Msgs)
		}
	})

	t.Run("tenant cannot create a push consumer, a durable or a consumer outside its events", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		// nats-server 2.15 checks a push consumer's deliver_subject against
		// nothing but the stream's own subjects and the reserved ones, never
		// the creator's permissions (nats-io/nats-server#8274), and the
		// consumer would live in the mesh's account, delivering into its
		// subjects. The tenant's consumer creates reach the router's proxy
		// (pkg/router/consumerproxy) instead, which refuses them with a JetStream
		// error and never forwards them.
		id, err := c.Submit(ctx, randomRunReq(t, tenant, map[string]any{"prompt": "hi"}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Wait(ctx, tenant, id); err != nil {
			t.Fatal(err)
		}
		own := "agentmesh.events." + tenant + "." + id
		onc, ojs, _ := m.connect(t, observer)
		targets := []string{
			"agentmesh.submit.other",                    // another tenant's submissions (a stream's subject)
			"agentmesh.control.other." + id + ".cancel", // another tenant's cancel (the router)
			"agentmesh.runner.victim.cancel",            // a runner's cancel
			"agentmesh.sweeper.reconcile",               // the sweeper
		}
		subs := map[string]*nats.Subscription{}
		for _, subj := range targets {
			sub, err := onc.SubscribeSync(subj)
			if err != nil {
				t.Fatal(err)
			}
			subs[subj] = sub
		}
		if err := onc.Flush(); err != nil {
			t.Fatal(err)
		}
		refused := func(what string, code jetstream.ErrorCode, err error) {
			t.Helper()
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != code {
				t.Fatalf("%s: %v, want a JetStream API error with err_code %d", what, err, code)
			}
			t.Logf("%s refused: %v", what, err)
		}
		for i, target := range targets {
			cfg := jetstream.ConsumerConfig{
				Name: fmt.Sprintf("push%d", i), FilterSubject: own, DeliverSubject: target,
				IdleHeartbeat: 100 * time.Millisecond, AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Second,
			}
			_, err := tjs.CreateOrUpdateConsumer(ctx, "AGENTMESH_EVENTS", cfg)
			refused("push consumer delivering to "+target, 10112, err)
			cfg.Name += "b"
			_, err = tjs.CreateOrUpdatePushConsumer(ctx, "AGENTMESH_EVENTS", cfg)
			refused("push consumer (push API) delivering to "+target, 10112, err)
		}
		_, err = tjs.CreateOrUpdateConsumer(ctx, "AGENTMESH_EVENTS", jetstream.ConsumerConfig{Durable: "keep", FilterSubject: own})
		refused("durable", 10003, err)
		// A filter outside the tenant's events is refused by the tenant's
		// permissions, or by the proxy when it is in the body only ("tenant
		// cannot read another tenant's events"). A pull consumer on all of
		// its own events passes the proxy.
		_, err = tjs.CreateOrUpdateConsumer(ctx, "AGENTMESH_EVENTS", jetstream.ConsumerConfig{Name: "wide", FilterSubject: "agentmesh.events." + tenant + ".>"})
		if err != nil {
			t.Fatalf("a pull consumer on all of the tenant's own events: %v", err)
		}
		if err := tjs.DeleteConsumer(ctx, "AGENTMESH_EVENTS", "wide"); err != nil {
			t.Fatalf("delete own consumer: %v", err)
		}
		// No consumer was created, so nothing is delivered: wait out
		// several idle heartbeats and the events a push consumer would
		// have sent at once.
		if msg, err := subs[targets[0]].NextMsg(500 * time.Millisecond); err == nil {
			t.Fatalf("a delivery reached %s: reply %q header %v", msg.Subject, msg.Reply, msg.Header)
		}
		for subj, sub := range subs {
			if n, _, err := sub.Pending(); err != nil || n != 0 {
				t.Fatalf("%s: %d messages arrived (%v), want none", subj, n, err)
			}
		}
		events, err := ojs.Stream(ctx, "AGENTMESH_EVENTS")
		if err != nil {
			t.Fatal(err)
		}
		lister := events.ListConsumers(ctx)
		for info := range lister.Info() {
			if info.Config.DeliverSubject != "" || info.Config.Durable != "" {
				t.Fatalf("consumer %s on AGENTMESH_EVENTS: deliver subject %q, durable %q", info.Name, info.Config.DeliverSubject, info.Config.Durable)
			}
		}
		if err := lister.Err(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("tenant cannot publish work, cancel for another tenant or touch the topology", func(t *testing.T) {
		terrs.take()
		deniedPublish(t, tnc, terrs, "agentmesh.work.in_process.fixture")
		deniedPublish(t, tnc, terrs, "agentmesh.events.acme.r1")
		denied(t, terrs, "agentmesh.control.other.r1.cancel", func(ctx context.Context) error {
			_, err := c.Cancel(ctx, "other", "r1")
			return err
		})
		denied(t, terrs, tenantAPIPrefix+".STREAM.DELETE.AGENTMESH_EVENTS", func(ctx context.Context) error {
			return tjs.DeleteStream(ctx, "AGENTMESH_EVENTS")
		})
		deniedPublish(t, tnc, terrs, "$KV.agentmesh_runs.acme.r1")
		deniedPublish(t, tnc, terrs, "$SRV.PING")
	})

	t.Run("ops creates, lists and revokes API keys, and the gateway answers them as its own user", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		bin, err := agentmeshBin()
		if err != nil {
			t.Fatal(err)
		}
		_, mustOps := m.opsCLI(ctx, t, bin)
		listed := func() []gateway.Key {
			t.Helper()
			return jsonLines[gateway.Key](t, "keys list", mustOps("keys", "list", "--all", "--json"))
		}
		// `keys create` prints the key, once; the mesh keeps its hash.
		key := strings.TrimSpace(string(mustOps("keys", "create", "--tenant", tenant, "--principal", "alice")))
		otherKey := strings.TrimSpace(string(mustOps("keys", "create", "--tenant", "other", "--principal", "bob")))
		if !strings.HasPrefix(key, gateway.KeyPrefix) || !strings.HasPrefix(otherKey, gateway.KeyPrefix) {
			t.Fatalf("keys create printed %q and %q, want keys", key, otherKey)
		}
		ids := map[string]string{} // tenant -> key id
		for _, k := range listed() {
			ids[k.Tenant] = k.ID
		}
		if len(ids) != 2 || ids[tenant] == "" || ids["other"] == "" {
			t.Fatalf("keys list --all: %v, want one key of %s and one of other", ids, tenant)
		}

		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		call := func(key, method, path, body string) (int, []byte) {
			t.Helper()
			return callGateway(ctx, t, hc, gatewayURL, key, method, path, body)
		}
		chat := func(key, prompt string) string {
			t.Helper()
			code, b := call(key, "POST", "/v1/chat/completions", `{"model":"fixture","messages":[{"role":"user","content":"`+prompt+`"}]}`)
			var resp struct {
				ID      string `json:"id"`
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(b, &resp); code != http.StatusOK || err != nil || len(resp.Choices) != 1 ||
				resp.Choices[0].Message.Content != "echo: "+prompt || !strings.HasPrefix(resp.ID, "chatcmpl-") {
				t.Fatalf("POST /v1/chat/completions: %d %s", code, b)
			}
			return strings.TrimPrefix(resp.ID, "chatcmpl-")
		}

		// A chat completion; its run is the key's tenant's and principal's.
		// (The record is written as the run ends, after or before the
		// terminal status the answer waited for.)
		id := chat(key, "hi")
		natstest.Eventually(t, 10*time.Second, func() error {
			code, b := call(key, "GET", "/v1/runs/"+id, "")
			var rec wire.RunRecord
			if err := json.Unmarshal(b, &rec); code != http.StatusOK || err != nil || rec.Tenant != tenant || rec.Principal != "alice" {
				t.Fatalf("GET /v1/runs/%s: %d %s", id, code, b)
			}
			if rec.State != wire.StateSucceeded {
				return fmt.Errorf("GET /v1/runs/%s: state %s, want succeeded", id, rec.State)
			}
			return nil
		})
		// Streamed.
		code, b := call(key, "POST", "/v1/chat/completions", `{"model":"fixture","stream":true,"messages":[{"role":"user","content":"again"}]}`)
		if code != http.StatusOK || !strings.HasSuffix(strings.TrimSpace(string(b)), "data: [DONE]") {
			t.Fatalf("POST /v1/chat/completions, streamed: %d %s", code, b)
		}
		// The runs API: submit, follow the events to the end, cancel an ended run.
		code, b = call(key, "POST", "/v1/runs", `{"profile":"fixture","request":{"prompt":"native"}}`)
		var sub struct {
			RunID string `json:"run_id"`
		}
		if err := json.Unmarshal(b, &sub); code != http.StatusAccepted || err != nil || sub.RunID == "" {
			t.Fatalf("POST /v1/runs: %d %s", code, b)
		}
		// (Its events are found once the router has accepted it: until
		// then the run is not known.)
		natstest.Eventually(t, 10*time.Second, func() error {
			if code, b = call(key, "GET", "/v1/runs/"+sub.RunID+"/events", ""); code == http.StatusNotFound {
				return fmt.Errorf("GET /v1/runs/%s/events: %d %s", sub.RunID, code, b)
			}
			return nil
		})
		if code != http.StatusOK || !strings.Contains(string(b), `"state":"succeeded"`) {
			t.Fatalf("GET /v1/runs/%s/events: %d %s", sub.RunID, code, b)
		}
		code, b = call(key, "POST", "/v1/runs/"+sub.RunID+"/cancel", "")
		var reply wire.CancelReply
		if err := json.Unmarshal(b, &reply); code != http.StatusOK || err != nil || !reply.Ended {
			t.Fatalf("POST /v1/runs/%s/cancel: %d %s", sub.RunID, code, b)
		}
		// A conversation on a model API's profile, which the gateway keeps
		// in agentmesh_turns: the model's tool call, then the caller's
		// result sent back in the history continues the same mesh
		// conversation (the turns' keys read, claimed and written), once.
		tools := `[{"type":"function","function":{"name":"fs_read","description":"Read a file of the workspace",` +
			`"parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}]`
		user := `{"role":"user","content":"What does answer.txt say?"}`
		code, b = call(key, "POST", "/v1/chat/completions", `{"model":"oa","tools":`+tools+`,"messages":[`+user+`]}`)
		var turn struct {
			Choices []struct {
				Message      json.RawMessage `json:"message"`
				FinishReason string          `json:"finish_reason"`
			} `json:"choices"`
		}
		var msg struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		}
		if err := json.Unmarshal(b, &turn); code != http.StatusOK || err != nil || len(turn.Choices) != 1 || turn.Choices[0].FinishReason != "tool_calls" ||
			json.Unmarshal(turn.Choices[0].Message, &msg) != nil || len(msg.ToolCalls) != 1 {
			t.Fatalf("POST /v1/chat/completions, model oa: %d %s, want one tool call", code, b)
		}
		history := `{"model":"oa","tools":` + tools + `,"messages":[` + user + `,` + string(turn.Choices[0].Message) +
			`,{"role":"tool","tool_call_id":"` + msg.ToolCalls[0].ID + `","content":"42\n"}]}`
		code, b = call(key, "POST", "/v1/chat/completions", history)
		if err := json.Unmarshal(b, &turn); code != http.StatusOK || err != nil || len(turn.Choices) != 1 ||
			json.Unmarshal(turn.Choices[0].Message, &msg) != nil || msg.Content == nil || *msg.Content != "answer.txt says: 42." {
			t.Fatalf("POST /v1/chat/completions, the tool's result: %d %s", code, b)
		}
		if code, b = call(key, "POST", "/v1/chat/completions", history); code != http.StatusConflict || !strings.Contains(string(b), "conversation_moved_on") {
			t.Fatalf("the same turn continued twice: %d %s, want a 409 conversation_moved_on", code, b)
		}
		// The gateway submits for whichever tenant a key names, and a
		// tenant's runs are not another's.
		otherID := chat(otherKey, "hello")
		if code, b := call(key, "GET", "/v1/runs/"+otherID, ""); code != http.StatusNotFound {
			t.Fatalf("GET another tenant's run: %d %s, want 404", code, b)
		}

		// The same key reads in process on an ops connection, whose
		// asynchronous errors are seen: listing keys goes through an
		// ordered consumer that the lister deletes when done.
		onc, opsJS, oerrs := m.connect(t, "ops", nats.CustomInboxPrefix("_INBOX_ops"))
		keys, err := gateway.OpenKeys(ctx, opsJS, subject.Names{})
		if err != nil {
			t.Fatal(err)
		}
		if recs, err := keys.List(ctx, tenant); err != nil || len(recs) != 1 || recs[0].ID != ids[tenant] || recs[0].Principal != "alice" {
			t.Fatalf("list the keys of %s as ops: %+v, %v", tenant, recs, err)
		}
		// Revoked, by the CLI and in process, a key is refused at once.
		if out := mustOps("keys", "revoke", ids[tenant]); !strings.Contains(string(out), "revoked "+ids[tenant]) {
			t.Fatalf("keys revoke: %s", out)
		}
		if code, b := call(key, "GET", "/v1/models", ""); code != http.StatusUnauthorized {
			t.Fatalf("a revoked key: %d %s, want 401", code, b)
		}
		if _, err := keys.Revoke(ctx, ids["other"]); err != nil {
			t.Fatalf("revoke as ops: %v", err)
		}
		if code, b := call(otherKey, "GET", "/v1/models", ""); code != http.StatusUnauthorized {
			t.Fatalf("a revoked key: %d %s, want 401", code, b)
		}
		if recs := listed(); len(recs) != 0 {
			t.Fatalf("keys list after revoking both: %+v", recs)
		}
		m.noConsumersLeft(ctx, t, "the operator's listings", "KV_agentmesh_apikeys")
		if err := onc.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, err := range oerrs.take() {
			t.Errorf("ops connection: %v", err)
		}
	})

	t.Run("the gateway cannot read checkpoints or consent, write keys or runs, publish work or consume submissions", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		nc, js, errs := m.connect(t, "gateway")
		for _, bucket := range []string{"agentmesh_checkpoints", "agentmesh_consent"} {
			// Opening a bucket is its STREAM.INFO, which topology.Ensure
			// needs; reading or writing its keys is not.
			kv, err := js.KeyValue(ctx, bucket)
			if err != nil {
				t.Fatal(err)
			}
			denied(t, errs, "$JS.API.DIRECT.GET.KV_"+bucket+".$KV."+bucket+".acme.c1", func(ctx context.Context) error {
				_, err := kv.Get(ctx, "acme.c1")
				return err
			})
			denied(t, errs, "$KV."+bucket+".acme.c1", func(ctx context.Context) error {
				_, err := kv.Put(ctx, "acme.c1", []byte("{}"))
				return err
			})
			deniedPublish(t, nc, errs, "$JS.API.STREAM.MSG.GET.KV_"+bucket)
		}
		deniedPublish(t, nc, errs, "agentmesh.work.in_process.fixture.acme")
		denied(t, errs, "$JS.API.CONSUMER.CREATE.AGENTMESH_SUBMIT.gw", func(ctx context.Context) error {
			_, err := js.CreateOrUpdateConsumer(ctx, "AGENTMESH_SUBMIT", jetstream.ConsumerConfig{Durable: "gw", AckPolicy: jetstream.AckExplicitPolicy})
			return err
		})
		deniedPublish(t, nc, errs, "$JS.API.CONSUMER.MSG.NEXT.AGENTMESH_SUBMIT.router")
		deniedSubscribe(t, nc, errs, "agentmesh.submit.*")
		deniedSubscribe(t, nc, errs, "agentmesh.control.*.*.cancel")
		deniedSubscribe(t, nc, errs, "agentmesh.control.*.*.input")
		deniedSubscribe(t, nc, errs, "agentmesh.control.*.*.permission")
		// Keys are written and listed by ops only; run records and events
		// by the services that run the runs.
		deniedPublish(t, nc, errs, "$KV.agentmesh_apikeys.x")
		deniedPublish(t, nc, errs, "$JS.API.CONSUMER.CREATE.KV_agentmesh_apikeys.snoop.$KV.agentmesh_apikeys.>")
		deniedPublish(t, nc, errs, "$KV.agentmesh_runs.acme.r1")
		deniedPublish(t, nc, errs, "agentmesh.events.acme.r1")
		denied(t, errs, "$JS.API.STREAM.DELETE.AGENTMESH_EVENTS", func(ctx context.Context) error {
			return js.DeleteStream(ctx, "AGENTMESH_EVENTS")
		})
	})

	t.Run("the sweeper lists the work stream, not the run records", func(t *testing.T) {
		nc, _, errs := m.connect(t, "sweeper")
		deniedPublish(t, nc, errs, "$JS.API.CONSUMER.CREATE.KV_agentmesh_runs.snoop.$KV.agentmesh_runs.>")
	})

	t.Run("runner cannot submit", func(t *testing.T) {
		nc, js, errs := m.connect(t, "runner")
		denied(t, errs, "agentmesh.submit.acme", func(ctx context.Context) error {
			msg := nats.NewMsg("agentmesh.submit.acme")
			msg.Data = []byte("x")
			_, err := js.PublishMsg(ctx, msg)
			return err
		})
		deniedPublish(t, nc, errs, "agentmesh.submit.other")
		deniedPublish(t, nc, errs, "agentmesh.control.acme.r1.cancel")
		deniedPublish(t, nc, errs, "agentmesh.control.acme.r1.input")
		deniedPublish(t, nc, errs, "agentmesh.control.acme.r1.permission")
		denied(t, errs, "$JS.API.STREAM.DELETE.AGENTMESH_SUBMIT", func(ctx context.Context) error {
			return js.DeleteStream(ctx, "AGENTMESH_SUBMIT")
		})
	})
}

// opsCLI runs the built agentmesh binary bin as the operator does: as
// the ops user, with its inbox prefix, the mesh's own JetStream API and
// the object store (no artifact root). ops returns the command's stdout,
// or an error holding its stderr; mustOps fails t on that error.
func (m *mesh) opsCLI(ctx context.Context, t *testing.T, bin string) (ops func(args ...string) ([]byte, error), mustOps func(args ...string) []byte) {
	env := append(append(os.Environ(), m.authEnv()...), "AGENTMESH_NATS_URL="+m.url("ops"), "AGENTMESH_TENANT="+tenant,
		"AGENTMESH_INBOX_PREFIX=_INBOX_ops", "AGENTMESH_JS_API_PREFIX=", "AGENTMESH_PREFIX=", exports.EnvArtifactRoot+"=")
	ops = func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("agentmesh %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
		}
		return out, nil
	}
	mustOps = func(args ...string) []byte {
		t.Helper()
		out, err := ops(args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	return ops, mustOps
}

func respData(m *nats.Msg) string {
	if m == nil {
		return ""
	}
	return string(m.Data)
}

// denied runs f, which must fail, and checks that the server refused a
// publish to a subject starting with subj. A JetStream API request the
// server refuses gets no reply, so f fails by its context's deadline; the
// permission violation the server sends instead is what is asserted.
func denied(t *testing.T, errs *asyncErrs, subj string, f func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := f(ctx); err == nil {
		t.Fatalf("%s: allowed, want a permission violation", subj)
	}
	waitAsyncPermission(t, errs, "publish", subj)
}

// deniedPublish publishes to subj and checks the server refused it.
func deniedPublish(t *testing.T, nc *nats.Conn, errs *asyncErrs, subj string) {
	t.Helper()
	if err := nc.Publish(subj, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitAsyncPermission(t, errs, "publish", subj)
}

// deniedSubscribe subscribes to subj and checks the server refused it.
func deniedSubscribe(t *testing.T, nc *nats.Conn, errs *asyncErrs, subj string) {
	t.Helper()
	sub, err := nc.SubscribeSync(subj)
	if err != nil {
		if !isPermissionError(err) {
			t.Fatalf("subscribe %s: %v", subj, err)
		}
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitAsyncPermission(t, errs, "subscription", subj)
}
