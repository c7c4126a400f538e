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
)

// Config is the exporter's configuration: the common variables, the
// profiles' directory and the exporter's own (AGENTMESH_EXPORTER_WORKERS,
// AGENTMESH_EXPORTER_ACK_WAIT), whose defaults and checks are
// exporter.Config's. The retention is the operator's
// AGENT_TRAJECTORY_RETENTION.
type Config struct {
	service.Config
	ProfilesDir string          `split_words:"true" default:"profiles" desc:"directory of the profile documents; their registry version is in this service's micro info"`
	Exporter    exporter.Config `split_words:"true"`
}

// Validate names each bad exporter variable.
func (c Config) Validate() error { return c.Exporter.Validate() }

// run exports until ctx ends.
func run(ctx context.Context, cfg Config, log *slog.Logger) (err error) {
	export, err := exports.LoadSettings(os.LookupEnv)
	if err != nil {
		return err
	}
	infra, err := service.Start(ctx, "agentmesh-exporter", cfg.Config, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, infra.Close()) }()
	profiles, err := profile.Load(cfg.ProfilesDir)
	if err != nil {
		return err
	}
	meta := map[string]string{"registry_version": profiles.Version()}
	if !export.Enabled {
		return exporter.Idle(ctx, infra.Deps, meta)
	}
	store, err := exporter.OpenStore(ctx, infra.Deps.JS, infra.Deps.Names, export)
	if err != nil {
		return err
	}
	xc := cfg.Exporter
	xc.Retention, xc.Metadata = export.Retention, meta
	x, err := exporter.New(ctx, infra.Deps, store, xc)
	if err != nil {
		return err
	}
	log.Info("exporter started", "retention", export.Retention, "artifact_root", export.ArtifactRoot,
		"nats", service.ConnectedURL(infra.Deps.NC), "http", infra.HTTPAddr())
	return x.Run(ctx)
}
