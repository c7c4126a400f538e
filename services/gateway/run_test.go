package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	_, nc, p := servicetest.Serve(t, map[string]string{
		"AGENTMESH_GATEWAY_ADDR": "127.0.0.1:0",
		"AGENTMESH_HTTP_ADDR":    "127.0.0.1:0",
		"AGENTMESH_PROFILES_DIR": filepath.Join(servicetest.RepoRoot(), "profiles"),
	}, run)
	p.CheckHTTP(t, "go_goroutines")
	addr, _ := p.Log(t, "gateway listening")["addr"].(string)
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
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	for _, tt := range []struct {
		key  string
		want int
	}{{key, http.StatusOK}, {key + "x", http.StatusUnauthorized}} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/models", nil)
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
	p.Stop(t)
}

func TestConfig(t *testing.T) {
	servicetest.CheckSpecs[Config](t, []servicetest.ConfigCase{
		{Name: "defaults", Env: nil, Want: ""},
		{Name: "addr", Env: map[string]string{"AGENTMESH_GATEWAY_ADDR": "8080"}, Want: "AGENTMESH_GATEWAY_ADDR: must be host:port"},
		{Name: "body", Env: map[string]string{"AGENTMESH_GATEWAY_MAX_BODY_BYTES": "10"}, Want: "AGENTMESH_GATEWAY_MAX_BODY_BYTES: must be at least 1024"},
	})
}
