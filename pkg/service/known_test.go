package service_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/runner/runnerservice"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
)

// variableName is an AGENTMESH_* or AGENT_* name as code, make and
// manifests spell it.
var variableName = regexp.MustCompile(`\bAGENT(?:MESH)?_[A-Z0-9_]*[A-Z0-9]\b`)

// notVariables are names of that shape that are no variable anyone
// sets: the streams of pkg/subject, the misspellings and unknown names
// the strictness tests feed in on purpose, and the fake runner secrets the
// adapters' tests put in a runner's environment to see that no child
// process gets them.
var notVariables = []string{
	"AGENTMESH_SUBMIT", "AGENTMESH_SUBMIT_ANCHOR", "AGENTMESH_WORK", "AGENTMESH_EVENTS",
	"AGENTMESH_LEASE_TLL", "AGENTMESH_BUDGET", "AGENTMESH_NATSURL", "AGENT_TRAJECTORY_EXPORT_ENABLE",
	"AGENTMESH_LOGLEVEL", "AGENTMESH_SVC_EXTRA", "AGENTMESH_SVC_EXTAR", "AGENTMESH_X", "AGENT_TRAJECTORY", "AGENTMESH_TENNANT",
	"AGENTMESH_NATS_TOKEN",
}

// TestEveryVariableIsKnown: every AGENTMESH_* and AGENT_* name in the
// repository's Go code (tests, benchmarks and e2e included), its
// Makefile, CI script and deploy/ is one the strict configuration check
// accepts, so nothing the repository sets or reads stops a service or
// agentmesh up; and that every name the check accepts is named somewhere
// besides its list (the documents and the runners' Config count here), so
// that none outlives the variable. The documents may name others (a misspelling in an example).
func TestEveryVariableIsKnown(t *testing.T) {
	root := servicetest.RepoRoot()
	known := slices.Concat(service.KnownVariables, service.HarnessVariables, notVariables)
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") && name != ".ci" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == filepath.Join("pkg", "service", "strict.go") {
			return nil // the lists themselves
		}
		doc := strings.HasSuffix(name, ".md")
		switch {
		case doc, strings.HasSuffix(name, ".go"), name == "Makefile", rel == filepath.Join(".ci", "run"),
			strings.HasPrefix(rel, "deploy"+string(filepath.Separator)):
		default:
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, v := range variableName.FindAllString(string(b), -1) {
			seen[v] = true
			if doc || strings.HasPrefix(v, service.TestPrefix) || slices.Contains(known, v) {
				continue
			}
			t.Errorf("%s names %s, which the strict configuration check refuses: add it to service.KnownVariables if a service or the agentmesh command reads it, to service.HarnessVariables if only the repository's tests do, or rename it %s…", rel, v, service.TestPrefix)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The runners' Config reads some it names nowhere else.
	for _, v := range service.SpecVariables(&runnerservice.Config{}) {
		seen[v] = true
	}
	for _, v := range slices.Concat(service.KnownVariables, service.HarnessVariables) {
		if !seen[v] {
			t.Errorf("%s is listed as known but nothing in the repository, its documents included, names it", v)
		}
	}
}
