package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/agentmesh/agentmesh/pkg/workspace"
)

// workspaceTree writes a 10 MiB tree: 640 files of 16 KiB in 32
// directories, half of them text, half random bytes.
func workspaceTree(b *testing.B, dir string) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 16<<10)
	for i := range 640 {
		if i%2 == 0 {
			for j := range buf {
				buf[j] = "abcdefghij klmnop\n"[rng.IntN(18)]
			}
		} else {
			for j := range buf {
				buf[j] = byte(rng.Uint32())
			}
		}
		p := filepath.Join(dir, fmt.Sprintf("d%02d/f%03d", i%32, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func gitCmd(b *testing.B, dir string, args ...string) {
	b.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=b", "-c", "user.email=b@b", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git %v: %v: %s", args, err, out)
	}
}

// BenchmarkWorkspaceMaterialize: a 10 MiB tree materialized as a run's
// workspace, from a file:// bare repo (workspace.Materializer.Git: fetch
// at depth 1, check out, record the base) and from a snapshot already in
// memory (workspace.Unpack, then workspace.Record, as a run does), against
// `cp -a` of the same tree in the same run.
func BenchmarkWorkspaceMaterialize(b *testing.B) {
	root := b.TempDir()
	tree := filepath.Join(root, "tree")
	workspaceTree(b, tree)
	gitCmd(b, tree, "init", "-q")
	gitCmd(b, tree, "add", "-A")
	gitCmd(b, tree, "commit", "-q", "-m", "tree")
	bare := filepath.Join(root, "repo.git")
	gitCmd(b, root, "clone", "-q", "--bare", tree, bare)
	var snapshot bytes.Buffer
	if err := workspace.Pack(tree, &snapshot, 0); err != nil {
		b.Fatal(err)
	}
	url := "file://" + bare
	m := workspace.Materializer{GitAllow: []string{url}, MaxBytes: 64 << 20}
	ctx := context.Background()

	var gitT, snapT, cpT time.Duration
	n := 0
	for b.Loop() {
		n++
		at := filepath.Join(root, fmt.Sprint(n))
		if err := os.Mkdir(at, 0o755); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := m.Git(ctx, wire.GitSource{URL: url, Ref: "main"}, filepath.Join(at, "git-ws"), filepath.Join(at, "git-dir")); err != nil {
			b.Fatal(err)
		}
		gitT += time.Since(start)

		start = time.Now()
		ws := filepath.Join(at, "snap-ws")
		if err := workspace.Unpack(bytes.NewReader(snapshot.Bytes()), ws, 64<<20); err != nil {
			b.Fatal(err)
		}
		if err := workspace.Record(ctx, ws, filepath.Join(at, "snap-git")); err != nil {
			b.Fatal(err)
		}
		snapT += time.Since(start)

		start = time.Now()
		if out, err := exec.Command("cp", "-a", tree, filepath.Join(at, "cp")).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v: %s", err, out)
		}
		cpT += time.Since(start)
		if err := os.RemoveAll(at); err != nil {
			b.Fatal(err)
		}
	}
	per := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(n) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(per(gitT), "git-ms")
	b.ReportMetric(per(snapT), "snapshot-ms")
	b.ReportMetric(per(cpT), "cp-ms")
	b.ReportMetric(float64(gitT)/float64(cpT), "git/cp")
	b.ReportMetric(float64(snapT)/float64(cpT), "snapshot/cp")
}
