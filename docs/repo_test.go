// Package docs holds the repository's own documents (contract.md and the
// pages the README links to) and the tests that keep them and the README
// true to the tree.
package docs_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, the parent of this package's directory.
const root = ".."

// goPackages lists every directory of the tree that holds Go files, as
// slash paths from the root (testdata, hidden and cache directories left
// out).
func goPackages(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != root && (name == "testdata" || strings.HasPrefix(name, ".") || name == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// mapEntry is a line of the code map: "- `path` — what it is".
var mapEntry = regexp.MustCompile("^- `([^`]+)` — .+")

// TestCodeMapMatchesTree checks that docs/code-map.md names every Go
// package of the tree exactly once, in one line each, and nothing that is
// not there.
func TestCodeMapMatchesTree(t *testing.T) {
	path := filepath.Join(root, "docs", "code-map.md")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var listed []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "- `") {
			continue
		}
		m := mapEntry.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("map line %q is not \"- `path` — what it is\"", line)
			continue
		}
		listed = append(listed, m[1])
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(listed) == 0 {
		t.Fatal(path + ` has no "- ` + "`path`" + ` — ..." lines`)
	}
	tree := goPackages(t)
	for _, p := range tree {
		if n := countOf(listed, p); n != 1 {
			t.Errorf("package %s is listed %d times in docs/code-map.md, want once", p, n)
		}
	}
	for _, p := range listed {
		if !slices.Contains(tree, p) {
			t.Errorf("docs/code-map.md lists %s, which holds no Go package", p)
		}
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// outside matches a citation of a document this repository does not hold:
// the design record and seeds it was started from.
var outside = regexp.MustCompile(`DESIGN(\.md)? ?§|DESIGN\.md|shared/(DESIGN|seeds|STYLE|cli-transcripts)|\bdecisions? [0-9]+\b|\bseed D[0-9]\b`)

// TestNoCommentCitesOutsideTheRepo checks that the code's comments cite
// docs/contract.md, never the design documents outside the repository.
func TestNoCommentCitesOutsideTheRepo(t *testing.T) {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "repo_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if c := strings.Index(line, "//"); c >= 0 && outside.MatchString(line[c:]) {
				t.Errorf("%s:%d cites a document outside the repository: %s", p, i+1, strings.TrimSpace(line[c:]))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
