package conformance

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// root finds the module root once: the nearest directory at or above the
// working directory that holds go.mod. go test runs a package's tests in
// the package's directory, so the root is found at any depth.
var root = sync.OnceValues(func() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod at or above the working directory")
		}
		dir = up
	}
})

// Root returns the absolute path of the repository's root, the directory
// of go.mod. It fails tb if there is none.
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := root()
	if err != nil {
		tb.Fatalf("conformance: %v", err)
	}
	return dir
}

// Testdata returns the absolute path of elem under the repository's
// testdata directory, where every adapter's fixtures live:
// Testdata(t, "cli", "pi") is testdata/cli/pi.
func Testdata(tb testing.TB, elem ...string) string {
	tb.Helper()
	return filepath.Join(append([]string{Root(tb), "testdata"}, elem...)...)
}

// Seeds returns the content of every file in testdata/fuzz/<name> that
// matches pattern, in name order: a fuzz target's seed corpus. Go reads a
// target's own corpus only from its package's testdata/fuzz; ours lives
// with the other fixtures and is added with f.Add. Seeds fails tb if no
// file matches, so that a moved corpus cannot leave a fuzzer unseeded.
func Seeds(tb testing.TB, name, pattern string) [][]byte {
	tb.Helper()
	dir := Testdata(tb, "fuzz", name)
	paths, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(paths) == 0 {
		tb.Fatalf("conformance: no seeds %s in %s (%v)", pattern, dir, err)
	}
	out := make([][]byte, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}
