// Package serviceconfig holds the configuration of the router, sweeper,
// exporter and gateway services, each as its binary reads it from the
// AGENTMESH_* environment (service.LoadService): the common variables and
// the component's own, whose defaults and checks are the component
// Config's. `agentmesh up` reads the same types from the same environment,
// so a setting means one thing whichever way the mesh runs. The runners'
// configuration is runnerservice.Config.
package serviceconfig

import (
	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/exporter"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
)

// Router is the router's configuration: the common variables, the
// adapters' and the router's own (AGENTMESH_ROUTER_WORKERS, ...), whose
// defaults and checks are router.Config's.
type Router struct {
	service.Config
	catalog.Dirs
	Router router.Config `split_words:"true"`
}

// Validate names each bad router variable.
func (c Router) Validate() error { return c.Router.Validate() }

// Sweeper is the sweeper's configuration: the common variables, the
// profiles' directory and the sweeper's own
// (AGENTMESH_SWEEPER_RECONCILE_EVERY, AGENTMESH_SWEEPER_EXPORTS_EVERY,
// AGENTMESH_SWEEPER_ARTIFACTS_EVERY), whose defaults and checks are
// sweeper.Config's.
type Sweeper struct {
	service.Config
	ProfilesDir string         `split_words:"true" default:"profiles" desc:"directory of the profile documents; their registry version is in this service's micro info"`
	Sweeper     sweeper.Config `split_words:"true"`
}

// Validate names each bad sweeper variable.
func (c Sweeper) Validate() error { return c.Sweeper.Validate() }

// Exporter is the exporter's configuration: the common variables, the
// profiles' directory and the exporter's own (AGENTMESH_EXPORTER_WORKERS,
// AGENTMESH_EXPORTER_ACK_WAIT), whose defaults and checks are
// exporter.Config's. The retention is the operator's
// AGENT_TRAJECTORY_RETENTION (exports.LoadSettings).
type Exporter struct {
	service.Config
	ProfilesDir string          `split_words:"true" default:"profiles" desc:"directory of the profile documents; their registry version is in this service's micro info"`
	Exporter    exporter.Config `split_words:"true"`
}

// Validate names each bad exporter variable.
func (c Exporter) Validate() error { return c.Exporter.Validate() }

// Gateway is the gateway's configuration: the common variables, the
// profiles' directory (the models it accepts) and the gateway's own
// (AGENTMESH_GATEWAY_ADDR, AGENTMESH_GATEWAY_MAX_BODY_BYTES, ...), whose
// defaults and checks are gateway.Config's.
type Gateway struct {
	service.Config
	ProfilesDir string         `split_words:"true" default:"profiles" desc:"directory of the profile documents: the models the gateway accepts"`
	Gateway     gateway.Config `split_words:"true"`
}

// Validate names each bad gateway variable.
func (c Gateway) Validate() error { return c.Gateway.Validate() }
