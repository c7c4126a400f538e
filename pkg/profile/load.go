package profile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/safehttp"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
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

// LoadFile decodes one profile document strictly: an unknown or repeated
// field, or a value of the wrong type, is an error naming the file and the
// field's path (policy.max_active, pricing.input). Every such problem of
// the document is reported, joined. It does not validate values; Load and
// New do.
func LoadFile(path string) (Profile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Profile{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			err = errors.New("empty document")
		}
		return Profile{}, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return Profile{}, fmt.Errorf("%w: %s: one profile document per file", ErrInvalid, path)
	}
	var p Profile
	var errs []error
	bad := func(field string, n *yaml.Node, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s: %s (line %d)", ErrInvalid, path, field, fmt.Sprintf(format, args...), n.Line))
	}
	given := map[string]bool{}
	decodeStrict(doc.Content[0], reflect.ValueOf(&p).Elem(), "", given, bad)
	if len(errs) > 0 {
		return Profile{}, errors.Join(errs...)
	}
	p.file, p.given = path, given
	return p, nil
}

// decodeStrict decodes n into v field by field, so that each problem names
// the field's path: a struct takes only the fields its yaml tags name, each
// once; a map takes each key once; a scalar or a list is decoded by yaml
// itself (its typing rules are yaml's). Every struct field the document
// gives, even as null, is recorded in given by its path, so an explicit
// zero is told from an absent field.
func decodeStrict(n *yaml.Node, v reflect.Value, path string, given map[string]bool, bad func(field string, n *yaml.Node, format string, args ...any)) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	at := func(key string) string {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	null := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
	switch {
	case v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.Struct:
		if null {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		decodeStrict(n, v.Elem(), path, given, bad)
	case v.Kind() == reflect.Struct || v.Kind() == reflect.Map:
		if null {
			return
		}
		if n.Kind != yaml.MappingNode {
			bad(pathOr(path), n, "must be a mapping, got %s", n.ShortTag())
			return
		}
		fields := map[string]int{}
		if v.Kind() == reflect.Struct {
			for i := range v.NumField() {
				name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
				if name != "" && name != "-" {
					fields[name] = i
				}
			}
		} else if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			key := k.Value
			if seen[key] {
				bad(at(key), k, "defined twice")
				continue
			}
			seen[key] = true
			if v.Kind() == reflect.Map {
				elem := reflect.New(v.Type().Elem()).Elem()
				decodeStrict(val, elem, at(key), given, bad)
				v.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), elem)
				continue
			}
			f, known := fields[key]
			if !known {
				bad(at(key), k, "unknown field (known: %s)", strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
				continue
			}
			given[at(key)] = true
			decodeStrict(val, v.Field(f), at(key), given, bad)
		}
	default:
		if err := n.Decode(v.Addr().Interface()); err != nil {
			var te *yaml.TypeError
			if errors.As(err, &te) && len(te.Errors) > 0 {
				_, why, _ := strings.Cut(te.Errors[0], ": ") // drop "line N"
				bad(pathOr(path), n, "%s", why)
				return
			}
			bad(pathOr(path), n, "%v", err)
		}
	}
}

func pathOr(path string) string {
	if path == "" {
		return "document"
	}
	return path
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
			bad("pricing."+class, "unknown token class %q (known: input, output, cache_read, cache_write, reasoning)", class)
			continue
		}
		if !isDecimal(rate) {
			bad("pricing."+class, "%q is not a non-negative decimal", rate)
		}
	}
	if c := p.Capabilities; c != nil && c.Resumable != (c.ResumeField != "") {
		bad("capabilities.resume_field", "%q with resumable: %t; a resumable adapter names the request field that resumes, no other does", c.ResumeField, c.Resumable)
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
	if p.Policy.StallAfter < 0 || (p.Policy.StallAfter > 0 && p.Policy.StallAfter < MinStallAfter) {
		bad("policy.stall_after", "must be at least %s, got %s", MinStallAfter, p.Policy.StallAfter)
	}
	if p.Policy.UnreachableAfter < 0 || (p.Policy.UnreachableAfter > 0 && p.Policy.UnreachableAfter < MinStallAfter) {
		bad("policy.unreachable_after", "must be at least %s, got %s", MinStallAfter, p.Policy.UnreachableAfter)
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
		if _, err := sandbox.ParseEgress(p.Egress); err != nil {
			bad("egress", "%v", err)
		}
		switch p.Network {
		case "", NetworkNone:
		default:
			bad("network", "must be %q or left out, got %q", NetworkNone, p.Network)
		}
		if p.Network == NetworkNone && len(p.Egress) > 0 {
			bad("egress", "network: none allows no egress")
		}
		for _, f := range p.CredentialFiles {
			if !filepath.IsAbs(f) {
				bad("credential_files", "%q: want an absolute path", f)
			}
		}
	default:
		if p.Binary != "" || p.InstallHint != "" || len(p.EnvAllow) > 0 || len(p.Env) > 0 || len(p.Egress) > 0 || p.Network != "" || len(p.CredentialFiles) > 0 {
			bad("binary", "binary, install_hint, env_allow, env, egress, network and credential_files are for subprocess profiles only")
		}
	}
	if len(p.Args) > 0 && p.Transport != wire.TransportSubprocess {
		bad("args", "for subprocess profiles only")
	}
	if ss := p.Session; ss != nil {
		checkSession(ss, bad)
	}
	if p.Transport == wire.TransportRemote {
		checkBaseURL(p, bad)
		if p.CredentialEnv != "" && !isEnvName(p.CredentialEnv) {
			bad("credential_env", "%q is not an environment variable name", p.CredentialEnv)
		}
	} else if p.BaseURL != "" || p.CredentialEnv != "" || p.AllowLoopback || p.OmitTemperature {
		bad("base_url", "base_url, allow_loopback, credential_env and omit_temperature are for remote profiles only")
	}
	return errs
}

// checkSession judges a profile's session settings.
func checkSession(ss *Session, bad func(field, format string, args ...any)) {
	switch ss.PermissionPolicy {
	case "", PermissionAsk, PermissionAllowReadOnly, PermissionDeny:
	default:
		bad("session.permission_policy", "must be %s, %s or %s, got %q", PermissionAsk, PermissionAllowReadOnly, PermissionDeny, ss.PermissionPolicy)
	}
	if ss.PermissionTimeout != 0 && ss.PermissionTimeout < MinSessionTimeout {
		bad("session.permission_timeout", "must be at least %s, got %s", MinSessionTimeout, ss.PermissionTimeout)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"session.idle_timeout", ss.IdleTimeout}, {"session.suspend_after", ss.SuspendAfter}, {"session.suspended_timeout", ss.SuspendedTimeout}} {
		if d.v != 0 && d.v < MinSessionTimeout {
			bad(d.field, "must be at least %s, got %s", MinSessionTimeout, d.v)
		}
	}
	for name, m := range ss.MCPServers {
		field := "session.mcp_servers." + name
		if err := subject.ValidToken("name", name); err != nil {
			bad(field, "%v", err)
		}
		switch {
		case m.Command != "" && (m.URL != "" || m.Type != "" || len(m.Headers) > 0):
			bad(field, "a command (stdio) or a url (type http or sse), not both")
		case m.Command != "":
		case m.URL == "":
			bad(field, "needs a command or a url")
		case m.Type != "http" && m.Type != "sse":
			bad(field+".type", "must be http or sse with a url, got %q", m.Type)
		case len(m.Args) > 0 || len(m.Env) > 0:
			bad(field, "args and env are for a command")
		}
		for n := range m.Env {
			if !isEnvName(n) {
				bad(field+".env", "%q is not an environment variable name", n)
			}
		}
	}
}

// checkBaseURL judges a remote profile's base_url by the policy its
// adapter's client will dial with (pkg/adapter/remote/safehttp): http or https, a host,
// no userinfo, and no refused address or name (private, link-local,
// metadata, ...); loopback only with allow_loopback. The URL itself is not
// repeated in the error: it may carry what should not be logged.
func checkBaseURL(p *Profile, bad func(field, format string, args ...any)) {
	if p.BaseURL == "" {
		bad("base_url", "required for a remote profile")
		return
	}
	_, err := safehttp.CheckURL(p.BaseURL, safehttp.Policy{AllowLoopback: p.AllowLoopback})
	if err == nil {
		return
	}
	if !p.AllowLoopback {
		if _, lerr := safehttp.CheckURL(p.BaseURL, safehttp.Policy{AllowLoopback: true}); lerr == nil {
			bad("base_url", "%v; a loopback endpoint needs allow_loopback: true", err)
			return
		}
	}
	bad("base_url", "%v", err)
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
