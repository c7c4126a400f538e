// Command gateway serves the mesh's OpenAI-compatible HTTP API
// (pkg/gateway) on AGENTMESH_GATEWAY_ADDR, default 127.0.0.1:8080. It is a
// stateless client of the mesh: run as many as the traffic needs. It is
// configured by AGENTMESH_* environment variables; -h lists them.
package main

import (
	"os"

	"github.com/agentmesh/agentmesh/pkg/service"
)

func main() { os.Exit(service.Main("gateway", run)) }
