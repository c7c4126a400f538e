package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
)

// meshArtifacts is the artifact store of m, as a runner writes it.
func meshArtifacts(t *testing.T, m *testMesh) *artifacts.Store {
	t.Helper()
	_, js := natstest.ConnectURL(t, m.url)
	s, err := artifacts.Open(context.Background(), js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestArtifactsListGet: a run's artifacts are listed and fetched byte for
// byte, for the --tenant's runs only, with the exit codes of the other
// commands for bad input and for what is not there.
func TestArtifactsListGet(t *testing.T) {
	m := startUp(t, false)
	ctx := context.Background()
	store := meshArtifacts(t, m)
	const patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
	ref, err := store.Put(ctx, "default", "run-1", "patch", strings.NewReader(patch))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, "default", "run-1", "archive.tar.gz", strings.NewReader("tarball")); err != nil {
		t.Fatal(err)
	}
	must := func(want int, args ...string) string { t.Helper(); return m.must(t, ctx, want, args...) }
	out := must(exitOK, "artifacts", "list", "run-1")
	if !strings.Contains(out, "patch") || !strings.Contains(out, ref.SHA256) || !strings.Contains(out, "archive.tar.gz") {
		t.Errorf("artifacts list:\n%s", out)
	}
	var rec artifacts.Record
	lines := strings.Split(strings.TrimSpace(must(exitOK, "artifacts", "list", "--json", "run-1")), "\n")
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &rec) != nil || rec.Name != "patch" || rec.Object != ref.Name {
		t.Errorf("artifacts list --json:\n%s", strings.Join(lines, "\n"))
	}
	if got := must(exitOK, "artifacts", "get", "run-1"); got != patch {
		t.Errorf("artifacts get = %q, want the patch", got)
	}
	file := filepath.Join(t.TempDir(), "out.tar.gz")
	must(exitOK, "artifacts", "get", "-o", file, "run-1", "archive.tar.gz")
	if b, err := os.ReadFile(file); err != nil || string(b) != "tarball" {
		t.Errorf("artifacts get -o: %q, %v", b, err)
	}

	if out := must(exitOK, "artifacts", "list", "--tenant", "other", "run-1"); strings.Contains(out, "patch") {
		t.Errorf("another tenant's list:\n%s", out)
	}
	must(exitFail, "artifacts", "get", "--tenant", "other", "run-1")
	must(exitFail, "artifacts", "get", "run-1", "missing")
	must(exitUsage, "artifacts", "get", "run.1")
	must(exitUsage, "artifacts", "get", "run-1", "../patch")
	must(exitUsage, "artifacts", "list")
	must(exitUsage, "artifacts", "frobnicate", "run-1")

	if err := store.Withdraw(ctx, "default", "run-1"); err != nil {
		t.Fatal(err)
	}
	if out := must(exitOK, "artifacts", "list", "run-1"); strings.Contains(out, "patch") {
		t.Errorf("list after withdraw:\n%s", out)
	}
	missing := filepath.Join(t.TempDir(), "patch")
	must(exitFail, "artifacts", "get", "-o", missing, "run-1")
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a failed get left %s: %v", missing, err)
	}
}
