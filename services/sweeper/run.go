package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/agentmesh/agentmesh/pkg/exporter"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
)

// Config is the sweeper's configuration: the common variables, the
// profiles' directory and the sweeper's own
// (AGENTMESH_SWEEPER_RECONCILE_EVERY, AGENTMESH_SWEEPER_EXPORTS_EVERY),
// whose defaults and checks are sweeper.Config's.
type Config struct {
	service.Config
	ProfilesDir string         `split_words:"true" default:"profiles" desc:"directory of the profile documents; their registry version is in this service's micro info"`
	Sweeper     sweeper.Config `split_words:"true"`
}

// Validate names each bad sweeper variable.
func (c Config) Validate() error { return c.Sweeper.Validate() }

// run sweeps until ctx ends.
func run(ctx context.Context, cfg Config, log *slog.Logger) (err error) {
	export, err := exports.LoadSettings(os.LookupEnv)
	if err != nil {
		return err
	}
	infra, err := service.Start(ctx, "agentmesh-sweeper", cfg.Config, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, infra.Close()) }()
	profiles, err := profile.Load(cfg.ProfilesDir)
	if err != nil {
		return err
	}
	store, err := exporter.OpenStore(ctx, infra.Deps.JS, infra.Deps.Names, export)
	if err != nil {
		return err
	}
	sc := cfg.Sweeper
	sc.Metadata = service.Metadata(sc.Metadata, "registry_version", profiles.Version())
	x := sweeper.ExportsConfig{}
	if sc.Exports != nil {
		x = *sc.Exports
	}
	x.Store = store
	sc.Exports = &x
	s, err := sweeper.New(ctx, infra.Deps, sc)
	if err != nil {
		return err
	}
	log.Info("sweeper started", "lease_ttl", cfg.LeaseTTL, "registry_version", profiles.Version(), "nats", service.ConnectedURL(infra.Deps.NC), "http", infra.HTTPAddr())
	return s.Run(ctx)
}
