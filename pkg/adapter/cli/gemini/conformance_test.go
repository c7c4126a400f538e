package gemini

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// TestConformance runs the conformance suite over the gemini adapter, the
// fake CLI replaying the captures of testdata/cli/gemini.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.WithCaptures(t, conformance.Subject{
		Name:      Name,
		New:       func(cfg cli.Config) (adapter.Adapter, error) { return New(cfg) },
		Config:    DefaultConfig(),
		Model:     "gemini-2.5-flash",
		SessionID: "f9f8d0ce-8f8e-497e-b1f8-e1b327e8af6e",
	}))
}
