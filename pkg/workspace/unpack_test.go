package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/workspace/workspacetest"
)

// entry is one hand-made tar entry of a hostile archive.
type entry struct {
	name, link string
	typ        byte
	body       string
}

func tarOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		size := int64(len(e.body))
		if e.typ != tar.TypeReg {
			size = 0
		}
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: size, Format: tar.FormatPAX}
		if e.typ == tar.TypeChar {
			hdr.Devmajor, hdr.Devminor = 1, 3
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bombHeader is a tar whose one header claims size bytes, followed by
// nothing: Unpack must refuse it on the header, not after reading.
func bombHeader(t *testing.T, size int64) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: size, Format: tar.FormatPAX}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes() // not closed: the body is missing
}

func TestUnpackRefusesHostileArchives(t *testing.T) {
	many := make([]entry, 200)
	for i := range many {
		many[i] = entry{name: "f" + strings.Repeat("x", i), typ: tar.TypeReg}
	}
	for _, c := range []struct {
		name    string
		archive []byte
		want    error
		path    string // the entry the error names
	}{
		{"dot dot", tarOf(t, entry{name: "../evil", typ: tar.TypeReg, body: "x"}), ErrUnsafePath, "../evil"},
		{"dot dot inside", tarOf(t, entry{name: "a/../../evil", typ: tar.TypeReg, body: "x"}), ErrUnsafePath, "a/../../evil"},
		{"absolute", tarOf(t, entry{name: "/tmp/evil", typ: tar.TypeReg, body: "x"}), ErrUnsafePath, "/tmp/evil"},
		{"git dir", tarOf(t, entry{name: ".git/hooks/post-checkout", typ: tar.TypeReg, body: "#!/bin/sh"}), ErrUnsafePath, ".git/hooks/post-checkout"},
		{"symlink up", tarOf(t, entry{name: "l", link: "../..", typ: tar.TypeSymlink}), ErrUnsafePath, "l"},
		{"symlink absolute", tarOf(t, entry{name: "l", link: "/etc", typ: tar.TypeSymlink}), ErrUnsafePath, "l"},
		{"symlink up from a subdir", tarOf(t, entry{name: "a/b/l", link: "../../../x", typ: tar.TypeSymlink}), ErrUnsafePath, "a/b/l"},
		// l1 → a (a real dir one level down), l2 → l1/../..: lexically
		// "..", refused; and l2 → a/.., lexically "." but after a name.
		{"dot dot after a name", tarOf(t,
			entry{name: "a/", typ: tar.TypeDir},
			entry{name: "a/b/", typ: tar.TypeDir},
			entry{name: "a/b/l1", link: "../../x", typ: tar.TypeSymlink},
			entry{name: "a/b/l2", link: "l1/../../..", typ: tar.TypeSymlink}), ErrUnsafePath, "a/b/l2"},
		{"symlink then file through it", tarOf(t,
			entry{name: "sub/", typ: tar.TypeDir},
			entry{name: "l", link: "sub", typ: tar.TypeSymlink},
			entry{name: "l/x", typ: tar.TypeReg, body: "x"}), ErrUnsafePath, "l/x"},
		{"file then file under it", tarOf(t,
			entry{name: "f", typ: tar.TypeReg, body: "x"},
			entry{name: "f/x", typ: tar.TypeReg, body: "x"}), ErrUnsafePath, "f/x"},
		{"symlink replaced by a file", tarOf(t,
			entry{name: "l", link: "sub", typ: tar.TypeSymlink},
			entry{name: "l", typ: tar.TypeReg, body: "x"}), ErrUnsafePath, "l"},
		{"hard link out of tree", tarOf(t, entry{name: "h", link: "/etc/passwd", typ: tar.TypeLink}), ErrUnsafePath, "h"},
		{"hard link up", tarOf(t, entry{name: "h", link: "../x", typ: tar.TypeLink}), ErrUnsafePath, "h"},
		{"hard link to a symlink", tarOf(t,
			entry{name: "l", link: "x", typ: tar.TypeSymlink},
			entry{name: "h", link: "l", typ: tar.TypeLink}), ErrUnsafePath, "h"},
		{"device", tarOf(t, entry{name: "null", typ: tar.TypeChar}), ErrUnsafePath, "null"},
		{"fifo", tarOf(t, entry{name: "fifo", typ: tar.TypeFifo}), ErrUnsafePath, "fifo"},
		{"size bomb", bombHeader(t, 1<<40), ErrTooLarge, ""},
		{"over the limit", tarOf(t, entry{name: "a", typ: tar.TypeReg, body: strings.Repeat("a", 5000)}), ErrTooLarge, ""},
		{"many empty files", tarOf(t, many...), ErrTooLarge, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "ws")
			err := Unpack(bytes.NewReader(c.archive), dir, 4096)
			if !errors.Is(err, c.want) {
				t.Fatalf("Unpack: %v, want %v", err, c.want)
			}
			var up *UnsafePathError
			if c.path != "" && (!errors.As(err, &up) || up.Path != c.path) {
				t.Errorf("error %v does not name %q", err, c.path)
			}
			var tl *TooLargeError
			if c.want == ErrTooLarge && (!errors.As(err, &tl) || tl.Limit != 4096) {
				t.Errorf("error %v is not a *TooLargeError of limit 4096", err)
			}
			left, _ := os.ReadDir(parent)
			if len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

func TestUnpackAcceptsWhatPackWrites(t *testing.T) {
	src := t.TempDir()
	workspacetest.WriteFiles(t, src, map[string]string{
		"a.txt":         "alpha\n",
		"bin/run.sh":    "#!/bin/sh\necho hi\n",
		"deep/er/x.bin": "\x00\x01\x02\xff",
		"empty":         "",
	})
	chmod(t, filepath.Join(src, "bin/run.sh"), 0o755)
	chmod(t, filepath.Join(src, "deep/er"), 0o750)
	symlink(t, "../a.txt", filepath.Join(src, "bin/a"))
	symlink(t, "deep/er", filepath.Join(src, "er"))
	// .git is left out, wherever it is.
	workspacetest.WriteFiles(t, src, map[string]string{".git/config": "[core]\n", "deep/.git": "gitdir: /x\n"})

	var one, two bytes.Buffer
	if err := Pack(src, &one, 0); err != nil {
		t.Fatal(err)
	}
	if err := Pack(src, &two, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one.Bytes(), two.Bytes()) {
		t.Fatal("two packs of one tree differ")
	}
	dst := filepath.Join(t.TempDir(), "ws")
	if err := Unpack(bytes.NewReader(one.Bytes()), dst, 1<<20); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(src, ".git"))
	os.Remove(filepath.Join(src, "deep/.git"))
	sameTree(t, src, dst)

	// Touching a file's time changes nothing; its mode does.
	now := epoch.AddDate(50, 0, 0)
	if err := os.Chtimes(filepath.Join(src, "a.txt"), now, now); err != nil {
		t.Fatal(err)
	}
	var three bytes.Buffer
	if err := Pack(src, &three, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one.Bytes(), three.Bytes()) {
		t.Error("a file's time changed the archive")
	}
	chmod(t, filepath.Join(src, "a.txt"), 0o600)
	three.Reset()
	if err := Pack(src, &three, 0); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(one.Bytes(), three.Bytes()) {
		t.Error("a file's mode did not change the archive")
	}
}

func TestUnpackRefusesAnExistingDir(t *testing.T) {
	dir := t.TempDir()
	if err := Unpack(bytes.NewReader(tarOf(t, entry{name: "a", typ: tar.TypeReg})), dir, 0); err == nil {
		t.Fatal("Unpack into an existing directory succeeded")
	}
}

func TestPackRefuses(t *testing.T) {
	src := t.TempDir()
	symlink(t, "../../etc", filepath.Join(src, "out"))
	var buf bytes.Buffer
	err := Pack(src, &buf, 0)
	var up *UnsafePathError
	if !errors.As(err, &up) || up.Path != "out" {
		t.Errorf("Pack of an escaping symlink: %v", err)
	}

	big := t.TempDir()
	workspacetest.WriteFiles(t, big, map[string]string{"a": strings.Repeat("a", 10000)})
	var tl *TooLargeError
	if err := Pack(big, &buf, 4096); !errors.As(err, &tl) || tl.Limit != 4096 {
		t.Errorf("Pack over the limit: %v", err)
	}
}

// FuzzUnpack: whatever the archive, Unpack never panics; when it fails,
// nothing is left beside the target; when it succeeds, nothing in the
// tree resolves outside it, and packing the tree and unpacking that gives
// the same tree. Seeds are testdata/fuzz/workspace.
//
//	go test -run '^$' -fuzz '^FuzzUnpack$' -fuzztime 60s ./pkg/workspace
func FuzzUnpack(f *testing.F) {
	seeds, err := filepath.Glob("../../testdata/fuzz/workspace/*.tar")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, name := range seeds {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, archive []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "ws")
		if err := Unpack(bytes.NewReader(archive), dir, 1<<20); err != nil {
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Fatalf("failed (%v) and left %v", err, left)
			}
			return
		}
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil // dangling, or a loop: leads nowhere
			}
			if real != dir && !strings.HasPrefix(real, dir+"/") {
				t.Errorf("%s resolves to %s, outside", p, real)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var again bytes.Buffer
		if err := Pack(dir, &again, 0); err != nil {
			t.Fatalf("Pack of an unpacked tree: %v", err)
		}
		dir2 := filepath.Join(parent, "ws2")
		if err := Unpack(&again, dir2, 0); err != nil {
			t.Fatalf("Unpack of a packed tree: %v", err)
		}
		sameTree(t, dir, dir2)
	})
}
