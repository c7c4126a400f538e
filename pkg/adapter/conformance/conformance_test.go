package conformance_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// importPath is the kit's import path, as adapters' tests import it.
const importPath = "github.com/agentmesh/agentmesh/pkg/adapter/conformance"

// suiteRunners are the kit's functions that run the suite.
var suiteRunners = []string{"Run", "RunCLI"}

// TestEveryAdapterRunsTheSuite keeps the suite complete: every adapter this
// build can host (catalog.Names) has a package under pkg/adapter
// that declares its name (const Name or DefaultName) and a Test function
// of that package's tests calls conformance.Run (or RunCLI), so that the package's own
// go test runs the suite. An adapter registered without that fails here.
func TestEveryAdapterRunsTheSuite(t *testing.T) {
	pkgs := adapterPackages(t, filepath.Join(conformance.Root(t), "pkg", "adapter"))
	known := catalog.Names()
	if len(known) == 0 {
		t.Fatal("catalog.Names is empty")
	}
	for _, name := range known {
		p, ok := pkgs[name]
		switch {
		case !ok:
			t.Errorf("adapter %q is registered, but no package under pkg/adapter declares const Name = %q", name, name)
		case len(p.runs) == 0:
			t.Errorf("adapter %q is registered, but no Test function of %s calls conformance.Run", name, p.dir)
		default:
			t.Logf("%s: %s runs the suite in %s", name, p.dir, strings.Join(p.runs, ", "))
		}
	}
}

// adapterPackage is a package that declares an adapter's name.
type adapterPackage struct {
	dir  string
	runs []string // the Test functions that call conformance.Run
}

// adapterPackages maps each adapter name declared under root (a string
// constant Name or DefaultName of a package's non-test files) to its
// package.
func adapterPackages(t *testing.T, root string) map[string]*adapterPackage {
	t.Helper()
	out := map[string]*adapterPackage{}
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		fset := token.NewFileSet()
		var names, runs []string
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
			if err != nil {
				return err
			}
			if strings.HasSuffix(e.Name(), "_test.go") {
				runs = append(runs, suiteRuns(f)...)
			} else {
				names = append(names, declaredNames(f)...)
			}
		}
		rel, _ := filepath.Rel(filepath.Dir(filepath.Dir(root)), dir)
		for _, n := range names {
			if prev, dup := out[n]; dup {
				t.Errorf("adapter name %q declared by both %s and %s", n, prev.dir, rel)
			}
			out[n] = &adapterPackage{dir: rel, runs: runs}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// declaredNames returns the values of the file's top-level string
// constants Name and DefaultName.
func declaredNames(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if (id.Name != "Name" && id.Name != "DefaultName") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if v, err := strconv.Unquote(lit.Value); err == nil {
						out = append(out, v)
					}
				}
			}
		}
	}
	return out
}

// suiteRuns returns the file's Test functions whose bodies call one of
// the kit's suiteRunners.
func suiteRuns(f *ast.File) []string {
	local := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == importPath {
			local = "conformance"
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
	}
	if local == "" {
		return nil
	}
	var out []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv != nil || fd.Body == nil || !strings.HasPrefix(fd.Name.Name, "Test") {
			continue
		}
		calls := false
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				fun := c.Fun
				if ix, ok := fun.(*ast.IndexExpr); ok { // RunCLI[Request](…)
					fun = ix.X
				}
				if sel, ok := fun.(*ast.SelectorExpr); ok && slices.Contains(suiteRunners, sel.Sel.Name) {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == local {
						calls = true
					}
				}
			}
			return !calls
		})
		if calls {
			out = append(out, fd.Name.Name)
		}
	}
	return out
}
