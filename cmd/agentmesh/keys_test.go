package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
)

var gatewayLine = regexp.MustCompile(`msg="gateway listening" addr=(\S+)`)

// TestUpGatewayKeys: agentmesh up --gateway serves the HTTP API; a key
// from agentmesh keys create is accepted, listed by id (never the key),
// and refused once revoked.
func TestUpGatewayKeys(t *testing.T) {
	m := startUpOptions(t, upOptions{listen: "127.0.0.1:0", dataDir: t.TempDir(), http: "", gateway: "127.0.0.1:0",
		fixtureDir: "../../testdata/fixture", profiles: "../../profiles", workspace: t.TempDir()})
	ctx := context.Background()
	must := func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := m.cli(ctx, args...)
		if code != want {
			t.Fatalf("agentmesh %s: exit %d, want %d; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out, errOut
	}
	var addr string
	natstest.Eventually(t, 10*time.Second, func() error {
		sub := gatewayLine.FindStringSubmatch(m.stderr.String())
		if sub == nil {
			return errors.New("no gateway listening line yet")
		}
		addr = sub[1]
		return nil
	})
	out, _ := must(exitOK, "keys", "create", "--tenant", "acme", "--principal", "alice")
	key := strings.TrimSpace(out)
	other, _ := must(exitOK, "keys", "create", "--tenant", "globex", "--principal", "bob")
	list, _ := must(exitOK, "keys", "list", "--tenant", "acme")
	if strings.Count(list, "\n") != 1 || !strings.Contains(list, "acme/alice") || strings.Contains(list, key) {
		t.Errorf("keys list --tenant acme:\n%s\nwant one line for acme/alice without the key", list)
	}
	all, _ := must(exitOK, "keys", "list", "--all", "--json")
	if strings.Count(all, "\n") != 2 || strings.Contains(all, strings.TrimSpace(other)) {
		t.Errorf("keys list --all --json:\n%s\nwant both keys' records, no key", all)
	}

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	chat := func(key string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions",
			strings.NewReader(`{"model":"fixture","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := chat(key); code != http.StatusOK || !strings.Contains(body, `"content":"echo: hi"`) {
		t.Errorf("chat with a fresh key: %d %s", code, body)
	}
	id := strings.Fields(list)[0]
	if out, _ := must(exitOK, "keys", "revoke", id); !strings.Contains(out, "revoked "+id) {
		t.Errorf("keys revoke: %s", out)
	}
	if code, body := chat(key); code != http.StatusUnauthorized {
		t.Errorf("chat with a revoked key: %d %s, want 401", code, body)
	}
	must(exitFail, "keys", "revoke", id)
	if strings.Contains(m.stderr.String(), key) {
		t.Error("up's log holds a key")
	}
}
