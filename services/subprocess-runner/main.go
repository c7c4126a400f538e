// Command subprocess-runner executes runs for the agent CLI adapters
// (claude-code, codex, gemini, pi) named in AGENTMESH_RUNNER_ADAPTERS,
// pulling work from the pools' shared consumers on AGENTMESH_WORK, and for
// the in-process fixture adapter. It refuses to host a remote (model API)
// adapter: that is the remote-runner's. It is configured by AGENTMESH_*
// environment variables; -h lists them.
package main

import (
	"os"

	"github.com/agentmesh/agentmesh/pkg/runner/runnerservice"
)

func main() { os.Exit(runnerservice.Subprocess.Main()) }
