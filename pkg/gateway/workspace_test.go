package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// A workspace source is checked at the door of the runs API and of chat
// completions and responses (agentmesh_workspace): each refusal is a 400
// whose param names the field — a malformed or unknown snapshot, another
// tenant's, one over the store's limit, two sources, none, a git source
// without a URL, a profile that is not an agent CLI, a continuation
// naming one. Nothing of a refused request reaches the mesh.
func TestWorkspaceAtTheDoor(t *testing.T) {
	cliProfile := profile.Profile{Name: "pi", Adapter: "pi", Transport: wire.TransportSubprocess, Model: "fake-model",
		Pricing: map[string]string{"input": "0", "output": "0", "cache_read": "0", "cache_write": "0"},
		Binary:  "agentmesh-test-no-such-cli", InstallHint: "none: the runs of this test are refused at the door"}
	fixture, _, _ := profile.Builtin().Resolve("fixture")
	profiles, err := profile.New(*fixture, cliProfile)
	if err != nil {
		t.Fatal(err)
	}
	e := startWith(t, gateway.Config{}, profiles)
	ctx := context.Background()
	stored, err := e.artifacts.PushSnapshot(ctx, "globex", bytes.NewReader([]byte("not even a tar: the door reads only the record")))
	if err != nil {
		t.Fatal(err)
	}
	unknown := "sha256:" + strings.Repeat("0", 64)

	for _, tt := range []struct {
		name, path, body    string
		wantCode, wantParam string
	}{
		{"malformed snapshot", "/v1/runs", `{"profile":"pi","request":{"prompt":"x"},"workspace":{"snapshot":"sha256:abc"}}`, "invalid_request", "workspace.snapshot"},
		{"unknown snapshot", "/v1/runs", `{"profile":"pi","request":{"prompt":"x"},"workspace":{"snapshot":"` + unknown + `"}}`, "snapshot_not_found", "workspace.snapshot"},
		{"another tenant's snapshot", "/v1/runs", `{"profile":"pi","request":{"prompt":"x"},"workspace":{"snapshot":"` + stored + `"}}`, "snapshot_not_found", "workspace.snapshot"},
		{"two sources", "/v1/runs", `{"profile":"pi","request":{"prompt":"x"},"workspace":{"snapshot":"` + unknown + `","git":{"url":"file:///r.git"}}}`, "invalid_request", "workspace"},
		{"no source", "/v1/runs", `{"profile":"pi","request":{"prompt":"x"},"workspace":{}}`, "invalid_request", "workspace"},
		{"git without a URL", "/v1/runs", `{"profile":"pi","request":{"prompt":"x"},"workspace":{"git":{"ref":"main"}}}`, "invalid_request", "workspace.git.url"},
		{"git ref an option", "/v1/runs", `{"profile":"pi","request":{"prompt":"x"},"workspace":{"git":{"url":"file:///r.git","ref":"--upload-pack=x"}}}`, "invalid_request", "workspace.git.ref"},
		{"not an agent CLI", "/v1/runs", `{"profile":"fixture","request":{"prompt":"x"},"workspace":{"snapshot":"` + unknown + `"}}`, "unsupported", "workspace"},
		{"chat, unknown snapshot", "/v1/chat/completions", `{"model":"pi","messages":[{"role":"user","content":"x"}],"agentmesh_workspace":{"snapshot":"` + unknown + `"}}`, "snapshot_not_found", "agentmesh_workspace.snapshot"},
		{"responses, git without a URL", "/v1/responses", `{"model":"pi","input":"x","agentmesh_workspace":{"git":{}}}`, "invalid_request", "agentmesh_workspace.git.url"},
		{"responses, not an agent CLI", "/v1/responses", `{"model":"fixture","input":"x","agentmesh_workspace":{"snapshot":"` + unknown + `"}}`, "unsupported", "agentmesh_workspace"},
	} {
		code, body := e.do(t, e.keyA, "POST", tt.path, tt.body, nil)
		var got struct {
			Error struct {
				Type    string  `json:"type"`
				Code    string  `json:"code"`
				Param   *string `json:"param"`
				Message string  `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil || code != http.StatusBadRequest || got.Error.Type != "invalid_request_error" ||
			got.Error.Code != tt.wantCode || got.Error.Param == nil || *got.Error.Param != tt.wantParam || !strings.HasPrefix(got.Error.Message, tt.wantParam+": ") {
			t.Errorf("%s: %d %s; want 400 %s naming %s", tt.name, code, body, tt.wantCode, tt.wantParam)
		}
	}

	// Over the store's limit: a gateway whose store has a smaller limit
	// than the one that took the push refuses it, naming the field.
	junk, err := e.artifacts.PushSnapshot(ctx, "acme", bytes.NewReader([]byte("not a tar: the runner refuses to unpack it")))
	if err != nil {
		t.Fatal(err)
	}
	small, err := artifacts.OpenConfig(ctx, e.js, artifacts.Config{SnapshotLimit: 8})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(e.client, e.keys, e.turns, profiles, slog.New(slog.DiscardHandler), gateway.Config{})
	if err != nil {
		t.Fatal(err)
	}
	g.SetArtifacts(small)
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/runs", strings.NewReader(`{"profile":"pi","request":{"prompt":"x"},"workspace":{"snapshot":"`+junk+`"}}`))
	req.Header.Set("Authorization", "Bearer "+e.keyA)
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"code":"snapshot_too_large"`) || !strings.Contains(string(b), `"param":"workspace.snapshot"`) {
		t.Errorf("a snapshot over the store's limit: %d %s; want 400 snapshot_too_large naming workspace.snapshot", resp.StatusCode, b)
	}

	// A stored snapshot passes the door; the runner that materializes it
	// cannot unpack what is not a snapshot's tar, and the run's error
	// names the field too.
	id := e.submit(t, e.keyA, `{"profile":"pi","request":{"prompt":"x"},"workspace":{"snapshot":"`+junk+`"}}`)
	var rec wire.RunRecord
	natstest.Eventually(t, 20*time.Second, func() error {
		_, body := e.do(t, e.keyA, "GET", "/v1/runs/"+id, "", nil)
		if err := json.Unmarshal([]byte(body), &rec); err != nil {
			return err
		}
		if !rec.State.Terminal() {
			return fmt.Errorf("run %s is %s", id, rec.State)
		}
		return nil
	})
	if rec.State == wire.StateSucceeded || rec.Error == nil || !strings.HasPrefix(rec.Error.Message, "workspace.snapshot: ") {
		t.Errorf("the run of a snapshot that is no tar ended %s with %+v; want an error naming workspace.snapshot", rec.State, rec.Error)
	}
}
