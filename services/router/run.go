package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/serviceconfig"
)

// Config is the router's configuration (serviceconfig.Router), which
// agentmesh up reads too.
type Config = serviceconfig.Router

// run routes submissions until ctx ends. The router validates requests with
// every adapter this build knows, so it builds all of them.
func run(ctx context.Context, cfg Config, log *slog.Logger) (err error) {
	export, err := exports.LoadSettings(os.LookupEnv)
	if err != nil {
		return err
	}
	profiles, err := cfg.Profiles()
	if err != nil {
		return err
	}
	adapters, err := cfg.Registry(profiles)
	if err != nil {
		return err
	}
	infra, err := service.Start(ctx, "agentmesh-router", cfg.Config, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, infra.Close()) }()
	rc := cfg.Router
	rc.AdapterQueueMax, rc.ExportEnabled = cfg.WorkQueueMax, export.Enabled
	r, err := router.New(ctx, infra.Deps, profiles, adapters, rc)
	if err != nil {
		return err
	}
	log.Info("router started", "export_enabled", export.Enabled, "registry_version", profiles.Version(), "profiles", profiles.Names(),
		"adapters", adapters.Names(), "nats", service.ConnectedURL(infra.Deps.NC), "http", infra.HTTPAddr())
	return r.Run(ctx)
}
