// Package servicetest runs a service's run function in a test against an
// embedded server and checks what every service must do: register with the
// NATS services framework, serve /metrics, /healthz and /readyz, and shut
// down cleanly when its context ends.
package servicetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
)

// RepoRoot is the repository's root directory, for the shipped profiles
// and fixture scripts.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Load sets the environment of a service under test (AGENTMESH_NATS_URL to
// natsURL, AGENTMESH_HTTP_ADDR to a random loopback port, then env) for the
// rest of the test and loads spec from it as the service's main would (see
// service.LoadConfig).
func Load(t testing.TB, spec any, common *service.Config, natsURL string, env map[string]string) {
	t.Helper()
	t.Setenv("AGENTMESH_NATS_URL", natsURL)
	t.Setenv("AGENTMESH_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("AGENTMESH_PROFILES_DIR", filepath.Join(RepoRoot(), "profiles"))
	t.Setenv("AGENTMESH_FIXTURE_DIR", filepath.Join(RepoRoot(), "testdata", "fixture"))
	for k, v := range env {
		t.Setenv(k, v)
	}
	if err := service.LoadConfig(spec, common); err != nil {
		t.Fatalf("servicetest: %v", err)
	}
}

// LoadSpec is Load for a service whose Config is C, returning the Config
// it loaded.
func LoadSpec[C any, P service.Spec[C]](t testing.TB, natsURL string, env map[string]string) C {
	t.Helper()
	var cfg C
	Load(t, &cfg, P(&cfg).Common(), natsURL, env)
	return cfg
}

// Serve starts an embedded JetStream server and, in the background
// (Start), a service's run function on the Config loaded for it with env
// (LoadSpec). It returns the server, a connection of the test's own to it
// and the running service.
func Serve[C any, P service.Spec[C]](t testing.TB, env map[string]string, run func(ctx context.Context, cfg C, log *slog.Logger) error) (*server.Server, *nats.Conn, *Proc) {
	t.Helper()
	s := natstest.RunJetStream(t)
	nc, _ := natstest.Connect(t, s)
	cfg := LoadSpec[C, P](t, s.ClientURL(), env)
	return s, nc, Start(t, func(ctx context.Context, log *slog.Logger) error { return run(ctx, cfg, log) })
}

// CheckConfig loads spec from the environment as the service's main would
// and checks that it fails naming the variable want, or succeeds when want
// is "".
func CheckConfig(t testing.TB, spec any, common *service.Config, want string) {
	t.Helper()
	err := service.LoadConfig(spec, common)
	switch {
	case want == "" && err != nil:
		t.Errorf("load config: %v, want no error", err)
	case want != "" && err == nil:
		t.Errorf("load config: no error, want one naming %s", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("load config: %v, want an error naming %s", err, want)
	}
}

// Deps connects to srv on a connection of its own, closed when the test
// ends, ensures the topology topo describes, and returns what a component
// is built from: a fresh metrics registry, an empty health and a logger
// that writes to stderr in verbose mode (go test -v) and nowhere otherwise.
func Deps(t testing.TB, srv *server.Server, topo topology.Config) service.Deps {
	t.Helper()
	nc, js := natstest.Connect(t, srv)
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if err := topology.Ensure(context.Background(), js, topo); err != nil {
		t.Fatalf("servicetest: %v", err)
	}
	return service.Deps{NC: nc, JS: js, Names: topo.Names, Log: log,
		Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}
}

// ConfigCase is an environment a service's configuration is loaded from
// and the variable the error must name, or "" for none.
type ConfigCase struct {
	Name string
	Env  map[string]string
	Want string
}

// Misspelt is the configuration case every service's CheckConfigs runs
// besides its own: a misspelt common variable fails start-up, naming it
// and the variable meant.
var Misspelt = ConfigCase{
	Name: "misspelt variable",
	Env:  map[string]string{"AGENTMESH_LEASE_TLL": "3s"},
	Want: "config: AGENTMESH_LEASE_TLL: unknown variable; nothing in this build reads it (did you mean AGENTMESH_LEASE_TTL?)",
}

// CheckConfigs runs CheckConfig for each case, and for Misspelt, in a
// subtest with its environment set, on the spec that newSpec returns (a
// pointer to a zero Config of the service and the service.Config it
// embeds). It also checks that every variable the spec reads is in
// service.KnownVariables, so that the other services accept it in a
// shared environment.
func CheckConfigs(t *testing.T, cases []ConfigCase, newSpec func() (spec any, common *service.Config)) {
	t.Helper()
	spec, _ := newSpec()
	for _, v := range service.SpecVariables(spec) {
		if !slices.Contains(service.KnownVariables, v) {
			t.Errorf("%s is read by this service but not in service.KnownVariables: every other service would refuse it", v)
		}
	}
	for _, tc := range append(slices.Clip(cases), Misspelt) {
		t.Run(tc.Name, func(t *testing.T) {
			for k, v := range tc.Env {
				t.Setenv(k, v)
			}
			spec, common := newSpec()
			CheckConfig(t, spec, common, tc.Want)
		})
	}
}

// CheckSpecs is CheckConfigs for a service whose Config is C, each case
// loaded into a zero C.
func CheckSpecs[C any, P service.Spec[C]](t *testing.T, cases []ConfigCase) {
	t.Helper()
	CheckConfigs(t, cases, func() (any, *service.Config) {
		var cfg C
		return &cfg, P(&cfg).Common()
	})
}

// Proc is a service run function running in the background.
type Proc struct {
	cancel context.CancelFunc
	done   chan error
	logs   *logBuffer
}

// Start calls run in the background with a JSON logger whose records Proc
// reads. The test fails if run has not returned nil once the test ends;
// call Stop to check it earlier.
func Start(t testing.TB, run func(ctx context.Context, log *slog.Logger) error) *Proc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proc{cancel: cancel, done: make(chan error, 1), logs: &logBuffer{}}
	log := slog.New(slog.NewJSONHandler(p.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() { p.done <- run(ctx, log) }()
	t.Cleanup(func() { p.Stop(t) })
	return p
}

// Stop cancels the run's context and waits up to 30s for run to return,
// failing the test unless it returns nil. It is idempotent.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	p.cancel()
	select {
	case err, ok := <-p.done:
		if ok {
			close(p.done)
			if err != nil {
				t.Errorf("servicetest: run returned %v; logs:\n%s", err, p.logs)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("servicetest: run did not return within 30s of cancellation; logs:\n%s", p.logs)
	}
}

// Log returns the first log record whose msg is msg, waiting up to 10s.
func (p *Proc) Log(t testing.TB, msg string) map[string]any {
	t.Helper()
	var rec map[string]any
	natstest.Eventually(t, 10*time.Second, func() error {
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("run returned early: %v; logs:\n%s", err, p.logs)
		default:
		}
		if rec = p.logs.find(msg); rec == nil {
			return fmt.Errorf("no log record %q yet; logs:\n%s", msg, p.logs)
		}
		return nil
	})
	return rec
}

// CheckHTTP waits for the service's HTTP server (its "http listening" log
// record) and checks that /healthz and /readyz answer 200 and that /metrics
// holds the mesh's metric want.
func (p *Proc) CheckHTTP(t testing.TB, want string) {
	t.Helper()
	addr, _ := p.Log(t, "http listening")["addr"].(string)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		natstest.Eventually(t, 10*time.Second, func() error {
			body, err := get("http://" + addr + path)
			if err != nil {
				return err
			}
			if path == "/metrics" && !strings.Contains(body, want) {
				return fmt.Errorf("GET /metrics has no %s:\n%s", want, body)
			}
			return nil
		})
	}
}

func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b), nil
}

// CheckMicro waits until a micro service named name answers $SRV.INFO on
// nc and returns its info.
func CheckMicro(t testing.TB, nc *nats.Conn, name string) micro.Info {
	t.Helper()
	subj, err := micro.ControlSubject(micro.InfoVerb, name, "")
	if err != nil {
		t.Fatalf("servicetest: %v", err)
	}
	var info micro.Info
	natstest.Eventually(t, 10*time.Second, func() error {
		msg, err := nc.Request(subj, nil, time.Second)
		if err != nil {
			return fmt.Errorf("%s: %w", subj, err)
		}
		return json.Unmarshal(msg.Data, &info)
	})
	return info
}

// MicroStats is the $SRV.STATS answer of the micro service named name on
// nc (one instance of it: the first to answer).
func MicroStats(t testing.TB, nc *nats.Conn, name string) micro.Stats {
	t.Helper()
	subj, err := micro.ControlSubject(micro.StatsVerb, name, "")
	if err != nil {
		t.Fatalf("servicetest: %v", err)
	}
	msg, err := nc.Request(subj, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("servicetest: %s: %v", subj, err)
	}
	var st micro.Stats
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatalf("servicetest: %s: %v", subj, err)
	}
	return st
}

// Endpoint is the stats of st's endpoint name, failing the test if it has
// none, and the counts its data carries (service.Tally).
func Endpoint(t testing.TB, st micro.Stats, name string) (*micro.EndpointStats, map[string]uint64) {
	t.Helper()
	for _, e := range st.Endpoints {
		if e.Name != name {
			continue
		}
		var counts map[string]uint64
		if err := json.Unmarshal(e.Data, &counts); err != nil {
			t.Fatalf("servicetest: stats data of endpoint %s of %s: %s: %v", name, st.Name, e.Data, err)
		}
		return e, counts
	}
	t.Fatalf("servicetest: micro stats of %s have no endpoint %s: %+v", st.Name, name, st.Endpoints)
	return nil, nil
}

// Buffer is a bytes.Buffer safe for concurrent use, for the output of
// code running in the background.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// logBuffer collects JSON log lines.
type logBuffer struct{ Buffer }

func (b *logBuffer) find(msg string) map[string]any {
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == msg {
			return rec
		}
	}
	return nil
}

// SecureEnv is the environment that meets a natstest.RunSecure server: its
// nkey seed and its TLS files in the AGENTMESH_NATS_* variables.
func SecureEnv(sec natstest.Secure) map[string]string {
	v := service.NATSAuthVariables
	return map[string]string{
		v.NatsNkey:          sec.Seed,
		v.NatsTLSCa:         sec.CA,
		v.NatsTLSCert:       sec.ClientCert,
		v.NatsTLSKey:        sec.ClientKey,
		v.NatsTLSServerName: natstest.SecureServerName,
	}
}
