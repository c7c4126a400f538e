// Package catalog provides every adapter this build has, and builds them
// from profiles: Names and Transport say which adapters there are and how
// each reaches its provider, and Dirs.Registry builds the instances a
// process hosts, one for each profile, checking every profile against its
// adapter. The services, agentmesh up and the tests build their adapters
// here; the router and the runner take the registry it returns.
package catalog

import (
	"cmp"
	"errors"
	"fmt"
	acpsdk "github.com/coder/acp-go-sdk"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/acp"
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
	"github.com/agentmesh/agentmesh/pkg/sandbox"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Dirs are the directories the adapters of a process read besides
// their profiles. Embed it in a service's environment configuration.
type Dirs struct {
	// ProfilesDir holds the profile documents (profiles/SCHEMA.md).
	ProfilesDir string `split_words:"true" default:"profiles" desc:"directory of the profile documents (*.yaml)"`
	// FixtureDir is where the fixture adapter reads its scripts.
	FixtureDir string `split_words:"true" default:"testdata/fixture" desc:"directory of the fixture adapter's scripts"`
	// WorkspaceRoot contains every subprocess run's workspace.
	WorkspaceRoot string `split_words:"true" default:"." desc:"directory that contains every CLI run's workspace"`
	// StateDir is where the CLI adapters record their runs' process
	// groups (proc.Spec.StateDir), as ReapProcessGroups returns it; empty
	// records nothing.
	StateDir string `ignored:"true"`
	// Sandbox, if set, confines every CLI run (pkg/sandbox) to the
	// policy its profile and adapter give; nil runs the CLIs unconfined.
	Sandbox *sandbox.Config `ignored:"true"`
}

// entry is one adapter of this build: the transport its capabilities
// declare, and how to build it from the configuration and the profile that
// names it (nil when a process hosts an adapter no profile names).
type entry struct {
	transport wire.Transport
	build     func(Dirs, *profile.Profile) (adapter.Adapter, error)
	// binary is a subprocess adapter's executable when its profile
	// names none.
	binary string
}

// entries are every adapter this build has, by name.
var entries = map[string]entry{
	fixture.DefaultName: {transport: wire.TransportInProcess, build: func(c Dirs, _ *profile.Profile) (adapter.Adapter, error) {
		return fixture.New(fixture.Config{ScriptsDir: c.FixtureDir})
	}},
	claudecode.Name: cliEntry(claudecode.DefaultConfig, claudecode.New),
	codex.Name:      cliEntry(codex.DefaultConfig, codex.New),
	gemini.Name:     cliEntry(gemini.DefaultConfig, gemini.New),
	pi.Name:         cliEntry(pi.DefaultConfig, pi.New),
	acp.Name:        {wire.TransportSubprocess, acpAdapter, acp.DefaultConfig().Binary},
	openai.Name: remoteEntry(openai.Name, openai.Declaration(), func(cfg remote.Config, p *profile.Profile) (adapter.Adapter, error) {
		var opts openai.Options
		if p.OmitTemperature {
			opts.NoTemperatureModels = []string{p.Model}
		}
		return openai.New(cfg, opts)
	}),
	anthropic.Name: remoteEntry(anthropic.Name, anthropic.Declaration(), func(cfg remote.Config, _ *profile.Profile) (adapter.Adapter, error) {
		return anthropic.New(cfg)
	}),
	ollama.Name: remoteEntry(ollama.Name, ollama.Declaration(), func(cfg remote.Config, _ *profile.Profile) (adapter.Adapter, error) {
		return ollama.New(cfg)
	}),
	nlip.Name: remoteEntry(nlip.Name, nlip.Declaration(), func(cfg remote.Config, _ *profile.Profile) (adapter.Adapter, error) {
		return nlip.New(cfg)
	}),
}

// remoteEntry builds a remote adapter from its profile: base URL,
// loopback permission and the credential read from the profile's
// credential_env. A profile whose credential variable is unset becomes
// the closed Unavailable adapter, making the real adapter's declaration
// decl: choosing it fails with ProviderUnavailable, and nothing else breaks.
func remoteEntry(name string, decl remote.Declaration, build func(remote.Config, *profile.Profile) (adapter.Adapter, error)) entry {
	return entry{wire.TransportRemote, func(_ Dirs, p *profile.Profile) (adapter.Adapter, error) {
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
	}, ""}
}

// cliConfig is a CLI adapter's configuration: the adapter's defaults, then
// what the operator's profile says (binary, install hint, the child's
// environment, its egress), then the workspace root, and the sandbox.
func (c Dirs) cliConfig(cfg cli.Config, p *profile.Profile) (cli.Config, error) {
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
		cfg.CredentialFiles = slices.Clone(p.CredentialFiles)
		cfg.UnreachableAfter = p.UnreachableAfter()
	}
	cfg.WorkspaceRoot = c.WorkspaceRoot
	cfg.StateDir = c.StateDir
	if c.Sandbox == nil {
		return cfg, nil
	}
	pol, err := cfg.SandboxPolicy()
	if err != nil {
		return cfg, err
	}
	if p != nil && p.Network == profile.NetworkNone {
		// No network: no key either.
		cfg = cfg.WithoutKeys()
		pol.Egress, pol.Keyed = nil, nil
	} else if p != nil && len(p.Egress) > 0 {
		pol.Egress = slices.Clone(p.Egress)
		if err := keyedInEgress(pol); err != nil {
			return cfg, err
		}
	}
	s, err := sandbox.New(*c.Sandbox, pol)
	if err != nil {
		return cfg, err
	}
	cfg.Confine = s
	return cfg, nil
}

// keyedInEgress checks that a profile's egress, which names the only
// endpoints its runs may reach, lists the API of each key the runner
// holds for them.
func keyedInEgress(pol sandbox.Policy) error {
	allowed, err := sandbox.ParseEgress(pol.Egress)
	if err != nil {
		return err
	}
	for _, k := range pol.Keyed {
		e, err := sandbox.EgressOf(k.URL)
		if err != nil {
			return fmt.Errorf("%s: %v", k.KeyVar, err)
		}
		ep, err := sandbox.ParseEgress([]string{e})
		if err != nil {
			return fmt.Errorf("%s: %v", k.KeyVar, err)
		}
		if !slices.Contains(allowed, ep[0]) {
			return fmt.Errorf("the runner holds %s's key for its API at %s, which egress does not list: list it, or leave %s out of env_allow and env (profiles/SCHEMA.md)",
				k.KeyVar, ep[0], k.KeyVar)
		}
	}
	return nil
}

// Names returns the names of the adapters this build has whose transport
// is one of transports, or of every adapter when there are none, sorted.
func Names(transports ...wire.Transport) []string {
	var names []string
	for n, e := range entries {
		if len(transports) == 0 || slices.Contains(transports, e.transport) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Transport is the transport adapter name's capabilities declare, and
// false for an adapter this build does not have.
func Transport(name string) (wire.Transport, bool) {
	e, ok := entries[name]
	return e.transport, ok
}

// Profiles loads the profile documents of ProfilesDir strictly.
func (c Dirs) Profiles() (*profile.Registry, error) {
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
func (c Dirs) Registry(profiles *profile.Registry, names ...string) (*adapter.Registry, error) {
	byAdapter := map[string][]*profile.Profile{}
	for _, p := range profiles.All() { // sorted by name
		byAdapter[p.Adapter] = append(byAdapter[p.Adapter], p)
	}
	named := slices.Sorted(maps.Keys(byAdapter))
	if len(names) == 0 {
		// A profile of an unknown adapter is CheckAdapters' to name.
		names = slices.DeleteFunc(slices.Clone(named), func(n string) bool { _, ok := entries[n]; return !ok })
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
			a, err := entries[n].build(c, nil)
			if err != nil {
				return fmt.Errorf("adapter %s: %w", n, err)
			}
			instances = append(instances, a)
		}
		for _, p := range ps {
			a, err := entries[n].build(c, p)
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
		if _, ok := entries[n]; !ok {
			return nil, fmt.Errorf("unknown adapter %q (known: %s)", n, strings.Join(Names(), ", "))
		}
		if err := add(n, reg, checked); err != nil {
			return nil, err
		}
	}
	for _, n := range named {
		if _, hosted := reg.Get(n); hosted {
			continue
		}
		if _, ok := entries[n]; !ok {
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
// the sum of its profiles' policy.max_active, so that each profile has
// its own (ProfileMaxActive), overridden by explicit per-adapter values
// (AGENTMESH_RUNNER_MAX_ACTIVE), which bound all its profiles together.
func MaxActive(profiles *profile.Registry, explicit map[string]int) map[string]int {
	out := map[string]int{}
	for _, p := range profiles.All() {
		out[p.Adapter] += p.Policy.MaxActive
	}
	maps.Copy(out, explicit)
	return out
}

// ProfileMaxActive is the runs each profile may execute at once in one
// runner: its policy.max_active.
func ProfileMaxActive(profiles *profile.Registry) map[string]int {
	out := map[string]int{}
	for _, p := range profiles.All() {
		out[p.Name] = p.Policy.MaxActive
	}
	return out
}

// ReapProcessGroups ends the CLI process groups that dead runners on this
// host recorded in dir (default proc.DefaultStateDir()), logging each, and
// returns the directory, for Dirs.StateDir. A runner calls it before it
// takes work. A directory that cannot be used is an error matching
// proc.ErrStateDir; a record that cannot be read is logged and skipped.
func ReapProcessGroups(dir string, log *slog.Logger) (string, error) {
	if dir == "" {
		dir = proc.DefaultStateDir()
	}
	reaped, err := proc.Reap(dir)
	if errors.Is(err, proc.ErrStateDir) {
		return "", err
	}
	if err != nil {
		log.Warn("reap process groups", "state_dir", dir, "err", err)
	}
	for _, r := range reaped {
		log.Warn("ended a process group a dead runner left", "state_dir", dir, "pgid", r.PGID, "binary", r.Binary, "runner_pid", r.Owner, "still_running", r.Left)
	}
	return dir, nil
}

// cliEntry builds a CLI adapter from the package's DefaultConfig and New,
// configured by cliConfig.
// acpAdapter builds an ACP agent from its profile: the process as a CLI's
// (binary, environment, sandbox), its args, and its session settings,
// the MCP allowlist turned into ACP's server definitions. Without a
// profile it is an agent named acp on PATH, for the declaration only.
func acpAdapter(c Dirs, p *profile.Profile) (adapter.Adapter, error) {
	cfg, err := c.cliConfig(acp.DefaultConfig(), p)
	if err != nil {
		return nil, err
	}
	ac := acp.Config{Config: cfg}
	if p != nil {
		ac.Args = p.Args
		if ss := p.Session; ss != nil {
			ac.Policy, ac.PermissionTimeout, ac.IdleTimeout = ss.PermissionPolicy, ss.PermissionTimeout, ss.IdleTimeout
			ac.SuspendAfter, ac.SuspendedTimeout = ss.SuspendAfter, ss.SuspendedTimeout
			ac.MCPServers = map[string]acpsdk.McpServer{}
			for name, m := range ss.MCPServers {
				ac.MCPServers[name] = mcpServer(name, m)
			}
		}
	}
	return acp.New(ac)
}

// mcpServer is a profile's MCP server as session/new takes it.
func mcpServer(name string, m profile.MCPServer) acpsdk.McpServer {
	switch {
	case m.Command != "":
		env := []acpsdk.EnvVariable{}
		for _, k := range slices.Sorted(maps.Keys(m.Env)) {
			env = append(env, acpsdk.EnvVariable{Name: k, Value: m.Env[k]})
		}
		return acpsdk.McpServer{Stdio: &acpsdk.McpServerStdio{Name: name, Command: m.Command, Args: append([]string{}, m.Args...), Env: env}}
	case m.Type == "sse":
		return acpsdk.McpServer{Sse: &acpsdk.McpServerSseInline{Name: name, Url: m.URL, Headers: headers(m.Headers), Type: "sse"}}
	}
	return acpsdk.McpServer{Http: &acpsdk.McpServerHttpInline{Name: name, Url: m.URL, Headers: headers(m.Headers), Type: "http"}}
}

func headers(h map[string]string) []acpsdk.HttpHeader {
	out := []acpsdk.HttpHeader{}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		out = append(out, acpsdk.HttpHeader{Name: k, Value: h[k]})
	}
	return out
}

func cliEntry[R any](defaults func() cli.Config, build func(cli.Config) (*cli.Adapter[R], error)) entry {
	return entry{wire.TransportSubprocess, func(c Dirs, p *profile.Profile) (adapter.Adapter, error) {
		cfg, err := c.cliConfig(defaults(), p)
		if err != nil {
			return nil, err
		}
		return build(cfg)
	}, defaults().Binary}
}

// Binary is the executable a runner starts for profile p: its binary,
// else its subprocess adapter's default; "" for a profile of another
// transport (or an adapter this build lacks).
func Binary(p *profile.Profile) string {
	e, ok := entries[p.Adapter]
	if !ok || e.transport != wire.TransportSubprocess {
		return ""
	}
	return cmp.Or(p.Binary, e.binary)
}
