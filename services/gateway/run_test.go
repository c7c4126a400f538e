package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun: the gateway serves the API over HTTPS with the configured
// certificate, registers with micro, and answers a key's request.
func TestRun(t *testing.T) {
	tf := natstest.WriteTLS(t, "localhost")
	s, nc, p := servicetest.Serve(t, map[string]string{
		"AGENTMESH_GATEWAY_ADDR":     "127.0.0.1:0",
		"AGENTMESH_GATEWAY_TLS_CERT": tf.ServerCert,
		"AGENTMESH_GATEWAY_TLS_KEY":  tf.ServerKey,
		"AGENTMESH_HTTP_ADDR":        "127.0.0.1:0",
		"AGENTMESH_PROFILES_DIR":     filepath.Join(servicetest.RepoRoot(), "profiles"),
	}, run)
	p.CheckHTTP(t, "go_goroutines")
	// A mesh behind it, to answer a run.
	adapters, err := catalog.Dirs{FixtureDir: t.TempDir()}.Registry(profile.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Serve(t, servicetest.Deps(t, s, topology.Config{}), profile.Builtin(), adapters, mesh.Config{}, 30*time.Second)
	addr, _ := p.Log(t, "gateway listening")["addr"].(string)
	if info := servicetest.CheckMicro(t, nc, "agentmesh-gateway"); info.Metadata["addr"] != addr || info.Metadata["tls"] != "true" {
		t.Errorf("micro metadata %v, want addr %s and tls true", info.Metadata, addr)
	}
	_, port, _ := net.SplitHostPort(addr)
	pem, err := os.ReadFile(tf.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := gateway.OpenKeys(context.Background(), js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := keys.Create(context.Background(), "acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ResponseHeaderTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	plain := &http.Transport{}
	defer plain.CloseIdleConnections()
	if resp, err := (&http.Client{Transport: plain}).Get("http://localhost:" + port + "/v1/models"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the HTTPS gateway: %d, want 400", resp.StatusCode)
		}
	}
	for _, tt := range []struct {
		key  string
		want int
	}{{key, http.StatusOK}, {key + "x", http.StatusUnauthorized}} {
		req, _ := http.NewRequest("GET", "https://localhost:"+port+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+tt.key)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET /v1/models: %d %s, want %d", resp.StatusCode, b, tt.want)
		}
		if tt.want == http.StatusOK && !strings.Contains(string(b), `"id":"fixture"`) {
			t.Errorf("GET /v1/models: %s, want the shipped profiles", b)
		}
	}
	req, _ := http.NewRequest("POST", "https://localhost:"+port+"/v1/chat/completions",
		strings.NewReader(`{"model":"fixture","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "echo: hi") {
		t.Errorf("POST /v1/chat/completions: %d %s", resp.StatusCode, b)
	}
	// Each answer is counted by route and status; the run's first token
	// is timed.
	for _, want := range []string{
		`agentmesh_gateway_requests_total{code="200",endpoint="GET /v1/models"} 1`,
		`agentmesh_gateway_requests_total{code="401",endpoint="GET /v1/models"} 1`,
		`agentmesh_gateway_requests_total{code="200",endpoint="POST /v1/chat/completions"} 1`,
		`agentmesh_gateway_request_duration_seconds_count{endpoint="POST /v1/chat/completions"} 1`,
		`agentmesh_gateway_time_to_first_token_seconds_count{endpoint="POST /v1/chat/completions"} 1`,
	} {
		p.CheckHTTP(t, want)
	}
	p.Stop(t)
}

func TestConfig(t *testing.T) {
	servicetest.CheckSpecs[Config](t, []servicetest.ConfigCase{
		{Name: "defaults", Env: nil, Want: ""},
		{Name: "addr", Env: map[string]string{"AGENTMESH_GATEWAY_ADDR": "8080"}, Want: "AGENTMESH_GATEWAY_ADDR: must be host:port"},
		{Name: "body", Env: map[string]string{"AGENTMESH_GATEWAY_MAX_BODY_BYTES": "10"}, Want: "AGENTMESH_GATEWAY_MAX_BODY_BYTES: must be at least 1024"},
		{Name: "cert without key", Env: map[string]string{"AGENTMESH_GATEWAY_TLS_CERT": "cert.pem"}, Want: "AGENTMESH_GATEWAY_TLS_KEY: must be set with the other"},
	})
}
