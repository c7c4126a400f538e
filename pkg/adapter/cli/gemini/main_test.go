package gemini

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// The test binary doubles as the gemini CLI (conformance.Main).
func TestMain(m *testing.M) { conformance.Main(m) }

// TestConformance runs the conformance suite over the gemini adapter,
// the fake CLI replaying the captures of testdata/cli/gemini.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.RunCLI(t, New, DefaultConfig(), conformance.Subject{Model: "gemini-2.5-flash", SessionID: "f9f8d0ce-8f8e-497e-b1f8-e1b327e8af6e"})
}
