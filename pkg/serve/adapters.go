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
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/codex"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/gemini"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/pi"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/anthropic"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/nlip"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/ollama"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service"
)

// AdapterConfig configures the profiles and adapters a process can host.
// Embed it in a service's Config.
type AdapterConfig struct {
	// ProfilesDir holds the profile documents (profiles/SCHEMA.md).
	ProfilesDir string `split_words:"true" default:"profiles" desc:"directory of the profile documents (*.yaml)"`
	// FixtureDir is where the fixture adapter reads its scripts.
	FixtureDir string `split_words:"true" default:"testdata/fixture" desc:"directory of the fixture adapter's scripts"`
	// WorkspaceRoot contains every subprocess run's workspace.
	WorkspaceRoot string `split_words:"true" default:"." desc:"directory that contains every CLI run's workspace"`
	// StateDir is where the CLI adapters record their runs' process
	// groups (proc.Spec.StateDir). A runner sets it from
	// AGENTMESH_RUNNER_STATE_DIR; empty records nothing.
	StateDir string `ignored:"true"`
}

// builders make each known adapter from the configuration and the profile
// that names it (nil when a process hosts an adapter no profile names).
var builders = map[string]func(AdapterConfig, *profile.Profile) (adapter.Adapter, error){
	fixture.DefaultName: func(c AdapterConfig, _ *profile.Profile) (adapter.Adapter, error) {
		return fixture.New(fixture.Config{ScriptsDir: c.FixtureDir})
	},
	claudecode.Name: func(c AdapterConfig, p *profile.Profile) (adapter.Adapter, error) {
		return claudecode.New(c.cliConfig(claudecode.DefaultConfig(), p))
	},
	codex.Name: func(c AdapterConfig, p *profile.Profile) (adapter.Adapter, error) {
		return codex.New(c.cliConfig(codex.DefaultConfig(), p))
	},
	gemini.Name: func(c AdapterConfig, p *profile.Profile) (adapter.Adapter, error) {
		return gemini.New(c.cliConfig(gemini.DefaultConfig(), p))
	},
	pi.Name: func(c AdapterConfig, p *profile.Profile) (adapter.Adapter, error) {
		return pi.New(c.cliConfig(pi.DefaultConfig(), p))
	},
	openai.Name: remoteBuilder(openai.Name, openai.Declaration(), func(cfg remote.Config, p *profile.Profile) (adapter.Adapter, error) {
		var opts openai.Options
		if p.OmitTemperature {
			opts.NoTemperatureModels = []string{p.Model}
		}
		return openai.New(cfg, opts)
	}),
	anthropic.Name: remoteBuilder(anthropic.Name, anthropic.Declaration(), func(cfg remote.Config, _ *profile.Profile) (adapter.Adapter, error) {
		return anthropic.New(cfg)
	}),
	ollama.Name: remoteBuilder(ollama.Name, ollama.Declaration(), func(cfg remote.Config, _ *profile.Profile) (adapter.Adapter, error) {
		return ollama.New(cfg)
	}),
	nlip.Name: remoteBuilder(nlip.Name, nlip.Declaration(), func(cfg remote.Config, _ *profile.Profile) (adapter.Adapter, error) {
		return nlip.New(cfg)
	}),
}

// remoteBuilder builds a remote adapter from its profile: base URL,
// loopback permission and the credential read from the profile's
// credential_env. A profile whose credential variable is unset becomes
// the closed Unavailable adapter, making the real adapter's declaration
// decl: choosing it fails with ProviderUnavailable, and nothing else breaks.
func remoteBuilder(name string, decl remote.Declaration, build func(remote.Config, *profile.Profile) (adapter.Adapter, error)) func(AdapterConfig, *profile.Profile) (adapter.Adapter, error) {
	return func(_ AdapterConfig, p *profile.Profile) (adapter.Adapter, error) {
		if p == nil {
			return nil, fmt.Errorf("adapter %s needs a profile with base_url", name)
		}
		cfg := remote.Config{BaseURL: p.BaseURL, AllowLoopback: p.AllowLoopback}
		if p.CredentialEnv != "" {
			cred, ok := secret.FromEnv(p.CredentialEnv)
			if !ok {
				if err := cfg.Check(); err != nil {
					return nil, err
				}
				return remote.Unavailable(name, decl, p.CredentialEnv), nil
			}
			cfg.Credential = cred
		}
		return build(cfg, p)
	}
}

// cliConfig is a CLI adapter's configuration: the adapter's defaults, then
// what the operator's profile says (binary, install hint, the child's
// environment), then the workspace root.
func (c AdapterConfig) cliConfig(cfg cli.Config, p *profile.Profile) cli.Config {
	if p != nil {
		if p.Binary != "" {
			cfg.Binary = p.Binary
		}
		if p.InstallHint != "" {
			cfg.InstallHint = p.InstallHint
		}
		if p.EnvAllow != nil {
			cfg.EnvAllow = slices.Clone(p.EnvAllow)
		}
		set := maps.Clone(cfg.EnvSet)
		if set == nil {
			set = map[string]string{}
		}
		maps.Copy(set, p.Env)
		cfg.EnvSet = set
	}
	cfg.WorkspaceRoot = c.WorkspaceRoot
	cfg.StateDir = c.StateDir
	return cfg
}

// KnownAdapters returns the names of the adapters this build can host,
// sorted.
func KnownAdapters() []string {
	return slices.Sorted(maps.Keys(builders))
}

// Profiles loads the profile documents of ProfilesDir strictly.
func (c AdapterConfig) Profiles() (*profile.Registry, error) {
	return profile.Load(c.ProfilesDir)
}

// Registry builds the named adapters, or the adapter of every profile when
// names is empty. Every profile of a hosted adapter gets its own instance,
// built from that profile's settings (base URL, credential, binary,
// environment), which runs that profile's work (adapter.Registry.ForWork);
// the adapter's own instance (Get), which declares its capabilities and
// validates requests, is the one of its first profile by name, or one
// built without a profile when none names the adapter. An unknown name is
// an error listing the known ones.
//
// Every profile is then checked against its own instance
// (profile.CheckAdapters: capabilities, transport, pricing of every
// reported token class, priced context), also the profiles of adapters
// this process does not host, whose instances are built for the check
// only; so every process that reads the profiles fails at startup on the
// same problems, naming the file and field of each. Building an adapter
// starts nothing.
func (c AdapterConfig) Registry(profiles *profile.Registry, names ...string) (*adapter.Registry, error) {
	byAdapter := map[string][]*profile.Profile{}
	for _, p := range profiles.All() { // sorted by name
		byAdapter[p.Adapter] = append(byAdapter[p.Adapter], p)
	}
	named := slices.Sorted(maps.Keys(byAdapter))
	if len(names) == 0 {
		// A profile of an unknown adapter is CheckAdapters' to name.
		names = slices.DeleteFunc(slices.Clone(named), func(n string) bool { _, ok := builders[n]; return !ok })
	}
	reg, err := adapter.NewRegistry()
	if err != nil {
		return nil, err
	}
	checked, err := adapter.NewRegistry()
	if err != nil {
		return nil, err
	}
	// add builds adapter n's instances (its own, then one per profile) into
	// the registries given.
	add := func(n string, into ...*adapter.Registry) error {
		var instances []adapter.Adapter
		ps := byAdapter[n]
		if len(ps) == 0 {
			a, err := builders[n](c, nil)
			if err != nil {
				return fmt.Errorf("adapter %s: %w", n, err)
			}
			instances = append(instances, a)
		}
		for _, p := range ps {
			a, err := builders[n](c, p)
			if err != nil {
				return fmt.Errorf("adapter %s: profile %s: %w", n, p.Name, err)
			}
			instances = append(instances, a)
		}
		for _, r := range into {
			if err := r.Add(instances[0]); err != nil {
				return err
			}
			for i, p := range ps {
				if err := r.AddProfile(p.Name, instances[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, n := range names {
		if _, ok := builders[n]; !ok {
			return nil, fmt.Errorf("unknown adapter %q (known: %s)", n, strings.Join(KnownAdapters(), ", "))
		}
		if err := add(n, reg, checked); err != nil {
			return nil, err
		}
	}
	for _, n := range named {
		if _, hosted := reg.Get(n); hosted {
			continue
		}
		if _, ok := builders[n]; !ok {
			continue // CheckAdapters names each profile of an unknown adapter
		}
		if err := add(n, checked); err != nil {
			return nil, err
		}
	}
	if err := profile.CheckAdapters(profiles, checked); err != nil {
		return nil, err
	}
	return reg, nil
}

// MaxActive is the runs each adapter may execute at once in one runner:
// the profile's policy.max_active, overridden by explicit per-adapter values.
func MaxActive(profiles *profile.Registry, explicit map[string]int) map[string]int {
	out := map[string]int{}
	for _, p := range profiles.All() {
		if _, ok := out[p.Adapter]; !ok {
			out[p.Adapter] = p.Policy.MaxActive
		}
	}
	maps.Copy(out, explicit)
	return out
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
	RunnerStateDir         string         `split_words:"true" desc:"host-local directory of the CLI runs' process-group records, which the next runner on the host reaps should this one die (default: <user cache dir>/agentmesh/process-groups)"`
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

// Runner is the runner host configuration c describes, with the profiles'
// admission policy where RUNNER_MAX_ACTIVE names no value.
func (c RunnerConfig) Runner(profiles *profile.Registry) runner.Config {
	return runner.Config{
		ID:               c.RunnerID,
		MaxActive:        MaxActive(profiles, c.RunnerMaxActive),
		DefaultMaxActive: c.RunnerDefaultMaxActive,
		AckWait:          c.RunnerAckWait,
		DrainTimeout:     c.RunnerDrainTimeout,
		Metadata:         map[string]string{"registry_version": profiles.Version()},
	}
}

// RunRunner is the run function of a runner service: it builds the adapters
// of rc, starts the infrastructure as client name, and runs a runner host
// until ctx ends, then shuts down in reverse order.
func RunRunner(ctx context.Context, name string, common service.Config, rc RunnerConfig, log *slog.Logger) (err error) {
	profiles, err := rc.Profiles()
	if err != nil {
		return err
	}
	if rc.StateDir, err = ReapProcessGroups(rc.RunnerStateDir, log); err != nil {
		return err
	}
	adapters, err := rc.Registry(profiles, rc.RunnerAdapters...)
	if err != nil {
		return err
	}
	infra, err := Start(ctx, name, common, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, infra.Close()) }()
	host, err := runner.New(ctx, infra.Deps, adapters, rc.Runner(profiles))
	if err != nil {
		return err
	}
	log.Info("runner started", "runner_id", host.ID(), "registry_version", profiles.Version(), "adapters", adapters.Names(), "nats", service.ConnectedURL(infra.Deps.NC), "http", infra.HTTPAddr())
	return host.Run(ctx)
}

// ReapProcessGroups ends the CLI process groups that dead runners on this
// host recorded in dir (default proc.DefaultStateDir()), logging each, and
// returns the directory, for AdapterConfig.StateDir. A runner calls it
// before it takes work. A directory that cannot be used is an ErrConfig
// naming AGENTMESH_RUNNER_STATE_DIR; a record that cannot be read is
// logged and skipped.
func ReapProcessGroups(dir string, log *slog.Logger) (string, error) {
	if dir == "" {
		dir = proc.DefaultStateDir()
	}
	reaped, err := proc.Reap(dir)
	if errors.Is(err, proc.ErrStateDir) {
		return "", fmt.Errorf("%w: AGENTMESH_RUNNER_STATE_DIR: %v", ErrConfig, err)
	}
	if err != nil {
		log.Warn("reap process groups", "state_dir", dir, "err", err)
	}
	for _, r := range reaped {
		log.Warn("ended a process group a dead runner left", "state_dir", dir, "pgid", r.PGID, "binary", r.Binary, "runner_pid", r.Owner, "still_running", r.Left)
	}
	return dir, nil
}
