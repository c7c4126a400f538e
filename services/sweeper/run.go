package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exporter"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/serve"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
)

// Config is the sweeper's configuration.
type Config struct {
	service.Config
	ProfilesDir           string        `split_words:"true" default:"profiles" desc:"directory of the profile documents; their registry version is in this service's micro info"`
	SweeperReconcileEvery time.Duration `split_words:"true" default:"1m" desc:"how often all run records are scanned for running runs without a lease and queued runs past their deadline"`
	SweeperExportsEvery   time.Duration `split_words:"true" default:"1m" desc:"how often the trajectory exports are swept (retention passed, consent withdrawn); AGENT_ARTIFACT_ROOT and AGENT_TRAJECTORY_* apply"`
}

// Validate names each bad sweeper variable.
func (c Config) Validate() error {
	var bad serve.Problems
	if c.SweeperReconcileEvery < time.Second {
		bad.Add("AGENTMESH_SWEEPER_RECONCILE_EVERY", "must be at least 1s, got %s", c.SweeperReconcileEvery)
	}
	if c.SweeperExportsEvery < time.Second {
		bad.Add("AGENTMESH_SWEEPER_EXPORTS_EVERY", "must be at least 1s, got %s", c.SweeperExportsEvery)
	}
	return bad.Err()
}

// run sweeps until ctx ends.
func run(ctx context.Context, cfg Config, log *slog.Logger) (err error) {
	export, err := exports.LoadSettings(os.LookupEnv)
	if err != nil {
		return err
	}
	infra, err := serve.Start(ctx, "agentmesh-sweeper", cfg.Config, log)
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
	s, err := sweeper.New(ctx, infra.Deps, sweeper.Config{ReconcileEvery: cfg.SweeperReconcileEvery,
		Metadata: map[string]string{"registry_version": profiles.Version()},
		Exports:  &sweeper.ExportsConfig{Store: store, Every: cfg.SweeperExportsEvery}})
	if err != nil {
		return err
	}
	log.Info("sweeper started", "lease_ttl", cfg.LeaseTTL, "registry_version", profiles.Version(), "nats", service.ConnectedURL(infra.Deps.NC), "http", infra.HTTPAddr())
	return s.Run(ctx)
}
