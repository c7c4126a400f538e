package profile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"go.yaml.in/yaml/v3"
)

// SchemaVersion is the profile document schema this build reads.
const SchemaVersion = 1

// ErrInvalid is matched by every loading and validation error.
var ErrInvalid = errors.New("invalid profile")

// Load reads every *.yaml file in dir, one profile document each, strictly:
// an unknown field, a wrong type or an invalid value fails with an error
// naming the file, the field and why. All problems are reported together.
func Load(dir string) (*Registry, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("%w: profiles dir %s: %v", ErrInvalid, dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: profiles dir %s has no *.yaml file", ErrInvalid, dir)
	}
	sort.Strings(files)
	var profiles []Profile
	var errs []error
	for _, f := range files {
		p, err := LoadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		profiles = append(profiles, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return New(profiles...)
}

// LoadFile decodes one profile document strictly.
func LoadFile(path string) (Profile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Profile{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return Profile{}, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return Profile{}, fmt.Errorf("%w: %s: one profile document per file", ErrInvalid, path)
	}
	p.file = path
	return p, nil
}

func (p *Profile) where() string {
	if p.file != "" {
		return p.file
	}
	return "profile " + p.Name
}

// check validates one profile on its own; where names it in errors.
func (p *Profile) check(where string) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s: %s", ErrInvalid, where, field, fmt.Sprintf(format, args...)))
	}
	if p.Schema != SchemaVersion {
		bad("schema", "version %d, this build reads %d", p.Schema, SchemaVersion)
	}
	if err := subject.ValidToken("name", p.Name); err != nil {
		bad("name", "%v", err)
	}
	if err := subject.ValidToken("adapter", p.Adapter); err != nil {
		bad("adapter", "%v", err)
	}
	if !p.Transport.Valid() {
		bad("transport", "%q is not subprocess, in_process or remote", p.Transport)
	}
	if p.Model == "" || strings.ContainsAny(p.Model, " \t\n") {
		bad("model", "required, without spaces")
	}
	for _, a := range p.Aliases {
		if a == "" || strings.ContainsAny(a, "/ \t\n") {
			bad("aliases", "%q must be non-empty without '/' or spaces", a)
		}
	}
	if p.ContextWindow < 0 {
		bad("context_window", "must be >= 0, got %d", p.ContextWindow)
	}
	for class, rate := range p.Pricing {
		if !tokenClasses[class] {
			bad("pricing", "unknown token class %q (known: input, output, cache_read, cache_write, reasoning)", class)
		}
		if !isDecimal(rate) {
			bad("pricing."+class, "%q is not a non-negative decimal", rate)
		}
	}
	if p.Policy.MaxAttempts < 1 {
		bad("policy.max_attempts", "must be > 0, got %d", p.Policy.MaxAttempts)
	}
	if p.Policy.MaxActive < 1 {
		bad("policy.max_active", "must be > 0, got %d", p.Policy.MaxActive)
	}
	if p.Policy.MaxWaiting < 0 {
		bad("policy.max_waiting", "must be >= 0, got %d", p.Policy.MaxWaiting)
	}
	switch p.Transport {
	case wire.TransportSubprocess:
		if p.Binary == "" {
			bad("binary", "required for a subprocess profile")
		}
		if p.InstallHint == "" {
			bad("install_hint", "required for a subprocess profile")
		}
		for _, n := range p.EnvAllow {
			if !isEnvName(n) {
				bad("env_allow", "%q is not an environment variable name", n)
			}
		}
		for n := range p.Env {
			if !isEnvName(n) {
				bad("env", "%q is not an environment variable name", n)
			}
		}
	default:
		if p.Binary != "" || p.InstallHint != "" || len(p.EnvAllow) > 0 || len(p.Env) > 0 {
			bad("binary", "binary, install_hint, env_allow and env are for subprocess profiles only")
		}
	}
	if p.Transport == wire.TransportRemote {
		if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("base_url", "%q must be an http or https URL with a host", p.BaseURL)
		}
		if p.CredentialEnv != "" && !isEnvName(p.CredentialEnv) {
			bad("credential_env", "%q is not an environment variable name", p.CredentialEnv)
		}
	} else if p.BaseURL != "" || p.CredentialEnv != "" || p.AllowLoopback || p.OmitTemperature {
		bad("base_url", "base_url, allow_loopback, credential_env and omit_temperature are for remote profiles only")
	}
	return errs
}

var tokenClasses = map[string]bool{"input": true, "output": true, "cache_read": true, "cache_write": true, "reasoning": true}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	dot := false
	digits := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot && i > 0 && i < len(s)-1:
			dot = true
		default:
			return false
		}
	}
	return digits > 0
}

func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// Get returns the profile named name.
func (r *Registry) Get(name string) (*Profile, bool) {
	p, ok := r.byName[name]
	return p, ok
}

// All returns every profile, sorted by name.
func (r *Registry) All() []*Profile {
	out := make([]*Profile, 0, len(r.byName))
	for _, n := range r.Names() {
		out = append(out, r.byName[n])
	}
	return out
}
