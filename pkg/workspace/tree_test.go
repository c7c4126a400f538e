package workspace

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func chmod(t testing.TB, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// treeOf lists every entry of dir but .git: its type and mode, a regular
// file's bytes, a symlink's target.
func treeOf(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree fails the test unless a and b hold the same names, types, modes,
// bytes and link targets (directories' modes included, .git left out).
func sameTree(t testing.TB, a, b string) {
	t.Helper()
	ta, tb := treeOf(t, a), treeOf(t, b)
	for name, da := range ta {
		if db, ok := tb[name]; !ok {
			t.Errorf("%s: only in %s", name, a)
		} else if !bytes.Equal([]byte(da), []byte(db)) {
			t.Errorf("%s differs:\n%q\n%q", name, da, db)
		}
	}
	for name := range tb {
		if _, ok := ta[name]; !ok {
			t.Errorf("%s: only in %s", name, b)
		}
	}
}
