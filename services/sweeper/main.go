// Command sweeper ends running runs whose runner stopped renewing its lease:
// they end failed with ProviderTransportError within the lease TTL.
// It expires runs' artifacts, and trajectory exports where they are
// enabled: bytes first, then records. It is configured by AGENTMESH_*
// environment variables; -h lists them.
package main

import (
	"os"

	"github.com/agentmesh/agentmesh/pkg/service"
)

func main() { os.Exit(service.Main("sweeper", run)) }
