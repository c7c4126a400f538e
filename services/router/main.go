// Command router consumes run requests from AGENTMESH_SUBMIT, validates and
// routes them to the runner pools, and answers cancel requests. It is
// configured by AGENTMESH_* environment variables; -h lists them.
package main

import (
	"os"

	"github.com/agentmesh/agentmesh/pkg/service"
)

func main() { os.Exit(service.Main("router", run)) }
