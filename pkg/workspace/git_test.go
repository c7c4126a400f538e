package workspace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/agentmesh/agentmesh/pkg/workspace/workspacetest"
)

// runGit runs git as the package does (its config and environment) in
// dir, for the tests' own set-up.
func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append(append([]string{}, gitConfig...), args...)...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return string(out)
}

// bareRepo makes a bare repository holding one commit of files (and the
// extra set-up mutate does in the work tree) on branch main, and returns
// its file:// URL.
func bareRepo(t testing.TB, files map[string]string, mutate func(work string)) string {
	t.Helper()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(t, work, "init", "-q", "--template=")
	// The package's attributes, so that the commit holds the bytes
	// written, CRLF and all, whatever the tree's .gitattributes say.
	workspacetest.WriteFiles(t, work, map[string]string{".git/info/attributes": attributes})
	workspacetest.WriteFiles(t, work, files)
	if mutate != nil {
		mutate(work)
	}
	runGit(t, work, "add", "-A", "-f")
	runGit(t, work, "commit", "-q", "--no-verify", "-m", "source")
	bare := filepath.Join(root, "repo.git")
	runGit(t, root, "clone", "-q", "--bare", "--template=", work, bare)
	return "file://" + bare
}

var sourceFiles = map[string]string{
	"README.md":       "hello\r\nworld\r\n", // CRLF kept as is
	"main.go":         "package main\n\nfunc main() {}\n",
	"gone.txt":        "to be deleted\n",
	"old/name.txt":    strings.Repeat("a line that moves with its file\n", 20),
	"logo.bin":        "\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\xff\xfe",
	"script.sh":       "#!/bin/sh\necho hi\n",
	".gitattributes":  "* text=auto eol=crlf\n*.bin filter=evil\n",
	"ignored/.keepme": "",
	".gitignore":      "ignored/\n*.log\n",
}

// agentChanges is what the fake agent does to a workspace: every kind of
// change a patch has to carry.
func agentChanges(t testing.TB, dir string) {
	t.Helper()
	workspacetest.WriteFiles(t, dir, map[string]string{
		"main.go":          "package main\n\nfunc main() { println(\"changed\") }\n",
		"new/dir/added.go": "package dir\n",
		"blob.bin":         string([]byte{0, 1, 2, 3, 255, 254, 0, 0, 10, 13}),
		"logo.bin":         "\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x01\x02",
		"build.log":        "an ignored file, still a change\n",
		"empty":            "",
	})
	if err := os.Remove(filepath.Join(dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "new/place"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "old/name.txt"), filepath.Join(dir, "new/place/name.txt")); err != nil {
		t.Fatal(err)
	}
	// A patch carries files, not directories: an emptied one goes too.
	if err := os.Remove(filepath.Join(dir, "old")); err != nil {
		t.Fatal(err)
	}
	chmod(t, filepath.Join(dir, "script.sh"), 0o755)
	symlink(t, "../main.go", filepath.Join(dir, "new/link"))
}

func materialize(t testing.TB, m Materializer, url string) (dir, gitDir string) {
	t.Helper()
	root := t.TempDir()
	dir, gitDir = filepath.Join(root, "ws"), filepath.Join(root, "git")
	if err := m.Git(context.Background(), wire.GitSource{URL: url, Ref: "main"}, dir, gitDir); err != nil {
		t.Fatalf("Git: %v", err)
	}
	return dir, gitDir
}

func allowAll(url string) Materializer {
	return Materializer{GitAllow: []string{url}, MaxBytes: 1 << 20}
}

// sourced is a bare repo of sourceFiles, a materializer allowing it, and
// one workspace materialized from it.
func sourced(t testing.TB) (m Materializer, url, dir, gitDir string) {
	t.Helper()
	url = bareRepo(t, sourceFiles, nil)
	m = allowAll(url)
	dir, gitDir = materialize(t, m, url)
	return m, url, dir, gitDir
}

func TestPatchRoundTripByteForByte(t *testing.T) {
	m, url, dir, gitDir := sourced(t)
	for name, body := range sourceFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != body {
			t.Fatalf("checkout of %s: %q, %v; want %q", name, b, err, body)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, ".git")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the workspace has a .git: %v", err)
	}
	agentChanges(t, dir)

	var patch bytes.Buffer
	if err := Diff(context.Background(), dir, gitDir, &patch, 1<<20); err != nil {
		t.Fatalf("Diff: %v", err)
	}
	for _, want := range []string{"GIT binary patch", "deleted file mode", "rename from old/name.txt", "old mode 100644", "new mode 100755", "build.log"} {
		if !strings.Contains(patch.String(), want) {
			t.Errorf("patch has no %q:\n%s", want, patch.String())
		}
	}

	fresh, _ := materialize(t, m, url)
	if err := Apply(context.Background(), fresh, bytes.NewReader(patch.Bytes()), 1<<20); err != nil {
		t.Fatalf("Apply: %v\n%s", err, patch.String())
	}
	sameTree(t, dir, fresh)
}

func TestDiffIsCumulativeAgainstTheSource(t *testing.T) {
	url := bareRepo(t, sourceFiles, nil)
	m := allowAll(url)
	ctx := context.Background()
	// Turn 1 on one workspace.
	one, gitOne := materialize(t, m, url)
	workspacetest.WriteFiles(t, one, map[string]string{"turn1.txt": "one\n", "main.go": "package main // 1\n"})
	var p1 bytes.Buffer
	if err := Diff(ctx, one, gitOne, &p1, 0); err != nil {
		t.Fatal(err)
	}
	// Turn 2 elsewhere: the source, the last patch applied, the base still
	// the source.
	two, gitTwo := materialize(t, m, url)
	if err := Apply(ctx, two, bytes.NewReader(p1.Bytes()), 0); err != nil {
		t.Fatal(err)
	}
	workspacetest.WriteFiles(t, two, map[string]string{"turn2.txt": "two\n", "main.go": "package main // 2\n"})
	var p2 bytes.Buffer
	if err := Diff(ctx, two, gitTwo, &p2, 0); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p2.String(), "turn1.txt") || !strings.Contains(p2.String(), "turn2.txt") {
		t.Fatalf("turn 2's patch is not cumulative:\n%s", p2.String())
	}
	three, _ := materialize(t, m, url)
	if err := Apply(ctx, three, bytes.NewReader(p2.Bytes()), 0); err != nil {
		t.Fatal(err)
	}
	sameTree(t, two, three)
}

func TestDiffAndApplyLimits(t *testing.T) {
	m, url, dir, gitDir := sourced(t)
	ctx := context.Background()
	workspacetest.WriteFiles(t, dir, map[string]string{"big.txt": strings.Repeat("x\n", 5000)})
	var tl *TooLargeError
	if err := Diff(ctx, dir, gitDir, &bytes.Buffer{}, 1000); !errors.As(err, &tl) || tl.What != "patch" {
		t.Errorf("Diff over the limit: %v", err)
	}
	var patch bytes.Buffer
	if err := Diff(ctx, dir, gitDir, &patch, 0); err != nil {
		t.Fatal(err)
	}
	fresh, _ := materialize(t, m, url)
	before := treeOf(t, fresh)
	if err := Apply(ctx, fresh, bytes.NewReader(patch.Bytes()), 1000); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Apply over the limit: %v", err)
	}
	if after := treeOf(t, fresh); len(after) != len(before) || after["big.txt"] != "" {
		t.Error("Apply over the limit changed the checkout")
	}
}

func TestApplyWritesNothingUnlessAllApplies(t *testing.T) {
	m, url, dir, gitDir := sourced(t)
	ctx := context.Background()
	workspacetest.WriteFiles(t, dir, map[string]string{"new.txt": "new\n", "main.go": "package main // changed\n"})
	var patch bytes.Buffer
	if err := Diff(ctx, dir, gitDir, &patch, 0); err != nil {
		t.Fatal(err)
	}
	fresh, _ := materialize(t, m, url)
	workspacetest.WriteFiles(t, fresh, map[string]string{"main.go": "package main // someone else's\n"})
	if err := Apply(ctx, fresh, bytes.NewReader(patch.Bytes()), 0); err == nil {
		t.Fatal("Apply onto a conflicting checkout succeeded")
	}
	if _, err := os.Lstat(filepath.Join(fresh, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed Apply wrote new.txt: %v", err)
	}
}

// A .git the agent plants in its workspace, or a checkout's own .git
// config, is never read: no hook, fsmonitor or config of theirs runs.
func TestNoPlantedConfigOrHookRuns(t *testing.T) {
	m, url, dir, gitDir := sourced(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "pwned")
	evil := "#!/bin/sh\ntouch " + marker + "\n"
	workspacetest.WriteFiles(t, dir, map[string]string{
		".git/config":              "[core]\n\tfsmonitor = touch " + marker + "\n\thooksPath = hooks\n",
		".git/hooks/pre-commit":    evil,
		".git/hooks/post-checkout": evil,
		"hooks/pre-commit":         evil,
		"changed.txt":              "x\n",
	})
	chmod(t, filepath.Join(dir, ".git/hooks/pre-commit"), 0o755)
	chmod(t, filepath.Join(dir, "hooks/pre-commit"), 0o755)
	var patch bytes.Buffer
	if err := Diff(ctx, dir, gitDir, &patch, 0); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(patch.String(), ".git/") {
		t.Errorf("the patch carries the planted .git:\n%s", patch.String())
	}
	if err := Record(ctx, dir, gitDir); err != nil {
		t.Fatal(err)
	}
	// Apply into a checkout whose own .git is hostile.
	fresh, _ := materialize(t, m, url)
	workspacetest.WriteFiles(t, fresh, map[string]string{".git/config": "[core]\n\tfsmonitor = touch " + marker + "\n[apply]\n\twhitespace = error\n"})
	if err := Apply(ctx, fresh, bytes.NewReader(patch.Bytes()), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a planted command ran: %v", err)
	}
}

func TestGitRefusesBadSources(t *testing.T) {
	url := bareRepo(t, sourceFiles, nil)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		m    Materializer
		src  wire.GitSource
		want error
	}{
		{"outside the allow-list", Materializer{GitAllow: []string{"file:///nowhere/"}}, wire.GitSource{URL: url}, ErrNotAllowed},
		{"empty allow-list", Materializer{}, wire.GitSource{URL: url}, ErrNotAllowed},
		{"an option for a URL", Materializer{GitAllow: []string{"-"}}, wire.GitSource{URL: "--upload-pack=touch /tmp/x"}, ErrNotAllowed},
		{"an option for a ref", allowAll(url), wire.GitSource{URL: url, Ref: "--upload-pack=x"}, ErrUnsafePath},
		{"a tree over the limit", Materializer{GitAllow: []string{url}, MaxBytes: 100}, wire.GitSource{URL: url, Ref: "main"}, ErrTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			err := c.m.Git(ctx, c.src, filepath.Join(root, "ws"), filepath.Join(root, "git"))
			if !errors.Is(err, c.want) {
				t.Fatalf("Git: %v, want %v", err, c.want)
			}
			var na *NotAllowedError
			if c.want == ErrNotAllowed && (!errors.As(err, &na) || na.URL != c.src.URL) {
				t.Errorf("%v does not name %q", err, c.src.URL)
			}
			if left, _ := os.ReadDir(root); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

func TestArchiveHoldsTheChangedFiles(t *testing.T) {
	_, _, dir, gitDir := sourced(t)
	ctx := context.Background()
	agentChanges(t, dir)
	if err := Diff(ctx, dir, gitDir, &bytes.Buffer{}, 0); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := Archive(ctx, dir, gitDir, &archive, 1<<20); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := Unpack(bytes.NewReader(archive.Bytes()), out, 1<<20); err != nil {
		t.Fatal(err)
	}
	got := treeOf(t, out)
	for _, want := range []string{"main.go", "new/dir/added.go", "blob.bin", "logo.bin", "build.log", "empty", "new/place/name.txt", "script.sh", "new/link"} {
		if _, ok := got[want]; !ok {
			t.Errorf("archive has no %s", want)
		}
	}
	for _, unwanted := range []string{"README.md", "gone.txt", "old/name.txt", ".gitignore"} {
		if _, ok := got[unwanted]; ok {
			t.Errorf("archive has unchanged or deleted %s", unwanted)
		}
	}
	if err := Archive(ctx, dir, gitDir, &bytes.Buffer{}, 1024); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Archive over the limit: %v", err)
	}
}
