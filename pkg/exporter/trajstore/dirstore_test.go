package trajstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore/storetest"
)

// inspectedDirStore is the directory Store with a view of its root.
type inspectedDirStore struct {
	trajstore.Store
	root string
}

// Entries lists every directory and file under the root, files with their
// inode and size: a rewritten file has a new inode.
func (s inspectedDirStore) Entries(context.Context) ([]string, error) {
	var out []string
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == s.root {
			return err
		}
		rel, _ := filepath.Rel(s.root, p)
		if d.IsDir() {
			out = append(out, rel+"/")
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s ino=%d size=%d", rel, fi.Sys().(*syscall.Stat_t).Ino, fi.Size()))
		return nil
	})
	return out, err
}

func newDirStore(t *testing.T) inspectedDirStore {
	t.Helper()
	root := filepath.Join(t.TempDir(), "artifacts")
	s, err := trajstore.NewDirStore(root)
	if err != nil {
		t.Fatal(err)
	}
	return inspectedDirStore{Store: s, root: root}
}

func TestDirStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) trajstore.Store { return newDirStore(t) })
}

// The root is refused inside, at or above the working directory and the
// git work tree holding it. The test runs in this package's directory,
// inside the repository's work tree.
func TestDirStoreRefusesTheWorkingTree(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	top := wd
	for {
		if _, err := os.Lstat(filepath.Join(top, ".git")); err == nil {
			break
		}
		if filepath.Dir(top) == top {
			t.Fatal("the test does not run inside a git work tree")
		}
		top = filepath.Dir(top)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(top, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   string
		want string // in the reason
	}{
		{name: "empty", in: "", want: "empty"},
		{name: "relative", in: "artifacts", want: "inside the working directory"},
		{name: "dot", in: ".", want: "is the working directory"},
		{name: "inside the working directory", in: filepath.Join(wd, "testdata", "artifacts"), want: "inside the working directory"},
		{name: "dot dot back in", in: filepath.Join(wd, "..", filepath.Base(wd), "x"), want: "inside the working directory"},
		{name: "inside the work tree", in: filepath.Join(top, "zz-trajstore-artifacts"), want: "inside the git work tree"},
		{name: "the work tree", in: top, want: "is above the working directory"},
		{name: "above the work tree", in: filepath.Dir(top), want: "is above the working directory"},
		{name: "filesystem root", in: "/", want: "is above"},
		{name: "through a symlink", in: filepath.Join(link, "zz-trajstore-artifacts"), want: "inside the git work tree"},
		{name: "symlink to the working directory", in: filepath.Join(link, strings.TrimPrefix(wd, top)), want: "is the working directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := trajstore.NewDirStore(tt.in)
			var re *trajstore.RootError
			if !errors.Is(err, trajstore.ErrInvalidRoot) || !errors.As(err, &re) {
				t.Fatalf("NewDirStore(%q) = %v, %v; want a *RootError", tt.in, s, err)
			}
			if re.Root != tt.in || !strings.Contains(re.Reason, tt.want) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.in)) {
				t.Errorf("error = %v (reason %q); want it to name %q and say %q", err, re.Reason, tt.in, tt.want)
			}
		})
	}
	for _, p := range []string{filepath.Join(wd, "testdata"), filepath.Join(top, "zz-trajstore-artifacts"), "artifacts"} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a refused root left %s behind (%v)", p, err)
		}
	}
}

// In a fresh work tree of our own, a root beside it is accepted and one in
// it is refused even outside the working directory.
func TestDirStoreWorkTreeOfTheWorkingDirectory(t *testing.T) {
	base := t.TempDir()
	repo := filepath.Join(base, "repo")
	sub := filepath.Join(repo, "services", "exporter")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, ".git"), []byte("gitdir: elsewhere\n"), 0o644); err != nil {
		t.Fatal(err) // a linked work tree's .git is a file
	}
	t.Chdir(sub)
	if _, err := trajstore.NewDirStore(filepath.Join(repo, "var", "artifacts")); !errors.Is(err, trajstore.ErrInvalidRoot) {
		t.Fatalf("root in the work tree = %v, want ErrInvalidRoot", err)
	}
	root := filepath.Join(base, "var", "artifacts")
	s, err := trajstore.NewDirStore(root)
	if err != nil {
		t.Fatalf("root beside the work tree = %v", err)
	}
	for _, p := range []string{filepath.Join(base, "var"), root} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("created %s: %v, %v; want mode 0700", p, fi.Mode(), err)
		}
	}
	data := []byte("{}")
	name, _ := trajstore.NameFor("t", "r", data)
	if err := s.Put(context.Background(), name, data); err != nil {
		t.Fatal(err)
	}
}

func TestDirStoreRefusesAFileRoot(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := trajstore.NewDirStore(f); !errors.Is(err, trajstore.ErrInvalidRoot) {
		t.Fatalf("NewDirStore(file) = %v, want ErrInvalidRoot", err)
	}
}

func TestDirStoreLayoutAndModes(t *testing.T) {
	s := newDirStore(t)
	ctx := context.Background()
	data := []byte(`{"v":1}`)
	name, _ := trajstore.NameFor("tenant-1", "run-1", data)
	if err := s.Put(ctx, name, data); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(s.root, filepath.FromSlash(name))
	fi, err := os.Stat(file)
	if err != nil || fi.Mode() != 0o600 {
		t.Fatalf("stored file %s: %v, %v; want a 0600 regular file", file, fi.Mode(), err)
	}
	for _, d := range []string{s.root, filepath.Dir(file), filepath.Dir(filepath.Dir(file))} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("directory %s: %v, %v; want 0700", d, fi.Mode(), err)
		}
	}
	if got, _ := os.ReadFile(file); !bytes.Equal(got, data) {
		t.Errorf("file holds %q, want %q", got, data)
	}
}

// A writer that crashed leaves a temporary file; no name reaches it, the
// next Put is not disturbed by it, and a Delete removes it once it is stale
// and prunes the emptied directories.
func TestDirStoreCrashLeftover(t *testing.T) {
	s := newDirStore(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("z"), 10_000)
	name, _ := trajstore.NameFor("tenant-1", "run-1", data)
	runDir := filepath.Join(s.root, "tenant-1", "run-1")
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(runDir, ".tmp-crashed")
	if err := os.WriteFile(leftover, data[:5000], 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Exists(ctx, name); ok || err != nil {
		t.Fatalf("Exists with only a leftover = %t, %v; want false", ok, err)
	}
	if _, err := s.Get(ctx, name); !errors.Is(err, trajstore.ErrNotFound) {
		t.Fatalf("Get with only a leftover = %v, want ErrNotFound", err)
	}
	if err := s.Put(ctx, name, data); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, name); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %d bytes, %v", len(got), err)
	}
	// A fresh leftover may be a Put in progress: Delete keeps it.
	if err := s.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); err != nil {
		t.Fatalf("a fresh temporary file was removed: %v", err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(leftover, old, old); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.root, "tenant-1")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("tenant directory after the last delete: %v, want it pruned", err)
	}
	if _, err := os.Stat(s.root); err != nil {
		t.Fatalf("root after pruning: %v", err)
	}
}

func TestDirStorePrunesOnlyEmptyDirectories(t *testing.T) {
	s := newDirStore(t)
	ctx := context.Background()
	put := func(run, body string) string {
		name, _ := trajstore.NameFor("tenant-1", run, []byte(body))
		if err := s.Put(ctx, name, []byte(body)); err != nil {
			t.Fatal(err)
		}
		return name
	}
	a, b, c := put("run-1", "a"), put("run-1", "b"), put("run-2", "c")
	for _, n := range []string{a, b} {
		if err := s.Delete(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(s.root, "tenant-1", "run-1")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("run-1 after its last delete: %v, want pruned", err)
	}
	if ok, err := s.Exists(ctx, c); !ok || err != nil {
		t.Fatalf("run-2's object: %t, %v", ok, err)
	}
}

// A symlink planted under the root does not lead a Put or Get outside it.
func TestDirStoreStaysInsideTheRoot(t *testing.T) {
	s := newDirStore(t)
	ctx := context.Background()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(s.root, "tenant-1")); err != nil {
		t.Fatal(err)
	}
	data := []byte("secret-free")
	name, _ := trajstore.NameFor("tenant-1", "run-1", data)
	if err := s.Put(ctx, name, data); err == nil {
		t.Fatal("Put through a symlink out of the root succeeded")
	} else {
		t.Logf("Put: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(outside, "run-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, filepath.Base(filepath.Dir(name)), filepath.Base(name)), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, name); err == nil {
		t.Fatal("Get through a symlink out of the root succeeded")
	} else if errors.Is(err, trajstore.ErrNotFound) {
		t.Fatalf("Get = %v, want a refusal to leave the root, not ErrNotFound", err)
	} else {
		t.Logf("Get: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(outside, "run-1"))
	if len(entries) != 1 {
		t.Errorf("outside the root: %v, want only the file the test wrote", entries)
	}
}
