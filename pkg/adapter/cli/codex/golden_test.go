package codex

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// parsing runs the codex parser without a process.
var parsing = conformance.Parsing{
	Name:         Name,
	Capabilities: Capabilities,
	NewParser:    goldenParser,
	Classify:     Classify,
}

// goldenParser builds a case's parser as the adapter would: on the model
// the capture ran with, resuming the thread its argv names, with the
// baseline read from the case's codex_home when it has one.
func goldenParser(t testing.TB, c conformance.Case) cli.Parser {
	t.Helper()
	model := "gpt-5.5"
	if c.Name == "S1-unknown-model" {
		model = "gpt-5-codex" // that capture's config.toml model
	}
	var resumeID string
	if len(c.Argv) > 5 && c.Argv[2] == "resume" {
		resumeID = c.Argv[5] // codex exec resume --json --skip-git-repo-check <id> <prompt>
	}
	p := NewParser(model, resumeID)
	codexHome := filepath.Join(c.Dir, "codex_home")
	if fi, err := os.Stat(codexHome); resumeID != "" && err == nil && fi.IsDir() {
		p.baseline = home{set: map[string]string{EnvCodexHome: codexHome}}.threadTotal(resumeID)
		if p.baseline == nil {
			t.Fatalf("%s: no baseline in %s", c.Name, codexHome)
		}
	}
	return p
}

// TestGolden replays every capture and hand-written case through the
// framing and the parser and compares the normalized stream with
// testdata/normalize/codex/<case>/want.jsonl (-update rewrites them).
func TestGolden(t *testing.T) { conformance.Golden(t, parsing) }
