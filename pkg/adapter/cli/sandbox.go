package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
)

// SandboxPolicy is what a sandboxed run of the CLI may reach: the
// endpoint of each base URL its child environment sets (BaseURLVars,
// from EnvSet or, when allowed, the runner's environment) and of each
// Key's API its environment names and of each base URL the CLI's own
// configuration file names (ConfigBaseURLs, read when the policy is
// built, at the runner's start); when that is none, the CLI's default
// Egress. The APIs of the Keys whose key the child would get are keyed:
// the runner's proxy holds their keys (Key). Then its state
// directories, what it reads but may not change, and its credential
// files; the files it keeps a login in are masked (LoginFiles).
func (c Config) SandboxPolicy() (sandbox.Policy, error) {
	p := sandbox.Policy{StateVars: slices.Clone(c.StateVars), ReadOnlyVars: slices.Clone(c.ReadOnlyVars),
		CredentialFiles: slices.Clone(c.CredentialFiles)}
	add := func(name, u string) error {
		e, err := sandbox.EgressOf(u)
		if err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		if !slices.Contains(p.Egress, e) {
			p.Egress = append(p.Egress, e)
		}
		return nil
	}
	for _, name := range c.BaseURLVars {
		if v, _ := c.childValue(name); v != "" {
			if err := add(name, v); err != nil {
				return p, err
			}
		}
	}
	for _, k := range c.Keys {
		if c.names(k.Var) {
			if err := add(k.Var, c.keyURL(k)); err != nil {
				return p, err
			}
		}
	}
	keys := c
	if c.ConfigBaseURLs != nil {
		urls, err := c.ConfigBaseURLs(c.ChildEnv)
		if err != nil {
			return p, err
		}
		keys.Keys = slices.Clone(c.Keys)
		for _, u := range urls {
			if err := add(u.Source, u.URL); err != nil {
				return p, err
			}
			if u.KeyVar == "" && u.Key.Empty() {
				continue
			}
			k := Key{Var: u.KeyVar, URL: u.URL, Header: u.Header, Value: u.Key}
			if !slices.ContainsFunc(keys.Keys, func(o Key) bool {
				return o.Var == k.Var && o.Value.Reveal() == k.Value.Reveal() && o.URL == k.URL
			}) {
				keys.Keys = append(keys.Keys, k)
			}
		}
	}
	if len(p.Egress) == 0 {
		p.Egress = slices.Clone(c.Egress)
	}
	keyed, err := keys.keyed()
	if err != nil {
		return p, err
	}
	p.Keyed = keyed
	if c.LoginFiles != nil {
		for _, f := range c.LoginFiles(c.ChildEnv) {
			if !slices.ContainsFunc(p.CredentialFiles, func(c string) bool { return filepath.Clean(c) == filepath.Clean(f) }) {
				p.LoginFiles = append(p.LoginFiles, f)
			}
		}
	}
	return p, nil
}

// ChildEnv is the value variable name has in the child's environment:
// EnvSet's, else the runner's own when name is allowed (EnvAllow) or one
// of the base variables every child gets (proc.AllowEnv) that a CLI's
// configuration is found by.
func (c Config) ChildEnv(name string) (string, bool) {
	if v, ok := c.childValue(name); ok {
		return v, true
	}
	if slices.Contains(baseVars, name) {
		return os.LookupEnv(name)
	}
	return "", false
}

// baseVars are the runner variables every child gets (proc.AllowEnv) that
// a CLI's configuration is found by.
var baseVars = []string{"HOME"}

// A BaseURL is a model API base URL a CLI's own configuration names, and
// where (the file and key), for the error that names a bad one. KeyVar,
// if set, is the variable the configuration says holds the API's key, or
// Key the key itself when the configuration holds it (a literal), and
// Header how the API takes it: a key the child would get there the
// runner's proxy holds in a confined run (Key, with no BaseURLVar: the
// adapter points the CLI at ProxyURL).
type BaseURL struct {
	URL, Source    string
	KeyVar, Header string
	Key            secret.String
}

// ReadConfigFile reads a CLI's configuration file of at most max bytes,
// for a ConfigBaseURLs: nil and no error when there is no such file.
func ReadConfigFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, nil
}
