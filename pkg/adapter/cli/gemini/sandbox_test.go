package gemini

import (
	"slices"
	"testing"
)

// TestSandboxPolicyBindsSettings: a sandboxed run sees the retry settings
// file, read-only; without it the CLI would find no file and retry up to
// MaxCLIAttempts times on its own.
func TestSandboxPolicyBindsSettings(t *testing.T) {
	p, err := DefaultConfig().SandboxPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.ReadOnlyVars, []string{EnvSystemSettingsPath}) {
		t.Errorf("ReadOnlyVars %q, want [%s]", p.ReadOnlyVars, EnvSystemSettingsPath)
	}
	if slices.Contains(p.StateVars, EnvSystemSettingsPath) {
		t.Errorf("the settings file is a state directory (read-write): %q", p.StateVars)
	}
}
