package pi

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// TestConformance runs the conformance suite over the pi adapter, the
// fake CLI replaying the captures of testdata/cli/pi.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.WithCaptures(t, conformance.Subject{
		Name:      Name,
		New:       func(cfg cli.Config) (adapter.Adapter, error) { return New(cfg) },
		Config:    DefaultConfig(),
		Model:     "fake-model",
		SessionID: "01a22a8d-7f7d-7689-a314-843817dab2e1",
	}))
}
