package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/agentmesh/agentmesh/pkg/exporter"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/serviceconfig"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
)

// Config is the sweeper's configuration (serviceconfig.Sweeper), which
// agentmesh up reads too.
type Config = serviceconfig.Sweeper

// run sweeps until ctx ends.
func run(ctx context.Context, cfg Config, log *slog.Logger) (err error) {
	h, err := exporter.StartHost(ctx, "agentmesh-sweeper", cfg.Config, cfg.ProfilesDir, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h.Infra.Close()) }()
	store, err := h.OpenStore(ctx)
	if err != nil {
		return err
	}
	sc := cfg.Sweeper
	sc.Metadata = service.Metadata(sc.Metadata, "registry_version", h.Profiles.Version())
	x := sweeper.ExportsConfig{}
	if sc.Exports != nil {
		x = *sc.Exports
	}
	x.Store = store
	sc.Exports = &x
	s, err := sweeper.New(ctx, h.Infra.Deps, sc)
	if err != nil {
		return err
	}
	log.Info("sweeper started", "lease_ttl", cfg.LeaseTTL, "registry_version", h.Profiles.Version(), "nats", service.ConnectedURL(h.Infra.Deps.NC), "http", h.Infra.HTTPAddr())
	return s.Run(ctx)
}
