// Package mesh assembles the services of agentmesh in one process: it
// ensures the topology and runs a router, a runner host, a sweeper, an
// exporter and, when configured, the HTTP gateway, on one connection or (Config.Connect) each on its own, as the
// service binaries are. `agentmesh up` and the integration tests use it;
// deployments run each service as its own binary instead.
package mesh

import (
	"context"
	"errors"
	"sync"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/exporter"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/router"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
	"github.com/agentmesh/agentmesh/pkg/topology"
)

// Config selects and configures the services to run.
type Config struct {
	Topology topology.Config
	Router   router.Config
	Runner   runner.Config
	// RunnerAdapters, when set, are the adapters the runner host runs
	// work for; the router checks requests against Run's adapters, every
	// profile's. Set, the adapters it leaves out are for runners of their
	// own (agentmesh up --runner-adapters).
	RunnerAdapters *adapter.Registry
	Sweeper        sweeper.Config
	Exporter       exporter.Config
	// Export is the operator's export settings (exports.LoadSettings).
	// Enabled, the router stamps consent and the exporter exports; the
	// sweeper expires exports either way.
	Export exports.Settings
	// Gateway, when set, also runs the HTTP gateway with it (none by
	// default: it listens on a TCP address).
	Gateway *gateway.Config
	// Without* leave a service out.
	WithoutRouter, WithoutRunner, WithoutSweeper, WithoutExporter bool
	// Connect, when set, gives each service its own connection, as each
	// service binary has: it is called once per service with the
	// service's name ("router", "runner", "sweeper", "exporter", "gateway") and
	// returns the deps to run it on (the metrics, health, log and tracing
	// of Run's deps are kept); Run closes each connection once every service has
	// returned. Unset, every service shares Run's connection, where one
	// service's traffic queues behind another's.
	Connect func(service string) (service.Deps, error)
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
	var closers []func()
	cfg.Topology.Names = d.Names
	if cfg.Router.AdapterQueueMax == 0 {
		cfg.Router.AdapterQueueMax = cfg.Topology.WorkQueueMax
	}
	cfg.Runner.Metadata = service.Metadata(cfg.Runner.Metadata, "registry_version", profiles.Version())
	cfg.Sweeper.Metadata = service.Metadata(cfg.Sweeper.Metadata, "registry_version", profiles.Version())
	cfg.Exporter.Metadata = service.Metadata(cfg.Exporter.Metadata, "registry_version", profiles.Version())
	cfg.Router.ExportEnabled = cfg.Export.Enabled
	if cfg.Exporter.Retention == 0 {
		cfg.Exporter.Retention = cfg.Export.Retention
	}
	if cfg.Topology.Log == nil {
		cfg.Topology.Log = d.Log
	}
	if err := topology.Ensure(ctx, d.JS, cfg.Topology); err != nil {
		return err
	}
	var store trajstore.Store
	if !cfg.WithoutSweeper || (!cfg.WithoutExporter && cfg.Export.Enabled) {
		var err error
		if store, err = jsretry.Await(ctx, d.NC, d.Log, "trajectory store", func(ctx context.Context) (trajstore.Store, error) {
			return exporter.OpenStore(ctx, d.JS, d.Names, cfg.Export)
		}); err != nil {
			return err
		}
		// A copy: the caller's ExportsConfig may be shared by several
		// meshes (TestExportScaleOut's two nodes), each with its own store.
		var x sweeper.ExportsConfig
		if cfg.Sweeper.Exports != nil {
			x = *cfg.Sweeper.Exports
		}
		x.Store = store
		cfg.Sweeper.Exports = &x
	}
	var runs []func(context.Context) error
	depsFor := func(name string) (service.Deps, error) {
		if cfg.Connect == nil {
			return d, nil
		}
		own, err := cfg.Connect(name)
		if err != nil {
			return d, err
		}
		own.Names, own.Log, own.Metrics, own.Health = d.Names, d.Log, d.Metrics, d.Health
		own.Tracing = d.Tracing
		closers = append(closers, own.NC.Close)
		return own, nil
	}
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	if !cfg.WithoutRouter {
		d, err := depsFor("router")
		if err != nil {
			return err
		}
		r, err := router.New(ctx, d, profiles, adapters, cfg.Router)
		if err != nil {
			return err
		}
		runs = append(runs, r.Run)
	}
	if !cfg.WithoutRunner {
		d, err := depsFor("runner")
		if err != nil {
			return err
		}
		hosted := adapters
		if cfg.RunnerAdapters != nil {
			hosted = cfg.RunnerAdapters
		}
		h, err := runner.New(ctx, d, hosted, cfg.Runner)
		if err != nil {
			return err
		}
		runs = append(runs, h.Run)
	}
	if !cfg.WithoutSweeper {
		d, err := depsFor("sweeper")
		if err != nil {
			return err
		}
		s, err := sweeper.New(ctx, d, cfg.Sweeper)
		if err != nil {
			return err
		}
		runs = append(runs, s.Run)
	}
	if !cfg.WithoutExporter {
		d, err := depsFor("exporter")
		if err != nil {
			return err
		}
		if cfg.Export.Enabled {
			x, err := exporter.New(ctx, d, store, cfg.Exporter)
			if err != nil {
				return err
			}
			runs = append(runs, x.Run)
		} else {
			runs = append(runs, func(ctx context.Context) error { return exporter.Idle(ctx, d, cfg.Exporter.Metadata) })
		}
	}
	if cfg.Gateway != nil {
		d, err := depsFor("gateway")
		if err != nil {
			return err
		}
		g, err := gateway.Open(ctx, d, profiles, *cfg.Gateway)
		if err != nil {
			return err
		}
		runs = append(runs, g.Run)
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
