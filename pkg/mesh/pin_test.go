package mesh_test

import (
	"errors"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// A conversation pinned through the alias "sonnet" keeps its model after
// the alias is repointed and the router restarted; once the pinned model
// is gone, the next run fails closed with PinMismatch.
func TestConversationKeepsItsPin(t *testing.T) {
	srv := natstest.RunJetStream(t)
	fx := newFixture(t)
	prof := func(name, model string, aliases ...string) profile.Profile {
		return profile.Profile{Name: name, Adapter: "fixture", Transport: wire.TransportInProcess, Model: model, Aliases: aliases,
			Pricing: map[string]string{"input": "0", "output": "0"}}
	}
	registry := func(ps ...profile.Profile) *profile.Registry {
		r, err := profile.New(ps...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	model := func(evs []wire.Event) string { return last(evs).Pin.Model }

	// "sonnet" → model-4.5.
	first := startNodeWith(t, srv, mesh.Config{}, registry(prof("s45", "model-4.5", "sonnet"), prof("s46", "model-4.6")), fx)
	c := newClient(t, srv)
	if got := model(converse(t, c, "sonnet", "conv", fixtureReq{Prompt: "hi"})); got != "model-4.5" {
		t.Fatalf("first run on model %q", got)
	}
	stopNode(t, first)

	// The alias moves to model-4.6 and the router restarts.
	second := startNodeWith(t, srv, mesh.Config{}, registry(prof("s45", "model-4.5"), prof("s46", "model-4.6", "sonnet")), fx)
	if got := model(converse(t, c, "sonnet", "conv", fixtureReq{Prompt: "again"})); got != "model-4.5" {
		t.Fatalf("the pinned conversation moved to %q", got)
	}
	if got := model(converse(t, c, "sonnet", "fresh", fixtureReq{Prompt: "new"})); got != "model-4.6" {
		t.Fatalf("a fresh conversation resolved to %q, want the alias's new model", got)
	}
	stopNode(t, second)

	// The pinned model is removed.
	startNodeWith(t, srv, mesh.Config{}, registry(prof("s46", "model-4.6", "sonnet")), fx)
	evs := converse(t, c, "sonnet", "conv", fixtureReq{Prompt: "and now?"})
	if st := last(evs); describe(evs) != "[accepted rejected]" || !errors.Is(st.Error, wire.PinMismatch) {
		t.Fatalf("events %s, error %v; want rejected with PinMismatch", describe(evs), st.Error)
	}
}
