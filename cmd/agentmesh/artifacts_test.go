package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/workspace"
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
	ref, err := store.Put(ctx, "default", "run-1", runner.PatchName, strings.NewReader(patch))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, "default", "run-1", "archive.tar.gz", strings.NewReader("tarball")); err != nil {
		t.Fatal(err)
	}
	must := func(want int, args ...string) string { t.Helper(); return m.must(t, ctx, want, args...) }
	must(exitOK, "run", "-p", "fixture", "--run-id", "run-1", "hi") // the run the artifacts are of
	out := must(exitOK, "artifacts", "list", "run-1")
	if !strings.Contains(out, "patch") || !strings.Contains(out, ref.SHA256) || !strings.Contains(out, "archive.tar.gz") {
		t.Errorf("artifacts list:\n%s", out)
	}
	var rec artifacts.Record
	lines := strings.Split(strings.TrimSpace(must(exitOK, "artifacts", "list", "--json", "run-1")), "\n")
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &rec) != nil || rec.Name != runner.PatchName || rec.Object != ref.Name {
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

	// Another tenant's run, and a typo, are runs not found: exit 1,
	// never an empty table.
	for _, args := range [][]string{{"list", "--tenant", "other", "run-1"}, {"get", "--tenant", "other", "run-1"}, {"list", "run-l"},
		{"get", "run-l"}, {"apply", "--dir", t.TempDir(), "run-l"}} {
		code, out, errOut := m.cli(ctx, append([]string{"artifacts"}, args...)...)
		if code != exitFail || out != "" || !strings.Contains(errOut, "not found") {
			t.Errorf("artifacts %q: exit %d, stdout %q, stderr %q; want exit %d, run not found", args, code, out, errOut, exitFail)
		}
	}
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

// writeTree writes files (path → content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree reads every regular file under dir, by its slash path.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWorkspacePushAndApply: a pushed directory comes back as its content
// address, and applying a run's patch to a fresh checkout of its base
// reproduces the agent's tree byte for byte.
func TestWorkspacePushAndApply(t *testing.T) {
	m := startUp(t, false)
	ctx := context.Background()
	store := meshArtifacts(t, m)
	must := func(want int, args ...string) string { t.Helper(); return m.must(t, ctx, want, args...) }
	base := map[string]string{"README.md": "hello\n", "src/main.go": "package main\n", "gone.txt": "bye\n"}

	src := t.TempDir()
	writeTree(t, src, base)
	id := strings.TrimSpace(must(exitOK, "workspace", "push", src))
	if !strings.HasPrefix(id, "sha256:") || len(id) != len("sha256:")+64 {
		t.Fatalf("workspace push printed %q, want a content address", id)
	}
	if again := strings.TrimSpace(must(exitOK, "workspace", "push", src)); again != id {
		t.Fatalf("the same tree pushed again is %s, want %s", again, id)
	}
	rc, _, err := store.OpenSnapshot(ctx, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	unpacked := filepath.Join(t.TempDir(), "unpacked")
	err = workspace.Unpack(rc, unpacked, 0)
	_ = rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, unpacked); !maps.Equal(got, base) {
		t.Fatalf("the snapshot holds %v, want %v", got, base)
	}
	must(exitUsage, "workspace", "push", filepath.Join(src, "README.md"))

	// The agent's change, as a runner records it.
	agent := t.TempDir()
	writeTree(t, agent, base)
	gitDir := filepath.Join(t.TempDir(), "git")
	if err := workspace.Record(ctx, agent, gitDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(agent, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	writeTree(t, agent, map[string]string{"README.md": "hello, world\n", "src/new.bin": "\x00\x01\x02\xff no newline"})
	var patch strings.Builder
	if err := workspace.Diff(ctx, agent, gitDir, &patch, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, "default", "run-1", runner.PatchName, strings.NewReader(patch.String())); err != nil {
		t.Fatal(err)
	}

	fresh := t.TempDir()
	writeTree(t, fresh, base)
	if out := must(exitOK, "artifacts", "apply", "--dir", fresh, "run-1"); !strings.Contains(out, "applied") {
		t.Errorf("artifacts apply: %s", out)
	}
	if got, want := readTree(t, fresh), readTree(t, agent); !maps.Equal(got, want) {
		t.Fatalf("the checkout after apply holds %q, want the agent's %q", got, want)
	}
	must(exitFail, "artifacts", "apply", "--dir", fresh, "run-1") // already applied: git refuses, writing nothing
	must(exitFail, "artifacts", "apply", "--dir", t.TempDir(), "no-such-run")
}
