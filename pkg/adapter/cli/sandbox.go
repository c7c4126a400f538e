package cli

import (
	"fmt"
	"slices"

	"github.com/agentmesh/agentmesh/pkg/sandbox"
)

// SandboxPolicy is what a sandboxed run of the CLI may reach: the
// endpoint of each base URL its child environment sets (BaseURLVars,
// from EnvSet or, when allowed, the runner's environment) and of each
// Key's API its environment names; when that is none, the CLI's default
// Egress. The APIs of the Keys whose key the child would get are keyed:
// the runner's proxy holds their keys (Key). Then its state
// directories, what it reads but may not change, and its credential
// files.
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
	if len(p.Egress) == 0 {
		p.Egress = slices.Clone(c.Egress)
	}
	keyed, err := c.keyed()
	if err != nil {
		return p, err
	}
	p.Keyed = keyed
	return p, nil
}
