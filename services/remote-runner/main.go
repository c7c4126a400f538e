// Command remote-runner executes runs for the model API adapters (openai,
// anthropic, ollama, nlip) named in AGENTMESH_RUNNER_ADAPTERS, pulling work
// from the pools' shared consumers on AGENTMESH_WORK, and for the
// in-process fixture adapter. It refuses to host an agent CLI adapter:
// that is the subprocess-runner's. It is configured by AGENTMESH_*
// environment variables; -h lists them.
package main

import (
	"os"

	"github.com/agentmesh/agentmesh/pkg/runner/runnerservice"
)

func main() { os.Exit(runnerservice.Remote.Main()) }
