package profile

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter"
)

// CheckAdapters checks every profile of r against its instance in
// adapters (adapter.Registry.ForProfile), or else the adapter its adapter
// field names, the checks a profile document cannot make on
// its own:
//
//   - the adapter exists: an adapter that is not registered declares
//     nothing a profile could be checked against;
//   - transport, and the capabilities block when the profile has one,
//     equal the adapter's declaration exactly;
//   - pricing prices every token class the adapter reports
//     (adapter.TokenClasses; none when it declares reports_usage false),
//     "0" being a price;
//   - context_window is no larger than what one price covers when the
//     adapter declares that bound (adapter.PricedContext, docs/contract.md §10.11).
//
// Every problem is reported, joined; each matches ErrInvalid and names the
// profile's file, the field and why. Call it at startup, after building
// the adapters and before any is used. It does no I/O.
func CheckAdapters(r *Registry, adapters *adapter.Registry) error {
	var errs []error
	for _, p := range r.All() {
		errs = append(errs, p.checkAdapter(adapters)...)
	}
	return errors.Join(errs...)
}

func (p *Profile) checkAdapter(adapters *adapter.Registry) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s: %s", ErrInvalid, p.where(), field, fmt.Sprintf(format, args...)))
	}
	a, ok := adapters.ForProfile(p.Name)
	if !ok || a.Name() != p.Adapter {
		// A registry of bare adapters: every profile of one is checked
		// against the adapter's instance.
		a, ok = adapters.Get(p.Adapter)
	}
	if !ok {
		bad("adapter", "no adapter %q is registered, so nothing declares its capabilities (registered: %s)",
			p.Adapter, strings.Join(adapters.Names(), ", "))
		return errs
	}
	caps := a.Capabilities()
	if p.Transport != caps.Transport {
		bad("transport", "%s contradicts adapter %s's declaration %s", p.Transport, p.Adapter, caps.Transport)
	}
	if c := p.Capabilities; c != nil {
		for _, f := range []struct {
			field      string
			got, wants any
		}{
			{"resumable", c.Resumable, caps.Resumable},
			{"resume_field", c.ResumeField, caps.ResumeField},
			{"emits_tool_events", c.EmitsToolEvents, caps.EmitsToolEvents},
			{"reports_usage", c.ReportsUsage, caps.ReportsUsage},
		} {
			if f.got != f.wants {
				bad("capabilities."+f.field, "%#v contradicts adapter %s's declaration %#v (a field left out is false or empty)", f.got, p.Adapter, f.wants)
			}
		}
	}
	var classes []string
	if tc, ok := a.(adapter.TokenClasses); ok {
		classes = tc.TokenClasses()
	}
	switch {
	case !caps.ReportsUsage && len(classes) > 0:
		bad("adapter", "adapter %s declares reports_usage false but token classes %s", p.Adapter, strings.Join(classes, ", "))
	case caps.ReportsUsage && len(classes) == 0:
		bad("pricing", "adapter %s reports usage but declares no token classes, so its pricing cannot be checked", p.Adapter)
	case caps.ReportsUsage:
		for _, class := range classes {
			if !tokenClasses[class] {
				bad("pricing", "adapter %s reports unknown token class %q", p.Adapter, class)
				continue
			}
			if _, priced := p.Pricing[class]; !priced {
				bad("pricing."+class, "missing: adapter %s reports %s tokens (it reports %s); price each, \"0\" is a price",
					p.Adapter, class, strings.Join(classes, ", "))
			}
		}
	}
	if pc, ok := a.(adapter.PricedContext); ok {
		if limit := pc.MaxPricedContext(); limit > 0 && p.ContextWindow > limit {
			bad("context_window", "%d is beyond the %d tokens one price covers on adapter %s; "+
				"the provider prices longer requests at other rates, which schema %d cannot express",
				p.ContextWindow, limit, p.Adapter, SchemaVersion)
		}
	}
	return errs
}
