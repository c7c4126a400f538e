package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/serve"
	"github.com/agentmesh/agentmesh/pkg/service"
)

// Config is the exporter's configuration.
type Config struct {
	service.Config
	ProfilesDir string `split_words:"true" default:"profiles" desc:"directory of the profile documents; their registry version is in this service's micro info"`
}

// run registers the exporter and waits until ctx ends. It exports nothing
// yet.
func run(ctx context.Context, cfg Config, log *slog.Logger) (err error) {
	infra, err := serve.Start(ctx, "agentmesh-exporter", cfg.Config, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, infra.Close()) }()
	profiles, err := profile.Load(cfg.ProfilesDir)
	if err != nil {
		return err
	}
	svc, err := service.Register(infra.Deps.NC, "agentmesh-exporter", "exports trajectories of finished runs (not built yet)",
		map[string]string{"export": "not built", "registry_version": profiles.Version()})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, svc.Stop()) }()
	infra.Deps.Health.Add("exporter", service.ConnCheck(infra.Deps.NC))
	log.Warn("trajectory export is not built yet: the exporter only registers and serves health and metrics",
		"nats", service.ConnectedURL(infra.Deps.NC), "http", infra.HTTPAddr())
	<-ctx.Done()
	return nil
}
