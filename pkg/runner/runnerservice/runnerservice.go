// Package runnerservice provides the run function of a runner service: a
// process that hosts the adapters of some transports (the subprocess-runner
// the agent CLIs, the remote-runner the model APIs) in a pkg/runner host.
// Config is read from the environment and Run builds the adapters the
// configuration names, starts the service infrastructure and runs the host
// until its context ends.
package runnerservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is a runner service's environment configuration: the common
// variables, the adapters' (AGENTMESH_PROFILES_DIR, ...), the runner
// host's (AGENTMESH_RUNNER_ID, ...) and the two of its own below.
type Config struct {
	service.Config
	catalog.Dirs
	Runner runner.Config `split_words:"true"`
	// RunnerAdapters are the adapters this runner hosts.
	RunnerAdapters []string `split_words:"true" default:"fixture" desc:"adapters this runner hosts"`
	// RunnerStateDir is the host-local directory of the CLI runs'
	// process-group records (catalog.ReapProcessGroups).
	RunnerStateDir string `split_words:"true" desc:"host-local directory of the CLI runs' process-group records, which the next runner on the host reaps should this one die (default: <user cache dir>/agentmesh/process-groups)"`
	SandboxSettings
}

// Check checks c for a runner that hosts the adapters of transports: the
// runner host's fields, and that AGENTMESH_RUNNER_ADAPTERS and
// AGENTMESH_RUNNER_MAX_ACTIVE name only adapters of those transports, each
// once. Every problem names its variable or is a *service.FieldError that
// service.LoadConfig names.
func (c Config) Check(transports ...wire.Transport) error {
	var bad service.Problems
	hosted := catalog.Names(transports...)
	known := strings.Join(hosted, ", ")
	// refuse says why name may not be hosted here.
	refuse := func(variable, name string) {
		if t, ok := catalog.Transport(name); ok {
			bad.Add(variable, "adapter %q has transport %s, which this runner does not host (it hosts: %s)", name, t, known)
			return
		}
		bad.Add(variable, "unknown adapter %q (known: %s)", name, known)
	}
	if len(c.RunnerAdapters) == 0 {
		bad.Add("AGENTMESH_RUNNER_ADAPTERS", "name at least one adapter (known: %s)", known)
	}
	for i, n := range c.RunnerAdapters {
		switch {
		case !slices.Contains(hosted, n):
			refuse("AGENTMESH_RUNNER_ADAPTERS", n)
		case slices.Contains(c.RunnerAdapters[:i], n):
			bad.Add("AGENTMESH_RUNNER_ADAPTERS", "adapter %q is named twice", n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(c.Runner.MaxActive)) {
		if !slices.Contains(hosted, n) {
			refuse("AGENTMESH_RUNNER_MAX_ACTIVE", n)
		}
	}
	c.SandboxSettings.check(&bad)
	return errors.Join(bad.Err(), c.Runner.Validate())
}

// Run is the run function of a runner service named name that hosts the
// adapters of transports. It readies c (Prepare), starts the
// infrastructure (service.Start) and runs a runner host until ctx ends,
// then shuts down in reverse order. It fails before it connects to
// anything when a profile contradicts its adapter.
func Run(ctx context.Context, name string, transports []wire.Transport, c Config, log *slog.Logger) (err error) {
	if err := c.Check(transports...); err != nil {
		return err // before the profiles: the variables are the first problem
	}
	profiles, err := c.Profiles()
	if err != nil {
		return err
	}
	adapters, enabled, err := c.Prepare(transports, profiles, log)
	if err != nil {
		return err
	}
	infra, err := service.Start(ctx, name, c.Config, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, infra.Close()) }()
	if enabled != nil {
		infra.Deps.Metrics.Register(enabled)
	}
	host, err := runner.New(ctx, infra.Deps, adapters, c.Host(profiles))
	if err != nil {
		return err
	}
	log.Info("runner started", "runner_id", host.ID(), "registry_version", profiles.Version(), "adapters", adapters.Names(), "nats", service.ConnectedURL(infra.Deps.NC), "http", infra.HTTPAddr())
	return host.Run(ctx)
}

// Prepare readies c to host the adapters it names, of transports, from
// profiles: it checks c (Check), reaps the process groups dead runners on
// this host left, sets the sandbox up (hiding the runner's own files and
// hidden from every CLI run) or, with AGENTMESH_SANDBOX=off, marks the
// runs' statuses, and builds the adapters. The gauge, for a runner that
// hosts a CLI adapter, says whether the sandbox is on. agentmesh up readies
// its runner with it too.
func (c *Config) Prepare(transports []wire.Transport, profiles *profile.Registry, log *slog.Logger, hidden ...string) (*adapter.Registry, prometheus.Gauge, error) {
	if err := c.Check(transports...); err != nil {
		return nil, nil, err
	}
	var err error
	if c.StateDir, err = catalog.ReapProcessGroups(c.RunnerStateDir, log); err != nil {
		return nil, nil, fmt.Errorf("%w: AGENTMESH_RUNNER_STATE_DIR: %v", service.ErrConfig, err)
	}
	enabled, err := c.sandbox(log, hidden...)
	if err != nil {
		return nil, nil, err
	}
	adapters, err := c.Registry(profiles, c.RunnerAdapters...)
	if err != nil {
		return nil, nil, err
	}
	return adapters, enabled, nil
}

// Host is the runner host's configuration c gives, for profiles.
func (c Config) Host(profiles *profile.Registry) runner.Config {
	rc := c.Runner
	rc.MaxActive = catalog.MaxActive(profiles, c.Runner.MaxActive)
	rc.ProfileMaxActive = catalog.ProfileMaxActive(profiles)
	rc.Metadata = service.Metadata(rc.Metadata, "registry_version", profiles.Version())
	rc.WorkspaceRoot = c.WorkspaceRoot
	return rc
}

// Service is a runner service binary: its name and the transports of the
// adapters it hosts.
type Service struct {
	// Name is the binary's name, such as "remote-runner"; its NATS client
	// is named "agentmesh-" + Name.
	Name string
	// Transports are those of the adapters it hosts.
	Transports []wire.Transport
}

// The two runner binaries. Each hosts the in-process fixture as well,
// which needs no transport and lets a deployment be tried offline.
var (
	// Remote is the remote-runner: the model APIs, reached over HTTP.
	Remote = Service{Name: "remote-runner", Transports: []wire.Transport{wire.TransportRemote, wire.TransportInProcess}}
	// Subprocess is the subprocess-runner: the agent CLIs, each a child
	// process.
	Subprocess = Service{Name: "subprocess-runner", Transports: []wire.Transport{wire.TransportSubprocess, wire.TransportInProcess}}
)

// Spec is the configuration of a Service as its main reads it: a Config
// whose Validate checks it for the service's transports (Config.Check).
type Spec struct {
	Config
	transports []wire.Transport // unexported: not read from the environment
}

// Validate names each bad variable, and every adapter named that is not of
// the service's transports.
func (s Spec) Validate() error { return s.Check(s.transports...) }

// NewSpec returns a zero Spec of s, for service.LoadConfig.
func (s Service) NewSpec() *Spec { return &Spec{transports: s.Transports} }

// Run is Run for s.
func (s Service) Run(ctx context.Context, c Config, log *slog.Logger) error {
	return Run(ctx, "agentmesh-"+s.Name, s.Transports, c, log)
}

// Main is the whole of s's main function and returns its exit code
// (service.MainSpec).
func (s Service) Main() int {
	spec := s.NewSpec()
	return service.MainSpec(s.Name, spec, spec.Common(), func(ctx context.Context, log *slog.Logger) error {
		return s.Run(ctx, spec.Config, log)
	})
}
