package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/agentmesh/agentmesh/pkg/exporter"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/serviceconfig"
)

// Config is the exporter's configuration (serviceconfig.Exporter), which
// agentmesh up reads too.
type Config = serviceconfig.Exporter

// run exports until ctx ends.
func run(ctx context.Context, cfg Config, log *slog.Logger) (err error) {
	h, err := exporter.StartHost(ctx, "agentmesh-exporter", cfg.Config, cfg.ProfilesDir, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h.Infra.Close()) }()
	meta := map[string]string{"registry_version": h.Profiles.Version()}
	if !h.Export.Enabled {
		return exporter.Idle(ctx, h.Infra.Deps, meta)
	}
	store, err := h.OpenStore(ctx)
	if err != nil {
		return err
	}
	xc := cfg.Exporter
	xc.Retention, xc.Metadata = h.Export.Retention, meta
	x, err := exporter.New(ctx, h.Infra.Deps, store, xc)
	if err != nil {
		return err
	}
	log.Info("exporter started", "retention", h.Export.Retention, "artifact_root", h.Export.ArtifactRoot,
		"nats", service.ConnectedURL(h.Infra.Deps.NC), "http", h.Infra.HTTPAddr())
	return x.Run(ctx)
}
