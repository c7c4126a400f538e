package cli

import (
	"fmt"
	"os"
	"slices"

	"github.com/agentmesh/agentmesh/pkg/sandbox"
)

// SandboxPolicy is what a sandboxed run of the CLI may reach: the
// endpoint of each base URL its child environment sets (BaseURLVars,
// from EnvSet or, when allowed, the runner's environment) or, when it
// sets none, the CLI's default Egress; its state directories; and what
// it reads but may not change.
func (c Config) SandboxPolicy() (sandbox.Policy, error) {
	p := sandbox.Policy{StateVars: slices.Clone(c.StateVars), ReadOnlyVars: slices.Clone(c.ReadOnlyVars)}
	for _, name := range c.BaseURLVars {
		v, ok := c.EnvSet[name]
		if !ok && slices.Contains(c.EnvAllow, name) {
			v, ok = os.LookupEnv(name)
		}
		if !ok || v == "" {
			continue
		}
		e, err := sandbox.EgressOf(v)
		if err != nil {
			return p, fmt.Errorf("%s: %v", name, err)
		}
		if !slices.Contains(p.Egress, e) {
			p.Egress = append(p.Egress, e)
		}
	}
	if len(p.Egress) == 0 {
		p.Egress = slices.Clone(c.Egress)
	}
	return p, nil
}
