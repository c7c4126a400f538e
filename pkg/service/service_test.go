package service_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	natstest.RunClusterNode() // when a partition test started this binary as a JetStream node
	goleak.VerifyTestMain(m)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHTTPServer(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := service.NewMetrics(reg)
	m.Register(m.Runs)
	m.Runs.WithLabelValues("succeeded", "fixture").Inc()
	var h service.Health
	srv, err := service.ServeHTTP("127.0.0.1:0", reg, &h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	base := "http://" + srv.Addr()
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "no service started") {
		t.Errorf("/readyz with no checks = %d %q, want 503", code, body)
	}
	ready := errors.New("still connecting")
	h.Add("router", func() error { return ready })
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "router: still connecting") {
		t.Errorf("/readyz failing = %d %q", code, body)
	}
	ready = nil
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz passing = %d", code)
	}
	code, body := get(t, base+"/metrics")
	if code != 200 || !strings.Contains(body, `agentmesh_runs_total{adapter="fixture",state="succeeded"} 1`) {
		t.Errorf("/metrics = %d, body lacks the run counter:\n%s", code, body)
	}
}

func TestLoadNamesTheBadVariable(t *testing.T) {
	t.Setenv("AGENTMESH_LEASE_TTL", "soon")
	var cfg service.Config
	err := service.Load(&cfg)
	if err == nil || !strings.Contains(err.Error(), "AGENTMESH_LEASE_TTL") {
		t.Fatalf("Load = %v, want an error naming AGENTMESH_LEASE_TTL", err)
	}
}

func TestLoadReadsOnlyPrefixedNames(t *testing.T) {
	t.Setenv("NATS_URL", "nats://unprefixed:4222")
	t.Setenv("AGENTMESH_HTTP_ADDR", "127.0.0.1:9999")
	t.Setenv("AGENTMESH_LEASE_TTL", "7s")
	var cfg service.Config
	if err := service.Load(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.NatsURL != "nats://127.0.0.1:4222" || cfg.HTTPAddr != "127.0.0.1:9999" || cfg.LeaseTTL.String() != "7s" {
		t.Fatalf("cfg = %+v", cfg)
	}
}
