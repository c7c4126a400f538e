package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
)

// Config is the gateway's configuration: the common variables, the
// profiles' directory (the models it accepts) and the gateway's own
// (AGENTMESH_GATEWAY_ADDR, AGENTMESH_GATEWAY_MAX_BODY_BYTES), whose
// defaults and checks are gateway.Config's.
type Config struct {
	service.Config
	ProfilesDir string         `split_words:"true" default:"profiles" desc:"directory of the profile documents: the models the gateway accepts"`
	Gateway     gateway.Config `split_words:"true"`
}

// Validate names each bad gateway variable.
func (c Config) Validate() error { return c.Gateway.Validate() }

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
