package pi

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// The test binary doubles as the pi CLI (conformance.Main).
func TestMain(m *testing.M) { conformance.Main(m) }

// TestConformance runs the conformance suite over the pi adapter,
// the fake CLI replaying the captures of testdata/cli/pi.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.RunCLI(t, New, DefaultConfig(), conformance.Subject{Model: "fake-model", SessionID: "01a22a8d-7f7d-7689-a314-843817dab2e1"})
}
