// Command agentmesh-sandbox-init is the sandbox's init (package
// sandboxinit) as a small binary of its own: the subprocess runner starts
// it as pid 1 of every confined run when it lies next to the runner's
// executable or on PATH (AGENTMESH_SANDBOX_INIT names it elsewhere). It
// starts in a few milliseconds where re-executing the runner costs the
// runner's package initializers. Started by hand it does nothing.
package main

import (
	"os"

	"github.com/agentmesh/agentmesh/pkg/sandbox/sandboxinit"
)

func main() {
	_, _ = os.Stderr.WriteString(sandboxinit.InitName + ": the subprocess runner's sandbox starts this program as a run's init (argv[0] " +
		sandboxinit.InitName + "); it does nothing started by hand\n")
	os.Exit(2)
}
