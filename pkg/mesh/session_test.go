package mesh_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

type resumableReq struct {
	Prompt string `msgpack:"prompt"`
	Script string `msgpack:"script,omitempty"`
	Resume string `msgpack:"resume,omitempty"`
}

// sessionNode serves a resumable fixture ("fixture-r") and the ordinary,
// non-resumable one ("fixture").
func sessionNode(t *testing.T) (*client.Client, jetstream.KeyValue) {
	t.Helper()
	srv := natstest.RunJetStream(t)
	plain := newFixture(t)
	resumable, err := fixture.New(fixture.Config{Name: "fixture-r", ScriptsDir: "../../testdata/fixture", Resumable: true})
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := profile.New(
		profile.Profile{Name: "fixture", Adapter: "fixture", Transport: wire.TransportInProcess, Model: "fixture-1"},
		profile.Profile{Name: "fixture-r", Adapter: "fixture-r", Transport: wire.TransportInProcess, Model: "fixture-1"},
	)
	if err != nil {
		t.Fatal(err)
	}
	n := startNodeWith(t, srv, mesh.Config{}, profiles, plain, resumable)
	kv, err := n.d.JS.KeyValue(context.Background(), n.d.Names.SessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	return newClient(t, srv), kv
}

// converse runs one request on a conversation and returns its events.
func converse(t *testing.T, c *client.Client, profileName, conversation string, req any) []wire.Event {
	t.Helper()
	r := runReq(t, req)
	r.Profile, r.Conversation = profileName, conversation
	_, evs := clienttest.Run(t, c, r)
	return evs
}

func systemMeta(t *testing.T, evs []wire.Event) wire.Metadata {
	t.Helper()
	for _, ev := range evs {
		if ev.Kind == wire.KindChunk && ev.Chunk.Type == wire.ChunkSystem {
			return ev.Chunk.Metadata
		}
	}
	t.Fatalf("no system chunk in %s", describe(evs))
	return wire.Metadata{}
}

func stored(t *testing.T, kv jetstream.KeyValue, conversation string) string {
	t.Helper()
	e, err := kv.Get(context.Background(), tenant+"."+conversation)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(e.Value())
}

func TestSessionsResumableAdapter(t *testing.T) {
	c, kv := sessionNode(t)

	first := converse(t, c, "fixture-r", "conv1", resumableReq{Prompt: "hello"})
	id := systemMeta(t, first).SessionID
	if id == "" || stored(t, kv, "conv1") != id {
		t.Fatalf("first run confirmed %q, stored %q", id, stored(t, kv, "conv1"))
	}

	// Continuing: the router injects the stored id and the provider keeps it.
	second := converse(t, c, "fixture-r", "conv1", resumableReq{Prompt: "again"})
	if got := systemMeta(t, second).SessionID; got != id {
		t.Fatalf("second run resumed %q, want %q", got, id)
	}

	// An explicit caller value wins over the stored one, and is confirmed.
	explicit := converse(t, c, "fixture-r", "conv1", resumableReq{Prompt: "x", Resume: "chosen-1"})
	if got := systemMeta(t, explicit).SessionID; got != "chosen-1" || stored(t, kv, "conv1") != "chosen-1" {
		t.Fatalf("explicit resume: confirmed %q, stored %q", got, stored(t, kv, "conv1"))
	}

	// Failure never erases: a failing run whose stream confirms no id.
	failed := converse(t, c, "fixture-r", "conv1", resumableReq{Prompt: "x", Script: "provider-error"})
	if last(failed).State != wire.StateFailed || stored(t, kv, "conv1") != "chosen-1" {
		t.Fatalf("after a failure: %s, stored %q", describe(failed), stored(t, kv, "conv1"))
	}
	// A later stream with an empty session id never erases either.
	empty := converse(t, c, "fixture-r", "conv1", resumableReq{Prompt: "x", Script: "tool-roundtrip"})
	if systemMeta(t, empty).SessionID != "" || stored(t, kv, "conv1") != "chosen-1" {
		t.Fatalf("after an empty id: stored %q", stored(t, kv, "conv1"))
	}

	// A new conversation starts fresh: nothing is injected.
	fresh := converse(t, c, "fixture-r", "conv2", resumableReq{Prompt: "new"})
	if got := systemMeta(t, fresh).SessionID; got == "chosen-1" || got == "" {
		t.Fatalf("fresh conversation confirmed %q", got)
	}
}

func TestSessionsCancelledRunKeepsConfirmedID(t *testing.T) {
	c, kv := sessionNode(t)
	first := converse(t, c, "fixture-r", "conv", resumableReq{Prompt: "hello"})
	id := systemMeta(t, first).SessionID
	r := runReq(t, map[string]any{"prompt": "x", "script": "slow", "delay_ms": 200})
	r.Profile, r.Conversation = "fixture-r", "conv"
	run, err := c.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, run, wire.StateRunning)
	if _, err := c.Cancel(context.Background(), tenant, run); err != nil {
		t.Fatal(err)
	}
	if st := last(collect(t, c, run)); st.State != wire.StateCancelled || stored(t, kv, "conv") != id {
		t.Fatalf("after cancel: %s, stored %q, want %q", st.State, stored(t, kv, "conv"), id)
	}
}

func TestSessionsNonResumableAdapterIsNeverInjected(t *testing.T) {
	c, kv := sessionNode(t)
	first := converse(t, c, "fixture", "conv", fixtureReq{Prompt: "hello"})
	m := systemMeta(t, first)
	if m.SessionID != "" || m.ProviderSessionID == "" {
		t.Fatalf("non-resumable metadata = %+v, want only provider_session_id", m)
	}
	if got := stored(t, kv, "conv"); got != "" {
		t.Fatalf("non-resumable id stored: %q", got)
	}
	second := converse(t, c, "fixture", "conv", fixtureReq{Prompt: "again"})
	if got := systemMeta(t, second).ProviderSessionID; got == m.ProviderSessionID {
		t.Fatalf("second run reused %q: it was injected", got)
	}
}
