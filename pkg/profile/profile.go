// Package profile resolves what a client names in a run request (a profile
// name, an alias, or provider/model) into one adapter, one model and a pin.
//
// This is the in-code registry the core runtime needs: it hashes each
// profile's typed canonical form and derives the registry version as the
// seed describes. Loading profiles/*.yaml strictly is not built yet.
package profile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

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

	// Subprocess profiles: the CLI and what its child process may see.
	Binary      string            `yaml:"binary,omitempty" msgpack:"binary"`
	InstallHint string            `yaml:"install_hint,omitempty" msgpack:"install_hint"`
	EnvAllow    []string          `yaml:"env_allow,omitempty" msgpack:"env_allow"`
	Env         map[string]string `yaml:"env,omitempty" msgpack:"env"`

	// Remote profiles.
	BaseURL       string `yaml:"base_url,omitempty" msgpack:"base_url"`
	AllowLoopback bool   `yaml:"allow_loopback,omitempty" msgpack:"allow_loopback"`
	CredentialEnv string `yaml:"credential_env,omitempty" msgpack:"credential_env"`
	// OmitTemperature: the model rejects the temperature sampling
	// parameter, so the adapter leaves it out (OpenAI decision 13).
	OmitTemperature bool `yaml:"omit_temperature,omitempty" msgpack:"omit_temperature"`

	Policy Policy `yaml:"policy,omitempty" msgpack:"policy"`

	// MaxAttempts is Policy.MaxAttempts, kept for profiles built in code.
	MaxAttempts int `yaml:"-" msgpack:"-"`

	file string // where it was loaded from, for errors
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

// New validates and indexes profiles.
func New(profiles ...Profile) (*Registry, error) {
	r := &Registry{byName: map[string]*Profile{}, aliases: map[string]*Profile{}, hashes: map[string]string{}}
	var errs []error
	for i := range profiles {
		p := profiles[i]
		if p.Policy.MaxAttempts == 0 {
			p.Policy.MaxAttempts = p.MaxAttempts
		}
		if p.Policy.MaxAttempts == 0 {
			p.Policy.MaxAttempts = wire.DefaultMaxAttempts
		}
		if p.Policy.MaxActive == 0 {
			p.Policy.MaxActive = 1
		}
		p.MaxAttempts = p.Policy.MaxAttempts
		if p.Schema == 0 {
			p.Schema = SchemaVersion
		}
		where := "profile " + p.Name
		if p.file != "" {
			where = p.file
		}
		if perrs := p.check(where); len(perrs) > 0 {
			errs = append(errs, perrs...)
			continue
		}
		if other, dup := r.byName[p.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: name: profile %s is also defined in %s", where, p.Name, other.where()))
			continue
		}
		r.byName[p.Name] = &p
		for _, a := range p.Aliases {
			if other, dup := r.aliases[a]; dup {
				errs = append(errs, fmt.Errorf("%s: aliases: %q collides with profile %s (%s)", where, a, other.Name, other.where()))
			} else if other, dup := r.byName[a]; dup && other != &p {
				errs = append(errs, fmt.Errorf("%s: aliases: %q is the name of profile %s", where, a, other.Name))
			}
			r.aliases[a] = &p
		}
		b, err := wire.Marshal(&p)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		r.hashes[p.Name] = hex.EncodeToString(sum[:])
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(r.hashes))
	for n := range r.hashes {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
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

// ByModel returns the profile (the first by name) that offers model on
// adapter, for a pin to be honoured after its alias moved.
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
