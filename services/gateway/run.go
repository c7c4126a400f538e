package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/serviceconfig"
)

// Config is the gateway's configuration (serviceconfig.Gateway), which
// agentmesh up reads too.
type Config = serviceconfig.Gateway

// run serves the HTTP API until ctx ends.
func run(ctx context.Context, cfg Config, log *slog.Logger) (err error) {
	profiles, err := profile.Load(cfg.ProfilesDir)
	if err != nil {
		return fmt.Errorf("%w: AGENTMESH_PROFILES_DIR: %w", service.ErrConfig, err)
	}
	infra, err := service.Start(ctx, "agentmesh-gateway", cfg.Config, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, infra.Close()) }()
	g, err := gateway.Open(ctx, infra.Deps, profiles, cfg.Gateway)
	if err != nil {
		return err
	}
	log.Info("gateway started", "addr", cfg.Gateway.Addr, "registry_version", profiles.Version(), "profiles", profiles.Names(),
		"nats", service.ConnectedURL(infra.Deps.NC), "http", infra.HTTPAddr())
	return g.Run(ctx)
}
