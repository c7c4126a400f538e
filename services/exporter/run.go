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
)

// Config is the exporter's configuration.
type Config struct {
	service.Config
	ProfilesDir     string        `split_words:"true" default:"profiles" desc:"directory of the profile documents; their registry version is in this service's micro info"`
	ExporterWorkers int           `split_words:"true" default:"4" desc:"runs exported at once"`
	ExporterAckWait time.Duration `split_words:"true" default:"60s" desc:"ack wait of the exporters' shared consumer of the run records"`
}

// Validate names each bad exporter variable.
func (c Config) Validate() error {
	var bad serve.Problems
	if c.ExporterWorkers < 1 {
		bad.Add("AGENTMESH_EXPORTER_WORKERS", "must be > 0, got %d", c.ExporterWorkers)
	}
	if c.ExporterAckWait < time.Second {
		bad.Add("AGENTMESH_EXPORTER_ACK_WAIT", "must be at least 1s, got %s", c.ExporterAckWait)
	}
	return bad.Err()
}

// run exports until ctx ends.
func run(ctx context.Context, cfg Config, log *slog.Logger) (err error) {
	export, err := exports.LoadSettings(os.LookupEnv)
	if err != nil {
		return err
	}
	infra, err := serve.Start(ctx, "agentmesh-exporter", cfg.Config, log)
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
	x, err := exporter.New(ctx, infra.Deps, store, exporter.Config{
		Retention: export.Retention, Workers: cfg.ExporterWorkers, AckWait: cfg.ExporterAckWait, Metadata: meta,
	})
	if err != nil {
		return err
	}
	log.Info("exporter started", "retention", export.Retention, "artifact_root", export.ArtifactRoot,
		"nats", service.ConnectedURL(infra.Deps.NC), "http", infra.HTTPAddr())
	return x.Run(ctx)
}
