package exporter

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
)

// Host is what a service process of the trajectory export runs on (the
// exporter, and the sweeper, which removes expired exports): the
// operator's export settings, the process's infrastructure and the
// profiles' registry, whose version the service reports.
type Host struct {
	Export   exports.Settings
	Infra    *service.Infra
	Profiles *profile.Registry
}

// StartHost reads the export settings from the environment
// (exports.LoadSettings), starts the infrastructure as name
// (service.Start) and loads the profiles in profilesDir, in that order, so
// that bad settings fail before anything connects. On error whatever was
// started has been released; otherwise the caller closes h.Infra. It
// blocks until all of that is done or ctx ends.
func StartHost(ctx context.Context, name string, cfg service.Config, profilesDir string, log *slog.Logger) (*Host, error) {
	export, err := exports.LoadSettings(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	infra, err := service.Start(ctx, name, cfg, log)
	if err != nil {
		return nil, err
	}
	profiles, err := profile.Load(profilesDir)
	if err != nil {
		return nil, errors.Join(err, infra.Close())
	}
	return &Host{Export: export, Infra: infra, Profiles: profiles}, nil
}

// OpenStore returns the trajectory store h's settings name (OpenStore),
// waiting while JetStream is not ready (jsretry.Await) until ctx ends.
func (h *Host) OpenStore(ctx context.Context) (trajstore.Store, error) {
	return jsretry.Await(ctx, h.Infra.Deps.NC, h.Infra.Deps.Log, "trajectory store", func(ctx context.Context) (trajstore.Store, error) {
		return OpenStore(ctx, h.Infra.Deps.JS, h.Infra.Deps.Names, h.Export)
	})
}
