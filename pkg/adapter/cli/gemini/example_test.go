package gemini_test

import (
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/gemini"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// A run's model is the request's, else the pinned one, spelled the way the
// CLI's -m takes it.
func ExampleCLIModel() {
	for _, m := range [][2]string{
		{"", "gemini-2.5-flash"},
		{"", "models/gemini-2.5-pro"},
		{"flash-lite", "gemini-2.5-flash"},
	} {
		got, _ := gemini.CLIModel(m[0], m[1])
		fmt.Println(got)
	}
	// Output:
	// gemini-2.5-flash
	// gemini-2.5-pro
	// flash-lite
}

// The run's attempt policy becomes the CLI's general.maxAttempts.
func ExampleCLIAttempts() {
	fmt.Println(gemini.CLIAttempts(1), gemini.CLIAttempts(3), gemini.CLIAttempts(50))
	// Output: 1 3 10
}

// Decode validates a msgpack request strictly.
func ExampleDecode() {
	b, _ := wire.Marshal(map[string]any{"prompt": "List the files", "approval_mode": "yolo"})
	req, err := gemini.Decode(b)
	fmt.Printf("%q %s %v\n", req.Prompt, req.ApprovalMode, err)

	b, _ = wire.Marshal(map[string]any{"prompt": "hi", "approval_mode": "always", "turns": 3})
	_, err = gemini.Decode(b)
	fmt.Println(err)
	// Output:
	// "List the files" yolo <nil>
	// AgenticRequestValidationError: gemini request: field "approval_mode": "always" is not one of default, auto_edit, yolo, plan; unknown field "turns"
}

// The retry settings file for a policy of three attempts, as root would
// provision it in SharedSettingsDir for a runner that is not root.
func ExampleSettingsFileName() {
	fmt.Printf("%s/%s\n%s", gemini.SharedSettingsDir, gemini.SettingsFileName(3), gemini.SettingsContent(3))
	// Output:
	// /var/cache/agentmesh/gemini/system-settings-max-attempts-3.json
	// {"general":{"maxAttempts":3}}
}
