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

// Profile is one provider profile.
type Profile struct {
	Name      string         `msgpack:"name"`
	Adapter   string         `msgpack:"adapter"`
	Transport wire.Transport `msgpack:"transport"`
	Model     string         `msgpack:"model"`
	Aliases   []string       `msgpack:"aliases"`
	// MaxAttempts is the attempt policy (default wire.DefaultMaxAttempts).
	MaxAttempts int `msgpack:"max_attempts"`
	// Pricing is the rate per token class as exact decimal strings.
	Pricing map[string]string `msgpack:"pricing"`
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
		if p.MaxAttempts == 0 {
			p.MaxAttempts = wire.DefaultMaxAttempts
		}
		switch {
		case p.Name == "" || strings.ContainsAny(p.Name, "/ "):
			errs = append(errs, fmt.Errorf("profile %d: name %q is empty or has '/' or space", i, p.Name))
			continue
		case p.Adapter == "" || p.Model == "":
			errs = append(errs, fmt.Errorf("profile %s: adapter and model are required", p.Name))
			continue
		case !p.Transport.Valid():
			errs = append(errs, fmt.Errorf("profile %s: transport %q is not subprocess, in_process or remote", p.Name, p.Transport))
			continue
		case p.MaxAttempts < 0:
			errs = append(errs, fmt.Errorf("profile %s: max_attempts must be > 0, got %d", p.Name, p.MaxAttempts))
			continue
		}
		if _, dup := r.byName[p.Name]; dup {
			errs = append(errs, fmt.Errorf("profile %s: defined twice", p.Name))
			continue
		}
		r.byName[p.Name] = &p
		for _, a := range p.Aliases {
			if other, dup := r.aliases[a]; dup {
				errs = append(errs, fmt.Errorf("profile %s: alias %q collides with profile %s", p.Name, a, other.Name))
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
