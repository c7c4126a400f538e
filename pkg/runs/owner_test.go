package runs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Outside pkg/runs, no code may write the runs, live or leases bucket.
// Every non-test file of the module that names any of them (by its Names
// method or its literal name) must be one of these, each for the reason
// given; any other file that names them fails the test.
var mayName = map[string]string{
	"pkg/runs/runs.go":         "the owner",
	"pkg/subject/subject.go":   "defines the names",
	"pkg/topology/topology.go": "creates the buckets and reads the lease TTL and the run retention",
	"bench/routing.go":         "watches records to measure routing, and purges them between batches",
}

// bucketName matches the buckets' names, not longer words around it (a
// metric called agentmesh_runs_total).
var bucketName = regexp.MustCompile(`(^|[^A-Za-z0-9_])agentmesh_(runs|live|leases)($|[^A-Za-z0-9_])`)

func TestOnlyTheOwnerWritesRuns(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			var what string
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if n.Sel.Name == "RunsBucket" || n.Sel.Name == "LeasesBucket" {
					what = n.Sel.Name
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					if s, err := strconv.Unquote(n.Value); err == nil && bucketName.MatchString(s) {
						what = s
					}
				}
			}
			if what != "" {
				if _, ok := mayName[filepath.ToSlash(rel)]; !ok {
					t.Errorf("%s: names %s; only pkg/runs may write the runs, live and leases buckets", fset.Position(n.Pos()), what)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d files; is the module root %s?", checked, root)
	}
}
