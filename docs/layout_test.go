package docs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxTopLevel is the house plan's limit on pkg/'s top-level packages.
const maxTopLevel = 22

// TestPkgTopLevelPackages holds pkg/ to at most maxTopLevel top-level
// packages: each folder directly under pkg/ that holds Go files, at any
// depth, counts once. A package that serves one of them goes below it.
func TestPkgTopLevelPackages(t *testing.T) {
	ents, err := os.ReadDir(filepath.Join(root, "pkg"))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := goPackages(t)
	var top []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		for _, p := range pkgs {
			if p == "pkg/"+e.Name() || strings.HasPrefix(p, "pkg/"+e.Name()+"/") {
				top = append(top, e.Name())
				break
			}
		}
	}
	if len(top) > maxTopLevel {
		t.Errorf("pkg/ has %d top-level packages, more than the %d the house plan allows: %s", len(top), maxTopLevel, strings.Join(top, ", "))
	}
	t.Logf("pkg/ has %d top-level packages: %s", len(top), strings.Join(top, ", "))
}
