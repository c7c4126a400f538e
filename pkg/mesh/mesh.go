// Package mesh assembles the services of agentmesh in one process: it
// ensures the topology and runs a router, a runner host and a sweeper on one
// connection. `agentmesh up` and the integration tests use it; deployments
// run each service as its own binary instead.
package mesh

import (
	"context"
	"errors"
	"sync"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
	"github.com/agentmesh/agentmesh/pkg/topology"
)

// Config selects and configures the services to run.
type Config struct {
	Topology topology.Config
	Router   router.Config
	Runner   runner.Config
	Sweeper  sweeper.Config
	// Without* leave a service out.
	WithoutRouter, WithoutRunner, WithoutSweeper bool
}

// Run ensures the topology, starts the selected services and blocks until ctx
// ends and every service has returned. It returns the first service error;
// one service failing stops the others. A failure caused by ctx ending while
// the services start is not an error: Run then returns nil.
func Run(ctx context.Context, d service.Deps, profiles *profile.Registry, adapters *adapter.Registry, cfg Config) error {
	err := run(ctx, d, profiles, adapters, cfg)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Stopped while starting: what failed was cut short by the stop.
		return nil
	}
	return err
}

func run(ctx context.Context, d service.Deps, profiles *profile.Registry, adapters *adapter.Registry, cfg Config) error {
	cfg.Topology.Names = d.Names
	if cfg.Router.AdapterQueueMax == 0 {
		cfg.Router.AdapterQueueMax = cfg.Topology.WorkQueueMax
	}
	cfg.Runner.Metadata = service.Metadata(cfg.Runner.Metadata, "registry_version", profiles.Version())
	cfg.Sweeper.Metadata = service.Metadata(cfg.Sweeper.Metadata, "registry_version", profiles.Version())
	if err := topology.Ensure(ctx, d.JS, cfg.Topology); err != nil {
		return err
	}
	var runs []func(context.Context) error
	if !cfg.WithoutRouter {
		r, err := router.New(ctx, d, profiles, adapters, cfg.Router)
		if err != nil {
			return err
		}
		runs = append(runs, r.Run)
	}
	if !cfg.WithoutRunner {
		h, err := runner.New(ctx, d, adapters, cfg.Runner)
		if err != nil {
			return err
		}
		runs = append(runs, h.Run)
	}
	if !cfg.WithoutSweeper {
		s, err := sweeper.New(ctx, d, cfg.Sweeper)
		if err != nil {
			return err
		}
		runs = append(runs, s.Run)
	}
	d.Log.Info("mesh started", "registry_version", profiles.Version(), "profiles", profiles.Names(), "adapters", adapters.Names())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(runs))
	for i, run := range runs {
		wg.Go(func() {
			errs[i] = run(ctx)
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
