package remote_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestUnavailableMakesTheRealDeclaration(t *testing.T) {
	classes := []string{"input", "output"}
	d := remote.Declaration{
		Capabilities: wire.Capabilities{Transport: wire.TransportRemote, EmitsToolEvents: true, ReportsUsage: true},
		TokenClasses: classes, MaxPricedContext: 1000,
	}
	a := remote.Unavailable("api", d, "API_KEY")
	classes[0] = "changed" // the adapter keeps its own copy
	if a.Name() != "api" || a.Capabilities() != d.Capabilities {
		t.Errorf("declares %s %+v, want api %+v", a.Name(), a.Capabilities(), d.Capabilities)
	}
	if got := a.(adapter.TokenClasses).TokenClasses(); !slices.Equal(got, []string{"input", "output"}) {
		t.Errorf("TokenClasses() = %v", got)
	}
	if got := a.(adapter.PricedContext).MaxPricedContext(); got != 1000 {
		t.Errorf("MaxPricedContext() = %d, want 1000", got)
	}
	if _, err := a.Validate(nil); !errors.Is(err, wire.ProviderUnavailable) {
		t.Errorf("Validate = %v, want ProviderUnavailable", err)
	}
}
