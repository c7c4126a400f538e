package gemini

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// parsing runs the gemini parser without a process.
var parsing = conformance.Parsing{
	Name:         Name,
	Capabilities: capabilities,
	NewParser:    func(testing.TB, conformance.Case) cli.Parser { return newParser() },
	Classify:     Classify,
}

// TestGolden replays every capture, and every hand-written case, through
// the framing and the parser and compares the normalized stream with
// testdata/normalize/gemini/<case>/want.jsonl (-update rewrites them).
func TestGolden(t *testing.T) { conformance.Golden(t, parsing) }
