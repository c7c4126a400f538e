package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/serve"
	"github.com/agentmesh/agentmesh/pkg/service"
)

// Config is the router's configuration.
type Config struct {
	service.Config
	serve.AdapterConfig
	RouterWorkers         int           `split_words:"true" default:"16" desc:"submissions handled at once"`
	RouterAckWait         time.Duration `split_words:"true" default:"30s" desc:"ack wait of the submit consumer"`
	RouterDefaultDeadline time.Duration `split_words:"true" default:"30m" desc:"deadline of a request without deadline_ms"`
	RouterMaxDeadline     time.Duration `split_words:"true" default:"24h" desc:"cap on a request's deadline_ms"`
}

// Validate names each bad router variable.
func (c Config) Validate() error {
	var bad serve.Problems
	if c.RouterWorkers < 1 {
		bad.Add("AGENTMESH_ROUTER_WORKERS", "must be > 0, got %d", c.RouterWorkers)
	}
	if c.RouterAckWait < time.Second {
		bad.Add("AGENTMESH_ROUTER_ACK_WAIT", "must be at least 1s, got %s", c.RouterAckWait)
	}
	if c.RouterMaxDeadline <= 0 {
		bad.Add("AGENTMESH_ROUTER_MAX_DEADLINE", "must be > 0, got %s", c.RouterMaxDeadline)
	}
	if c.RouterDefaultDeadline <= 0 || c.RouterDefaultDeadline > c.RouterMaxDeadline {
		bad.Add("AGENTMESH_ROUTER_DEFAULT_DEADLINE", "must be in (0, AGENTMESH_ROUTER_MAX_DEADLINE=%s], got %s", c.RouterMaxDeadline, c.RouterDefaultDeadline)
	}
	return bad.Err()
}

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
	infra, err := serve.Start(ctx, "agentmesh-router", cfg.Config, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, infra.Close()) }()
	r, err := router.New(ctx, infra.Deps, profiles, adapters, router.Config{
		Workers:         cfg.RouterWorkers,
		AckWait:         cfg.RouterAckWait,
		DefaultDeadline: cfg.RouterDefaultDeadline,
		MaxDeadline:     cfg.RouterMaxDeadline,
		AdapterQueueMax: cfg.WorkQueueMax,
		ExportEnabled:   export.Enabled,
	})
	if err != nil {
		return err
	}
	log.Info("router started", "export_enabled", export.Enabled, "registry_version", profiles.Version(), "profiles", profiles.Names(),
		"adapters", adapters.Names(), "nats", service.ConnectedURL(infra.Deps.NC), "http", infra.HTTPAddr())
	return r.Run(ctx)
}
