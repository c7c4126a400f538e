package workspace_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/workspace"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tree builds a workspace root with symlinks that stay inside and ones
// that lead out, next to an outside directory. It returns the root as
// given and as resolved (t.TempDir may itself sit behind a symlink).
func tree(t *testing.T) (root, realRoot, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{
		root, outside, filepath.Join(outside, "dir"),
		filepath.Join(root, "sub", "deeper"), filepath.Join(base, "ws2"),
	} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(root, "file.txt"), filepath.Join(outside, "secret.txt")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{ // name under root -> target
		"inlink":      "sub",
		"abslink":     filepath.Join(root, "sub"),
		"okchain1":    "okchain2",
		"okchain2":    "inlink",
		"sub/up":      "..",
		"sub/upup":    "../..",
		"outdir":      outside,
		"outrel":      "../outside/dir",
		"outfile":     filepath.Join(outside, "secret.txt"),
		"chain1":      "chain2",
		"chain2":      "sub/chain3",
		"sub/chain3":  "../outdir",
		"dangling":    filepath.Join(outside, "nope"),
		"danglingin":  "sub/nope",
		"loop1":       "loop2",
		"loop2":       "loop1",
		"sibling":     filepath.Join(base, "ws2"), // shares the root's name as a prefix
		"sub/roundup": "../../ws/sub/deeper",      // leaves and comes back in
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, realRoot, outside
}

func TestResolve(t *testing.T) {
	root, realRoot, outside := tree(t)
	tests := []struct {
		name       string
		in         string
		want       string // relative to the real root; "." is the root
		wantErr    bool
		wantEscape bool
	}{
		{name: "empty is the root", in: "", want: "."},
		{name: "dot", in: ".", want: "."},
		{name: "subdir", in: "sub", want: "sub"},
		{name: "nested with slash", in: "sub/deeper/", want: "sub/deeper"},
		{name: "redundant parts", in: "./sub//deeper/.", want: "sub/deeper"},
		{name: "symlink inside", in: "inlink", want: "sub"},
		{name: "absolute symlink inside", in: "abslink", want: "sub"},
		{name: "symlink chain inside", in: "okchain1", want: "sub"},
		{name: "symlink to the root", in: "sub/up", want: "."},
		{name: "symlink out and back in", in: "sub/roundup", want: "sub/deeper"},

		{name: "absolute", in: "/etc", wantErr: true, wantEscape: true},
		{name: "absolute inside the root", in: filepath.Join(realRoot, "sub"), wantErr: true, wantEscape: true},
		{name: "dot dot", in: "..", wantErr: true, wantEscape: true},
		{name: "dot dot sibling", in: "../outside", wantErr: true, wantEscape: true},
		{name: "traversal", in: "a/../../x", wantErr: true, wantEscape: true},
		{name: "traversal that stays inside", in: "sub/../sub", wantErr: true, wantEscape: true},
		{name: "traversal after a symlink", in: "inlink/../..", wantErr: true, wantEscape: true},
		{name: "symlinked dir outside", in: "outdir", wantErr: true, wantEscape: true},
		{name: "symlinked dir outside, subdir", in: "outdir/dir", wantErr: true, wantEscape: true},
		{name: "relative symlink outside", in: "outrel", wantErr: true, wantEscape: true},
		{name: "symlinked file outside", in: "outfile", wantErr: true, wantEscape: true},
		{name: "symlink chain outside", in: "chain1", wantErr: true, wantEscape: true},
		{name: "symlink to the parent", in: "sub/upup", wantErr: true, wantEscape: true},
		{name: "sibling sharing a prefix", in: "sibling", wantErr: true, wantEscape: true},
		{name: "dangling symlink outside", in: "dangling", wantErr: true, wantEscape: true},
		{name: "symlink loop", in: "loop1", wantErr: true, wantEscape: true},
		{name: "NUL byte", in: "sub\x00x", wantErr: true, wantEscape: true},

		{name: "missing", in: "missing", wantErr: true},
		{name: "missing nested", in: "sub/missing", wantErr: true},
		{name: "a file", in: "file.txt", wantErr: true},
		{name: "dangling symlink inside", in: "danglingin", wantErr: true, wantEscape: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := workspace.Resolve(root, tt.in)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Resolve(%q) = %v", tt.in, err)
				}
				if want := filepath.Join(realRoot, tt.want); got != want {
					t.Errorf("Resolve(%q) = %q, want %q", tt.in, got, want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Resolve(%q) = %q, want an error", tt.in, got)
			}
			if got != "" {
				t.Errorf("Resolve(%q) returned %q with the error", tt.in, got)
			}
			if !errors.Is(err, wire.AgenticRequestValidationError) {
				t.Errorf("err = %v, want an AgenticRequestValidationError", err)
			}
			if we := wire.AsError(err); we.Class != wire.AgenticRequestValidationError {
				t.Errorf("wire.AsError(err).Class = %s", we.Class)
			}
			if errors.Is(err, workspace.ErrEscape) != tt.wantEscape {
				t.Errorf("errors.Is(%v, ErrEscape) = %v, want %v", err, !tt.wantEscape, tt.wantEscape)
			}
			if strings.Contains(err.Error(), outside) && !tt.wantEscape {
				t.Errorf("err %v names the outside directory", err)
			}
		})
	}
}

func TestResolveRoot(t *testing.T) {
	root, realRoot, _ := tree(t)
	base := filepath.Dir(root)
	rootLink := filepath.Join(base, "rootlink")
	if err := os.Symlink(root, rootLink); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		root    string
		in      string
		want    string
		wantErr bool
	}{
		{name: "symlinked root", root: rootLink, in: "", want: realRoot},
		{name: "symlinked root, subdir", root: rootLink, in: "inlink", want: filepath.Join(realRoot, "sub")},
		{name: "trailing slash", root: root + "/", in: "sub", want: filepath.Join(realRoot, "sub")},
		{name: "missing root", root: filepath.Join(base, "nope"), in: "", wantErr: true},
		{name: "root is a file", root: filepath.Join(root, "file.txt"), in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := workspace.Resolve(tt.root, tt.in)
			if tt.wantErr {
				if err == nil || !errors.Is(err, wire.AgenticRequestValidationError) || errors.Is(err, workspace.ErrEscape) {
					t.Errorf("Resolve = %q, %v; want a validation error that is not an escape", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Resolve = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestResolveRelativeRoot(t *testing.T) {
	root, realRoot, _ := tree(t)
	t.Chdir(filepath.Dir(root))
	got, err := workspace.Resolve(filepath.Base(root), "sub")
	if want := filepath.Join(realRoot, "sub"); err != nil || got != want {
		t.Errorf("Resolve = %q, %v; want %q", got, err, want)
	}
}

// TestContain covers file-bearing request fields: the file need not exist,
// but no existing part of its path may lead outside the workspace.
func TestContain(t *testing.T) {
	root, realRoot, _ := tree(t)
	rootLink := filepath.Join(filepath.Dir(root), "rootlink")
	if err := os.Symlink(root, rootLink); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(root))
	tests := []struct {
		name    string
		dir     string // "" is the resolved root, REL the root relative to the working directory
		in      string
		want    string // relative to the real root
		wantErr bool
	}{
		{name: "new file", in: "new.txt", want: "new.txt"},
		{name: "new file under a subdir", in: "sub/new.txt", want: "sub/new.txt"},
		{name: "new file under new dirs", in: "sub/a/b/new.txt", want: "sub/a/b/new.txt"},
		{name: "existing file", in: "file.txt", want: "file.txt"},
		{name: "new file through a symlink inside", in: "inlink/new.txt", want: "sub/new.txt"},
		{name: "symlink to the root", in: "sub/up/file.txt", want: "file.txt"},
		{name: "relative to a subdir", dir: "sub", in: "deeper/x.txt", want: "sub/deeper/x.txt"},
		{name: "the dir itself", dir: "sub", in: ".", want: "sub"},
		{name: "dir behind a symlink", dir: rootLink, in: "inlink/x", want: "sub/x"},
		{name: "relative dir", dir: "REL", in: "sub/x", want: "sub/x"},
		{name: "dir with a trailing slash", dir: "sub/", in: ".", want: "sub"},

		{name: "under a symlinked dir outside", in: "outdir/new.txt", wantErr: true},
		{name: "deep under a symlinked dir outside", in: "outdir/a/b/c.txt", wantErr: true},
		{name: "under a relative symlink outside", in: "outrel/new.txt", wantErr: true},
		{name: "symlinked file outside", in: "outfile", wantErr: true},
		{name: "under a chain outside", in: "chain1/new.txt", wantErr: true},
		{name: "dangling symlink outside", in: "dangling", wantErr: true},
		{name: "absolute", in: "/etc/passwd", wantErr: true},
		{name: "absolute inside", in: filepath.Join(realRoot, "file.txt"), wantErr: true},
		{name: "traversal", in: "sub/../../x", wantErr: true},
		{name: "traversal from a subdir", dir: "sub", in: "../file.txt", wantErr: true},
		{name: "symlink to the parent of a subdir", dir: "sub", in: "up/x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := realRoot
			if tt.dir == "REL" {
				dir = filepath.Base(root)
			} else if filepath.IsAbs(tt.dir) {
				dir = tt.dir
			} else if tt.dir != "" {
				dir = filepath.Join(realRoot, tt.dir)
				if strings.HasSuffix(tt.dir, "/") {
					dir += "/"
				}
			}
			got, err := workspace.Contain(dir, tt.in)
			if tt.wantErr {
				if !errors.Is(err, workspace.ErrEscape) || !errors.Is(err, wire.AgenticRequestValidationError) {
					t.Errorf("Contain(%q, %q) = %q, %v; want an escape refusal", dir, tt.in, got, err)
				}
				return
			}
			if want := filepath.Join(realRoot, tt.want); err != nil || got != want {
				t.Errorf("Contain(%q, %q) = %q, %v; want %q", dir, tt.in, got, err, want)
			}
		})
	}
}

// A run's workspace and a file it names, checked before anything starts.
func ExampleResolve() {
	base, err := os.MkdirTemp("", "workspace-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(base)
	if err := os.MkdirAll(filepath.Join(base, "repo", "src"), 0o755); err != nil {
		fmt.Println(err)
		return
	}

	dir, err := workspace.Resolve(base, "repo")
	fmt.Println(filepath.Base(dir), err)
	_, err = workspace.Resolve(base, "../etc")
	fmt.Println(errors.Is(err, workspace.ErrEscape), errors.Is(err, wire.AgenticRequestValidationError))
	file, err := workspace.Contain(dir, "src/main.go")
	fmt.Println(strings.TrimPrefix(file, dir), err)
	// Output:
	// repo <nil>
	// true true
	// /src/main.go <nil>
}
