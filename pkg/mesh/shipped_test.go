package mesh_test

import (
	"context"
	"iter"
	"reflect"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// standIn answers for a shipped profile's adapter without its provider:
// the pin a run carries comes from the router's resolution, not from the
// adapter, so any adapter of the right name and transport shows it.
type standIn struct {
	name      string
	transport wire.Transport
}

func (s standIn) Name() string { return s.name }
func (s standIn) Capabilities() wire.Capabilities {
	return wire.Capabilities{Transport: s.transport, ReportsUsage: true}
}
func (s standIn) RuntimeKeys() []string { return nil }
func (s standIn) Validate(b []byte) (any, error) {
	d, err := reqfield.Decode(s.name, b)
	if err != nil {
		return nil, err
	}
	d.String("prompt")
	return nil, d.Err()
}
func (s standIn) Stream(_ context.Context, call adapter.Call) iter.Seq2[wire.Chunk, error] {
	return func(yield func(wire.Chunk, error) bool) {
		if !yield(wire.Chunk{Type: wire.ChunkText, Content: "ok from " + call.Model}, nil) {
			return
		}
		yield(wire.Chunk{Type: wire.ChunkResult, Metadata: wire.Metadata{Usage: &wire.Usage{InputTokens: 10, OutputTokens: 2}}}, nil)
	}
}

// Every shipped profile's pin is the one its runs carry in their terminal
// status, priced with its pricing.
func TestShippedProfilesPinTheirRuns(t *testing.T) {
	profiles, err := profile.Load("../../profiles")
	if err != nil {
		t.Fatal(err)
	}
	var served []adapter.Adapter
	seen := map[string]bool{}
	for _, p := range profiles.All() {
		if !seen[p.Adapter] {
			seen[p.Adapter] = true
			served = append(served, standIn{name: p.Adapter, transport: p.Transport})
		}
	}
	srv := natstest.RunJetStream(t)
	startNodeWith(t, srv, mesh.Config{}, profiles, served...)
	c := newClient(t, srv)
	for _, name := range profiles.Names() {
		t.Run(name, func(t *testing.T) {
			_, want, err := profiles.Resolve(name)
			if err != nil {
				t.Fatal(err)
			}
			r := runReq(t, map[string]any{"prompt": "pin?"})
			r.Profile = name
			_, evs := clienttest.Run(t, c, r)
			st := last(evs)
			if st.State != wire.StateSucceeded || st.Pin == nil || !reflect.DeepEqual(*st.Pin, want) {
				t.Fatalf("terminal status %s with pin %+v, want %+v", st.State, st.Pin, want)
			}
			if st.Summary == nil || st.Summary.Cost == "" {
				t.Fatalf("no cost in the summary: %+v", st.Summary)
			}
		})
	}
}
