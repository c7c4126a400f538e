package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory/trajectorytest"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/natstest"
)

// TestUpExportFlow is the README's export flow through the CLI: enable,
// grant, run, list, get, verify, withdraw, sweep; and the redaction rule
// commands.
func TestUpExportFlow(t *testing.T) {
	t.Setenv(exports.EnvEnabled, "1")
	m := startUp(t, false)
	ctx := context.Background()
	must := func(want int, args ...string) string { t.Helper(); return m.must(t, ctx, want, args...) }
	dir := t.TempDir()
	good := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(good, []byte("- name: ticket\n  pattern: 'TKT-[0-9]{6}'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	must(exitOK, "redaction", "set", "--file", good)
	if out := must(exitOK, "redaction", "show"); !strings.Contains(out, "ticket") || !strings.Contains(out, "builtin:openai_api_key") {
		t.Errorf("redaction show:\n%s", out)
	}

	if out := must(exitOK, "consent", "grant", "--principal", "alice"); !strings.Contains(out, "default/alice: granted") {
		t.Errorf("consent grant: %s", out)
	}
	const secret = "sk-proj-Zx81kqQ0a9VbNmPoIuYtRe3WsXcD5f6g7h8j9k0lMnBvCx"
	out := must(exitOK, "run", "--principal", "alice", "-p", "fixture", "deploy TKT-123456 with "+secret)
	id := acceptedLine.FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no accepted line:\n%s", out)
	}
	natstest.Eventually(t, 20*time.Second, func() error {
		if out := must(exitOK, "exports", "list"); !strings.Contains(out, id[1]) || strings.Contains(out, "(being written)") {
			return fmt.Errorf("exports list:\n%s", out)
		}
		return nil
	})
	data := must(exitOK, "exports", "get", id[1])
	if err := trajectorytest.Check([]byte(data)); err != nil {
		t.Errorf("exports get: not a schema v1 trajectory: %v", err)
	}
	if strings.Contains(data, secret) || strings.Contains(data, "TKT-123456") || !strings.Contains(data, `"run_id":"`+id[1]+`"`) {
		t.Errorf("exports get:\n%s", data)
	}
	if out := must(exitOK, "exports", "verify", id[1]); !strings.Contains(out, ": ok, sha256 ") {
		t.Errorf("exports verify: %s", out)
	}
	must(exitOK, "consent", "withdraw", "--principal", "alice")
	if out := must(exitOK, "exports", "sweep"); !strings.HasPrefix(out, "swept 1, failed 0, pending 0") {
		t.Errorf("exports sweep: %s", out)
	}
	if out := must(exitOK, "exports", "list"); strings.Contains(out, id[1]) {
		t.Errorf("exports list after the sweep:\n%s", out)
	}
	must(exitFail, "exports", "get", id[1])
}

// TestRedactionCheck: the offline check exits non-zero and names each
// refused rule and its reason.
func TestRedactionCheck(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.yaml", "- name: ticket\n  pattern: 'TKT-[0-9]{6}'\n- name: employee\n  pattern: 'E[0-9]{5,7}'\n")
	bad := file("bad.yaml", "- name: anything\n  pattern: '.*'\n- name: group\n  pattern: '(ab)+'\n- name: ok\n  pattern: 'x[0-9]{2}'\n")
	io, out, errOut := testIO(nil)
	if code := run(context.Background(), []string{"redaction", "check", "--file", good}, io); code != exitOK {
		t.Fatalf("check good: exit %d; stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out.String(), "2 rules accepted") {
		t.Errorf("check good: %s", out)
	}
	io, _, errOut = testIO(nil)
	if code := run(context.Background(), []string{"redaction", "check", "--file", bad}, io); code != exitFail {
		t.Fatalf("check bad: exit %d, want %d; stderr:\n%s", code, exitFail, errOut)
	}
	for _, want := range []string{`"anything"`, `"group"`} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("check bad: stderr does not name rule %s:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut.String(), `"ok"`) {
		t.Errorf("check bad: stderr names the accepted rule:\n%s", errOut)
	}
	io, _, _ = testIO(nil)
	if code := run(context.Background(), []string{"redaction", "check"}, io); code != exitUsage {
		t.Errorf("check without --file: exit %d, want %d", code, exitUsage)
	}
}
