// Command exporter turns ended, consented runs into redacted,
// content-addressed trajectories (docs/contract.md §7, pkg/exporter). Several may
// run: they share one durable consumer of the run records. With
// AGENT_TRAJECTORY_EXPORT_ENABLED unset or 0 it only registers and waits.
// It is configured by AGENTMESH_* environment variables and the
// operator's AGENT_TRAJECTORY_EXPORT_ENABLED, AGENT_ARTIFACT_ROOT and
// AGENT_TRAJECTORY_RETENTION; -h lists the AGENTMESH_* ones.
package main

import (
	"os"

	"github.com/agentmesh/agentmesh/pkg/service"
)

func main() { os.Exit(service.Main("exporter", run)) }
