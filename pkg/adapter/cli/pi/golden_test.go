package pi

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// parsing runs pi's parser without a process, under the default attempt
// policy.
var parsing = conformance.Parsing{
	Name:         Name,
	Capabilities: Capabilities,
	NewParser: func(testing.TB, conformance.Case) cli.Parser {
		return NewParser(adapter.Call{MaxAttempts: wire.DefaultMaxAttempts})
	},
	Classify: Classify,
}

// TestGolden replays every capture and hand-written case through the
// framing and the parser and compares the normalized stream with
// testdata/normalize/pi/<case>/want.jsonl (-update rewrites them).
func TestGolden(t *testing.T) { conformance.Golden(t, parsing) }

// capture returns the captured run name of testdata/cli/pi.
func capture(t testing.TB, name string) conformance.Case {
	t.Helper()
	for _, c := range conformance.Cases(t, Name) {
		if c.Name == name && c.Captured {
			return c
		}
	}
	t.Fatalf("no capture %s", name)
	return conformance.Case{}
}
