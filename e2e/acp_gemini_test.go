//go:build e2e

package e2e

import (
	"path/filepath"
	"testing"
)

// geminiACP is Gemini CLI 0.61.0 in its ACP mode (gemini --acp) in
// TestACPAgents, configured as testdata/acp/README.md records: the
// headless e2e's settings.json (gemini-api-key auth, GEMINI_API_KEY,
// GOOGLE_GEMINI_BASE_URL at the fake), the model pinned with --model (the
// default, auto, adds a routing request to another model before each
// turn), and a user policy that asks before `echo`, which Gemini CLI
// otherwise runs as a known-safe command without asking.
var geminiACP = acpAgent{
	name: "gemini-acp", bin: "gemini", model: "gemini-2.5-flash",
	pricing: `{input: "0.30", output: "2.50", cache_read: "0.075", cache_write: "0", reasoning: "2.50"}`,
	env: `args: [--acp, --model, gemini-2.5-flash]
env:
  GEMINI_TELEMETRY_ENABLED: "false"
`,
	allow:     []string{"GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_CLI_HOME"},
	configure: configureGeminiACP,
	// A refused call: no tool update at all; the refusal is the call's
	// error to the model, and the turn goes on.
	denyHidesCall: true,
	// Its completed shell call's update has no content and no rawOutput.
	hidesToolOutput: true,
}

// configureGeminiACP writes Gemini CLI's settings and policy under its own
// home below home (GEMINI_CLI_HOME: the sandbox binds it, not the
// runner's HOME) and returns its variables.
func configureGeminiACP(t *testing.T, home, fakeURL string) map[string]string {
	geminiHome := mkdir(t, home, "gemini-cli-home")
	dir := mkdir(t, geminiHome, ".gemini")
	write(t, filepath.Join(dir, "settings.json"), geminiSettings)
	write(t, filepath.Join(mkdir(t, dir, "policies"), "e2e.toml"), `[[rule]]
toolName = "run_shell_command"
commandPrefix = "echo"
decision = "ask_user"
priority = 100
`)
	return map[string]string{"GEMINI_API_KEY": "fake-gemini-key-0000", "GOOGLE_GEMINI_BASE_URL": fakeURL, "GEMINI_CLI_HOME": geminiHome}
}
