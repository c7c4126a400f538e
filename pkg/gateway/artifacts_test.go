package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/natstest"
)

// A run's artifacts are listed and served to its tenant's keys only, with
// typed errors for what is not there.
func TestRunArtifacts(t *testing.T) {
	e := start(t, gateway.Config{})
	ctx := context.Background()
	code, body := e.do(t, e.keyA, "POST", "/v1/runs", `{"profile":"fixture","request":{"prompt":"change it"}}`, nil)
	if code != http.StatusAccepted {
		t.Fatalf("POST /v1/runs: %d %s", code, body)
	}
	var sub struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(body), &sub); err != nil {
		t.Fatal(err)
	}
	id := sub.RunID
	natstest.Eventually(t, 10*time.Second, func() error {
		if code, body := e.do(t, e.keyA, "GET", "/v1/runs/"+id, "", nil); code != http.StatusOK {
			return fmt.Errorf("GET /v1/runs/%s: %d %s", id, code, body)
		}
		return nil
	})
	const patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n"
	ref, err := e.artifacts.Put(ctx, "acme", id, "patch", strings.NewReader(patch))
	if err != nil {
		t.Fatal(err)
	}

	code, body = e.do(t, e.keyA, "GET", "/v1/runs/"+id+"/artifacts", "", nil)
	var list struct {
		RunID     string `json:"run_id"`
		Artifacts []struct {
			Name, Object, SHA256 string
			Size                 int64
		} `json:"artifacts"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || list.RunID != id || len(list.Artifacts) != 1 {
		t.Fatalf("list: %d %s", code, body)
	}
	if a := list.Artifacts[0]; a.Name != "patch" || a.Object != ref.Name || a.SHA256 != ref.SHA256 || a.Size != ref.Size {
		t.Fatalf("listed %+v, want patch of %+v", a, ref)
	}
	resp := e.open(t, e.keyA, "GET", "/v1/runs/"+id+"/artifacts/patch", "", nil)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(b) != patch || resp.Header.Get("X-Artifact-SHA256") != ref.SHA256 {
		t.Fatalf("get: %d %q %v %v; want the patch", resp.StatusCode, b, resp.Header, err)
	}

	for _, tt := range []struct {
		name, key, path string
		wantStatus      int
		wantCode        string
	}{
		{name: "another tenant's list", key: e.keyB, path: "/v1/runs/" + id + "/artifacts", wantStatus: http.StatusNotFound, wantCode: "run_not_found"},
		{name: "another tenant's get", key: e.keyB, path: "/v1/runs/" + id + "/artifacts/patch", wantStatus: http.StatusNotFound, wantCode: "artifact_not_found"},
		{name: "no such artifact", key: e.keyA, path: "/v1/runs/" + id + "/artifacts/archive", wantStatus: http.StatusNotFound, wantCode: "artifact_not_found"},
		{name: "bad name", key: e.keyA, path: "/v1/runs/" + id + "/artifacts/..patch", wantStatus: http.StatusBadRequest, wantCode: "invalid_request"},
		{name: "bad run id", key: e.keyA, path: "/v1/runs/a.b/artifacts/patch", wantStatus: http.StatusBadRequest, wantCode: "invalid_request"},
	} {
		code, body := e.do(t, tt.key, "GET", tt.path, "", nil)
		var got struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if code != tt.wantStatus || json.Unmarshal([]byte(body), &got) != nil || got.Error.Code != tt.wantCode {
			t.Errorf("%s: %d %s, want %d %s", tt.name, code, body, tt.wantStatus, tt.wantCode)
		}
	}

	// Withdrawn, the artifact is gone from both routes.
	if err := e.artifacts.Withdraw(ctx, "acme", id); err != nil {
		t.Fatal(err)
	}
	if code, body := e.do(t, e.keyA, "GET", "/v1/runs/"+id+"/artifacts", "", nil); code != http.StatusOK || !strings.Contains(body, `"artifacts":[]`) {
		t.Errorf("list after withdraw: %d %s", code, body)
	}
	if code, _ := e.do(t, e.keyA, "GET", "/v1/runs/"+id+"/artifacts/patch", "", nil); code != http.StatusNotFound {
		t.Errorf("get after withdraw: %d, want 404", code)
	}
}
