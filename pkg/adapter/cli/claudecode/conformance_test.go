package claudecode_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// TestConformance runs the conformance suite over the Claude Code adapter,
// the fake CLI replaying the captures of testdata/cli/claude-code.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.WithCaptures(t, conformance.Subject{
		Name:       claudecode.Name,
		New:        func(cfg cli.Config) (adapter.Adapter, error) { return claudecode.New(cfg) },
		Config:     claudecode.DefaultConfig(),
		Model:      "claude-sonnet-4-5",
		SessionID:  "9fb97433-4d57-4a95-a009-78c8b500afd5",
		TailRepair: true,
	}))
}
