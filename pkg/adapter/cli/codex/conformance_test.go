package codex

import (
	"maps"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// TestConformance runs the conformance suite over the codex adapter, the
// fake CLI replaying the captures of testdata/cli/codex.
func TestConformance(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.EnvSet = maps.Clone(cfg.EnvSet)
	if cfg.EnvSet == nil {
		cfg.EnvSet = map[string]string{}
	}
	cfg.EnvSet[EnvCodexHome] = t.TempDir() // an empty CODEX_HOME: no config.toml of the machine's
	conformance.Run(t, conformance.WithCaptures(t, conformance.Subject{
		Name:      Name,
		New:       func(cfg cli.Config) (adapter.Adapter, error) { return New(cfg) },
		Config:    cfg,
		Model:     "gpt-5.5",
		SessionID: "01a22a8b-564f-7be0-9f56-beadbebf0082",
	}))
}
