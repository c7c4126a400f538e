package runs_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// List yields one tenant's records (not those of a tenant whose name it
// prefixes), or every tenant's; a run held by a runner shows running.
func TestListPerTenant(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	routed(t, s, "acme", "a1")
	routed(t, s, "acme", "a2")
	routed(t, s, "acme2", "b1")
	routed(t, s, "beta", "a1") // the same run id in another tenant
	w, err := s.Events().Open(ctx, "acme", "a2")
	if err != nil {
		t.Fatal(err)
	}
	w.Author("runner-1", "epoch-1", 1)
	if err := w.StatusFenced(ctx, wire.Status{State: wire.StateRunning, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	ended := routed(t, s, "beta", "done")
	we, err := s.Events().Open(ctx, "beta", "done")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.End(ctx, we, ended, wire.Status{State: wire.StateCancelled}); err != nil {
		t.Fatal(err)
	}

	list := func(tenant string) []string {
		t.Helper()
		var out []string
		for r, err := range s.List(ctx, tenant) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, subject.RunKey(r.Record.Tenant, r.Record.RunID)+"="+string(r.Record.State))
		}
		slices.Sort(out)
		return out
	}
	for tenant, want := range map[string][]string{
		"acme":  {"acme.a1=routed", "acme.a2=running"},
		"acme2": {"acme2.b1=routed"},
		"beta":  {"beta.a1=routed", "beta.done=cancelled"},
		"none":  nil,
		"":      {"acme.a1=routed", "acme.a2=running", "acme2.b1=routed", "beta.a1=routed", "beta.done=cancelled"},
	} {
		if got := list(tenant); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %v, want %v", tenant, got, want)
		}
	}
	for r, err := range s.List(ctx, "a.b") {
		if !errors.Is(err, subject.ErrInvalidToken) {
			t.Errorf("List(a.b) = %+v, %v; want ErrInvalidToken", r, err)
		}
	}
	// Breaking out stops the watch (goleak checks at the end).
	for range s.List(ctx, "") {
		break
	}
}
