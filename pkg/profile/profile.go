// Package profile provides the provider profiles (profiles/SCHEMA.md): it
// loads profiles/*.yaml strictly, checks them against the adapters that
// serve them, and resolves what a client names in a run request (a profile
// name, an alias, or provider/model) into one adapter, one model and a pin.
//
// A profile is hashed over its typed canonical form, and the registry
// version derived from all of them, as the seed describes.
package profile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Profile is one provider profile: one document of profiles/*.yaml (the
// schema is profiles/SCHEMA.md). Its hash is taken over this typed form, so
// formatting, comments and key order in the file never change it.
type Profile struct {
	// Schema is the document's schema version (1).
	Schema    int            `yaml:"schema" msgpack:"schema"`
	Name      string         `yaml:"name" msgpack:"name"`
	Adapter   string         `yaml:"adapter" msgpack:"adapter"`
	Transport wire.Transport `yaml:"transport" msgpack:"transport"`
	Model     string         `yaml:"model" msgpack:"model"`
	Aliases   []string       `yaml:"aliases,omitempty" msgpack:"aliases"`
	// ContextWindow is the largest context the profile advertises.
	ContextWindow int `yaml:"context_window,omitempty" msgpack:"context_window"`
	// Pricing is the rate per token class, in USD per million tokens, as
	// exact decimal strings.
	Pricing map[string]string `yaml:"pricing,omitempty" msgpack:"pricing"`
	// Capabilities, when set, restates the adapter's declaration; it must
	// equal it exactly (CheckAdapters). Absent, the adapter's stands.
	Capabilities *Capabilities `yaml:"capabilities,omitempty" msgpack:"capabilities,omitempty"`

	// Subprocess profiles: the CLI and what its child process may see.
	Binary      string            `yaml:"binary,omitempty" msgpack:"binary"`
	InstallHint string            `yaml:"install_hint,omitempty" msgpack:"install_hint"`
	EnvAllow    []string          `yaml:"env_allow,omitempty" msgpack:"env_allow"`
	Env         map[string]string `yaml:"env,omitempty" msgpack:"env"`
	// Egress, when set, are the only endpoints (host:port) a sandboxed
	// run may reach, in place of the adapter's model API host; Network
	// "none" cuts a sandboxed run off the network.
	Egress  []string `yaml:"egress,omitempty" msgpack:"egress,omitempty"`
	Network string   `yaml:"network,omitempty" msgpack:"network,omitempty"`
	// CredentialFiles are files (a CLI's subscription login, such as
	// Claude Code's .credentials.json) bound read-only into every
	// sandboxed run at their own paths; none unless the profile names
	// them.
	CredentialFiles []string `yaml:"credential_files,omitempty" msgpack:"credential_files,omitempty"`

	// Remote profiles.
	BaseURL       string `yaml:"base_url,omitempty" msgpack:"base_url"`
	AllowLoopback bool   `yaml:"allow_loopback,omitempty" msgpack:"allow_loopback"`
	CredentialEnv string `yaml:"credential_env,omitempty" msgpack:"credential_env"`
	// OmitTemperature: the model rejects the temperature sampling
	// parameter, so the adapter leaves it out (docs/contract.md §10.13).
	OmitTemperature bool `yaml:"omit_temperature,omitempty" msgpack:"omit_temperature"`

	Policy Policy `yaml:"policy,omitempty" msgpack:"policy"`

	// Args follow the binary of an adapter that takes them from its
	// profile (acp: an ACP agent's command line, say --acp).
	Args []string `yaml:"args,omitempty" msgpack:"args,omitempty"`
	// Session sets an interactive adapter's sessions (docs/contract.md
	// §6.1): permission policy and timeout, idle timeout, MCP allowlist.
	Session *Session `yaml:"session,omitempty" msgpack:"session,omitempty"`

	// MaxAttempts is Policy.MaxAttempts, kept for profiles built in code.
	MaxAttempts int `yaml:"-" msgpack:"-"`

	file  string          // where it was loaded from, for errors
	given map[string]bool // the field paths its document gives (LoadFile)
}

// Capabilities is a profile's statement of its adapter's capability
// declaration (wire.Capabilities without the transport, which the profile
// states on its own). A field left out of the document is false, or empty.
// Session is a profile's session settings (docs/contract.md §6.1).
type Session struct {
	// PermissionPolicy decides the agent's permission requests: ask (a
	// permission_requested event a client answers), allow_read_only
	// (allow the tool kinds read, search, fetch and think, deny the rest)
	// or deny. Default ask.
	PermissionPolicy string `yaml:"permission_policy,omitempty" msgpack:"permission_policy,omitempty"`
	// PermissionTimeout is how long an asked request waits for an answer
	// before it is denied (default 60s, at least 1s).
	PermissionTimeout time.Duration `yaml:"permission_timeout,omitempty" msgpack:"permission_timeout,omitempty"`
	// IdleTimeout ends a session that waited this long for its next
	// prompt (default 10m, at least 1s).
	IdleTimeout time.Duration `yaml:"idle_timeout,omitempty" msgpack:"idle_timeout,omitempty"`
	// SuspendAfter is the grace of a session that can be suspended (its
	// agent loads sessions, and the run is on a conversation): waiting
	// this long for its next prompt, it gives its slot back, its agent
	// ends and its run ends succeeded; the next run on its conversation
	// loads it on any runner (default 30s, at least 1s, at most
	// IdleTimeout in effect).
	SuspendAfter time.Duration `yaml:"suspend_after,omitempty" msgpack:"suspend_after,omitempty"`
	// SuspendedTimeout is the idle timeout of a suspended session: a run
	// on its conversation this long after its last turn ended does not
	// load it and fails SessionEnded (default 24h, at least 1s).
	SuspendedTimeout time.Duration `yaml:"suspended_timeout,omitempty" msgpack:"suspended_timeout,omitempty"`
	// MCPServers is the operator's allowlist: the MCP servers a request
	// may name, by name, for its session's session/new.
	MCPServers map[string]MCPServer `yaml:"mcp_servers,omitempty" msgpack:"mcp_servers,omitempty"`
}

// MCPServer is one MCP server of a profile's allowlist: a command the
// agent starts (stdio), or a URL it reaches (type http or sse).
type MCPServer struct {
	Command string            `yaml:"command,omitempty" msgpack:"command,omitempty"`
	Args    []string          `yaml:"args,omitempty" msgpack:"args,omitempty"`
	Env     map[string]string `yaml:"env,omitempty" msgpack:"env,omitempty"`
	Type    string            `yaml:"type,omitempty" msgpack:"type,omitempty"`
	URL     string            `yaml:"url,omitempty" msgpack:"url,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty" msgpack:"headers,omitempty"`
}

// The permission policies of Session.PermissionPolicy.
const (
	PermissionAsk           = "ask"
	PermissionAllowReadOnly = "allow_read_only"
	PermissionDeny          = "deny"
)

// The session defaults and least values.
const (
	DefaultPermissionTimeout = 60 * time.Second
	DefaultIdleTimeout       = 10 * time.Minute
	DefaultSuspendAfter      = 30 * time.Second
	DefaultSuspendedTimeout  = 24 * time.Hour
	MinSessionTimeout        = time.Second
)

type Capabilities struct {
	Resumable       bool   `yaml:"resumable" msgpack:"resumable"`
	ResumeField     string `yaml:"resume_field,omitempty" msgpack:"resume_field"`
	EmitsToolEvents bool   `yaml:"emits_tool_events" msgpack:"emits_tool_events"`
	ReportsUsage    bool   `yaml:"reports_usage" msgpack:"reports_usage"`
}

// Policy is a profile's admission and attempt policy.
type Policy struct {
	// MaxAttempts bounds a run's attempts (default wire.DefaultMaxAttempts).
	MaxAttempts int `yaml:"max_attempts,omitempty" msgpack:"max_attempts"`
	// MaxActive is the runs one runner process executes at once (default 1).
	MaxActive int `yaml:"max_active,omitempty" msgpack:"max_active"`
	// MaxWaiting bounds the adapter's queue: work dispatched and not yet
	// past its first output. A full queue rejects at once with
	// AdmissionRejected. 0: only AGENTMESH_WORK_QUEUE_MAX bounds it.
	MaxWaiting int `yaml:"max_waiting,omitempty" msgpack:"max_waiting"`
	// StallAfter ends a run whose transport has produced nothing for that
	// long with ProviderStallError, tearing the transport down (0 or
	// absent: DefaultStallAfter for a subprocess profile, none otherwise).
	StallAfter time.Duration `yaml:"stall_after,omitempty" msgpack:"stall_after,omitempty"`
	// UnreachableAfter ends a subprocess run whose agent has reported
	// only that it cannot reach its model API (its reconnect notices, as
	// system chunks) for that long, with ProviderTransportError (0 or
	// absent: DefaultUnreachableAfter).
	UnreachableAfter time.Duration `yaml:"unreachable_after,omitempty" msgpack:"unreachable_after,omitempty"`
	// Fallback names the profiles, in order, a run of this profile moves
	// to when it fails before its first output with an unavailable, auth,
	// quota or exhausted retryable error (docs/contract.md §4.13). They
	// must exist and not include the profile itself; a fallback profile's
	// own list is not followed.
	Fallback []string `yaml:"fallback,omitempty" msgpack:"fallback,omitempty"`
}

// DefaultStallAfter is a subprocess profile's stall_after when it names
// none: real agent CLIs are known to hang mid-stream without ever printing
// their result, while a long tool call (a test suite, a build) may print
// nothing for minutes.
const DefaultStallAfter = 10 * time.Minute

// MinStallAfter is the shortest stall_after a profile may name.
const MinStallAfter = 100 * time.Millisecond

// StallAfter is how long a run of p may produce nothing before it ends
// with ProviderStallError; 0 means never.
func (p *Profile) StallAfter() time.Duration {
	if p.Policy.StallAfter > 0 {
		return p.Policy.StallAfter
	}
	if p.Transport == wire.TransportSubprocess {
		return DefaultStallAfter
	}
	return 0
}

// DefaultUnreachableAfter is a subprocess profile's unreachable_after
// when it names none: long enough for a model API's brief outage and a
// CLI's own backoff, short of a run sitting running until its deadline.
const DefaultUnreachableAfter = 2 * time.Minute

// UnreachableAfter is how long a subprocess run of p may report only
// that its agent cannot reach its model API before it ends.
func (p *Profile) UnreachableAfter() time.Duration {
	if p.Policy.UnreachableAfter > 0 {
		return p.Policy.UnreachableAfter
	}
	return DefaultUnreachableAfter
}

// ErrUnknown is returned by Resolve for a name that matches no profile.
var ErrUnknown = errors.New("unknown profile")

// Registry is an immutable set of profiles; safe for concurrent use.
type Registry struct {
	byName  map[string]*Profile
	aliases map[string]*Profile
	hashes  map[string]string
	all     string
}

// New validates and indexes profiles: each on its own (as Load does), then
// across them: names, aliases, adapter+model identities and fallback
// targets must not collide or dangle. Every problem is reported, joined;
// each matches ErrInvalid and names the file (or, for a profile built in
// code, the profile) and the field.
func New(profiles ...Profile) (*Registry, error) {
	r := &Registry{byName: map[string]*Profile{}, aliases: map[string]*Profile{}, hashes: map[string]string{}}
	var errs []error
	bad := func(p *Profile, field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s: %s", ErrInvalid, p.where(), field, fmt.Sprintf(format, args...)))
	}
	type identity struct{ adapter, model string }
	byIdentity := map[identity]*Profile{}
	for i := range profiles {
		p := new(Profile)
		*p = profiles[i] // the caller's slice stays as it was
		// A field left out takes its default; one a document gives as 0
		// is refused by check, naming the file and the field (docs/contract.md §4.5:
		// a policy number <= 0 is a validation error).
		if p.Policy.MaxAttempts == 0 && !p.given["policy.max_attempts"] {
			p.Policy.MaxAttempts = p.MaxAttempts
			if p.Policy.MaxAttempts == 0 {
				p.Policy.MaxAttempts = wire.DefaultMaxAttempts
			}
		}
		if p.Policy.MaxActive == 0 && !p.given["policy.max_active"] {
			p.Policy.MaxActive = 1
		}
		p.MaxAttempts = p.Policy.MaxAttempts
		if p.Schema == 0 && !p.given["schema"] {
			p.Schema = SchemaVersion
		}
		if perrs := p.check(p.where()); len(perrs) > 0 {
			errs = append(errs, perrs...)
			continue
		}
		if other, dup := r.byName[p.Name]; dup {
			bad(p, "name", "profile %s is also defined in %s", p.Name, other.where())
			continue
		}
		// A pin names only provider and model (docs/contract.md §10.1), so two
		// profiles offering one model on one adapter would make it
		// ambiguous which profile a pin holds.
		id := identity{p.Adapter, p.Model}
		if other, dup := byIdentity[id]; dup {
			bad(p, "model", "adapter %s model %s is also offered by profile %s (%s); a pin names only provider and model, so each may be offered once",
				p.Adapter, p.Model, other.Name, other.where())
		} else {
			byIdentity[id] = p
		}
		r.byName[p.Name] = p
		for _, a := range p.Aliases {
			if other, dup := r.aliases[a]; dup {
				bad(p, "aliases", "%q collides with profile %s (%s)", a, other.Name, other.where())
				continue
			}
			r.aliases[a] = p
		}
	}
	// Aliases and fallback targets refer to names, so they are checked
	// once every profile is indexed.
	for _, n := range r.Names() {
		p := r.byName[n]
		for _, a := range p.Aliases {
			if other, dup := r.byName[a]; dup && other != p && r.aliases[a] == p {
				bad(p, "aliases", "%q is the name of profile %s (%s)", a, other.Name, other.where())
			}
		}
		seen := map[string]bool{}
		for _, f := range p.Policy.Fallback {
			_, exists := r.byName[f]
			switch {
			case f == p.Name:
				bad(p, "policy.fallback", "%q is this profile; a profile cannot fall back to itself", f)
			case seen[f]:
				bad(p, "policy.fallback", "%q is named twice", f)
			case !exists:
				bad(p, "policy.fallback", "%q is not a profile (profiles: %s)", f, strings.Join(r.Names(), ", "))
			}
			seen[f] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, n := range r.Names() {
		b, err := wire.Marshal(r.byName[n])
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		r.hashes[n] = hex.EncodeToString(sum[:])
	}
	h := sha256.New()
	for _, n := range r.Names() {
		fmt.Fprintf(h, "%s=%s\n", n, r.hashes[n])
	}
	r.all = hex.EncodeToString(h.Sum(nil))
	return r, nil
}

// Builtin is the registry of the profiles built into this version: the
// offline fixture profile.
func Builtin() *Registry {
	r, err := New(Profile{
		Name: "fixture", Adapter: "fixture", Transport: wire.TransportInProcess, Model: "fixture-1",
		Pricing: map[string]string{"input": "0", "output": "0"},
	})
	if err != nil {
		panic(err) // programmer error: the built-in profiles are fixed
	}
	return r
}

// Resolve finds the profile for a profile name, an alias or
// "provider/model" and returns it with its pin.
func (r *Registry) Resolve(name string) (*Profile, wire.Pin, error) {
	p, ok := r.byName[name]
	if !ok {
		p, ok = r.aliases[name]
	}
	if !ok {
		if prov, model, cut := strings.Cut(name, "/"); cut {
			for _, c := range r.byName {
				if c.Adapter == prov && c.Model == model {
					p, ok = c, true
					break
				}
			}
		}
	}
	if !ok {
		return nil, wire.Pin{}, fmt.Errorf("%w: %q", ErrUnknown, name)
	}
	pin := wire.Pin{
		Provider:        p.Adapter,
		Model:           p.Model,
		ProfileHash:     r.hashes[p.Name],
		RegistryVersion: p.Name + ":" + r.all,
		Pricing:         p.Pricing,
	}
	return p, pin, nil
}

// ByModel returns the profile that offers model on adapter (New lets only
// one do so), for a pin to be honoured after its alias moved.
func (r *Registry) ByModel(adapter, model string) (*Profile, bool) {
	for _, n := range r.Names() {
		if p := r.byName[n]; p.Adapter == adapter && p.Model == model {
			return p, true
		}
	}
	return nil, false
}

// Names returns the profile names, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.byName))
	for n := range r.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Version is the hash over all profiles.
func (r *Registry) Version() string { return r.all }

// NetworkNone is Profile.Network for a CLI whose sandboxed runs reach no
// network at all.
const NetworkNone = "none"
