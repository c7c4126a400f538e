package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/fixture"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service"
)

// AdapterConfig configures the adapters a process can host. Embed it in a
// service's Config.
type AdapterConfig struct {
	// FixtureDir is where the fixture adapter reads its scripts.
	FixtureDir string `split_words:"true" default:"testdata/fixture" desc:"directory of the fixture adapter's scripts"`
}

// builders make each known adapter from the configuration.
var builders = map[string]func(AdapterConfig) (adapter.Adapter, error){
	fixture.DefaultName: func(c AdapterConfig) (adapter.Adapter, error) {
		return fixture.New(fixture.Config{ScriptsDir: c.FixtureDir})
	},
}

// KnownAdapters returns the names of the adapters this build can host,
// sorted.
func KnownAdapters() []string {
	names := make([]string, 0, len(builders))
	for n := range builders {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Registry builds the named adapters, or every known adapter when names is
// empty. An unknown name is an error listing the known ones.
func (c AdapterConfig) Registry(names ...string) (*adapter.Registry, error) {
	if len(names) == 0 {
		names = KnownAdapters()
	}
	reg, err := adapter.NewRegistry()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		build, ok := builders[n]
		if !ok {
			return nil, fmt.Errorf("unknown adapter %q (known: %s)", n, strings.Join(KnownAdapters(), ", "))
		}
		a, err := build(c)
		if err != nil {
			return nil, fmt.Errorf("adapter %s: %w", n, err)
		}
		if err := reg.Add(a); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// RunnerConfig is the configuration of a runner host process. Embed it,
// next to service.Config, in a runner service's Config.
type RunnerConfig struct {
	AdapterConfig
	RunnerID               string         `split_words:"true" desc:"runner id in run records and on its cancel subject (default: random)"`
	RunnerAdapters         []string       `split_words:"true" default:"fixture" desc:"adapters this runner hosts"`
	RunnerMaxActive        map[string]int `split_words:"true" default:"fixture:8" desc:"runs executed at once per adapter, as adapter:n,..."`
	RunnerDefaultMaxActive int            `split_words:"true" default:"1" desc:"runs executed at once by an adapter not in RUNNER_MAX_ACTIVE"`
	RunnerAckWait          time.Duration  `split_words:"true" default:"30s" desc:"ack wait of the work consumers"`
	RunnerDrainTimeout     time.Duration  `split_words:"true" default:"10s" desc:"how long runs in hand may finish at shutdown"`
}

// Validate checks every field and names each bad variable.
func (c RunnerConfig) Validate() error {
	var bad Problems
	known := KnownAdapters()
	if len(c.RunnerAdapters) == 0 {
		bad.Add("AGENTMESH_RUNNER_ADAPTERS", "name at least one adapter (known: %s)", strings.Join(known, ", "))
	}
	for i, n := range c.RunnerAdapters {
		switch {
		case !slices.Contains(known, n):
			bad.Add("AGENTMESH_RUNNER_ADAPTERS", "unknown adapter %q (known: %s)", n, strings.Join(known, ", "))
		case slices.Contains(c.RunnerAdapters[:i], n):
			bad.Add("AGENTMESH_RUNNER_ADAPTERS", "adapter %q is named twice", n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(c.RunnerMaxActive)) {
		switch v := c.RunnerMaxActive[n]; {
		case !slices.Contains(known, n):
			bad.Add("AGENTMESH_RUNNER_MAX_ACTIVE", "unknown adapter %q (known: %s)", n, strings.Join(known, ", "))
		case v < 1:
			bad.Add("AGENTMESH_RUNNER_MAX_ACTIVE", "%s must be > 0, got %d", n, v)
		}
	}
	if c.RunnerDefaultMaxActive < 1 {
		bad.Add("AGENTMESH_RUNNER_DEFAULT_MAX_ACTIVE", "must be > 0, got %d", c.RunnerDefaultMaxActive)
	}
	if c.RunnerAckWait < time.Second {
		bad.Add("AGENTMESH_RUNNER_ACK_WAIT", "must be at least 1s, got %s", c.RunnerAckWait)
	}
	if c.RunnerDrainTimeout <= 0 {
		bad.Add("AGENTMESH_RUNNER_DRAIN_TIMEOUT", "must be > 0, got %s", c.RunnerDrainTimeout)
	}
	return bad.Err()
}

// Runner is the runner host configuration c describes.
func (c RunnerConfig) Runner() runner.Config {
	return runner.Config{
		ID:               c.RunnerID,
		MaxActive:        c.RunnerMaxActive,
		DefaultMaxActive: c.RunnerDefaultMaxActive,
		AckWait:          c.RunnerAckWait,
		DrainTimeout:     c.RunnerDrainTimeout,
	}
}

// RunRunner is the run function of a runner service: it builds the adapters
// of rc, starts the infrastructure as client name, and runs a runner host
// until ctx ends, then shuts down in reverse order.
func RunRunner(ctx context.Context, name string, common service.Config, rc RunnerConfig, log *slog.Logger) (err error) {
	adapters, err := rc.Registry(rc.RunnerAdapters...)
	if err != nil {
		return err
	}
	infra, err := Start(ctx, name, common, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, infra.Close()) }()
	host, err := runner.New(ctx, infra.Deps, adapters, rc.Runner())
	if err != nil {
		return err
	}
	log.Info("runner started", "runner_id", host.ID(), "adapters", adapters.Names(), "nats", infra.Deps.NC.ConnectedUrlRedacted(), "http", infra.HTTPAddr())
	return host.Run(ctx)
}
