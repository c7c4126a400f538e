package claudecode_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// The test binary doubles as the Claude Code CLI (conformance.Main).
func TestMain(m *testing.M) { conformance.Main(m) }

// TestConformance runs the conformance suite over the Claude Code adapter,
// the fake CLI replaying the captures of testdata/cli/claude-code.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.RunCLI(t, claudecode.New, claudecode.DefaultConfig(), conformance.Subject{Model: "claude-sonnet-4-5", SessionID: "9fb97433-4d57-4a95-a009-78c8b500afd5", TailRepair: true})
}
