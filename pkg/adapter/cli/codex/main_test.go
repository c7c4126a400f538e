package codex

import (
	"maps"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// The test binary doubles as the codex CLI (conformance.Main).
func TestMain(m *testing.M) { conformance.Main(m) }

// TestConformance runs the conformance suite over the codex adapter,
// the fake CLI replaying the captures of testdata/cli/codex.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.RunCLI(t, New, codexConfig(t), conformance.Subject{Model: "gpt-5.5", SessionID: "01a22a8b-564f-7be0-9f56-beadbebf0082"})
}

// codexConfig is the operator configuration with an empty CODEX_HOME: no
// config.toml of the machine's.
func codexConfig(t *testing.T) cli.Config {
	cfg := DefaultConfig()
	cfg.EnvSet = maps.Clone(cfg.EnvSet)
	if cfg.EnvSet == nil {
		cfg.EnvSet = map[string]string{}
	}
	cfg.EnvSet[EnvCodexHome] = t.TempDir()
	return cfg
}
