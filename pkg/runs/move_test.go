package runs_test

import (
	"context"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Move sets the record's profile, adapter and pin and clears its attempt
// and owner, by compare-and-set over a record another writer changed; a
// second Move to the same profile is a no-op; an ended run is not moved.
func TestMove(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	r := routed(t, s, "acme", "m1")
	fb := wire.Fallback{Profile: "b", Adapter: "fx-b", Transport: wire.TransportInProcess,
		Pin: wire.Pin{Provider: "fx-b", Model: "model-b"}, Policy: wire.AttemptPolicy{MaxAttempts: 1}}
	if _, err := s.Route(ctx, r, &wire.Pin{Provider: "fx-a", Model: "model-a"}, "fx-a", 0); err != nil { // r's revision is stale now
		t.Fatal(err)
	}
	for range 2 {
		got, moved, err := s.Move(ctx, "acme", "m1", fb)
		if err != nil || !moved {
			t.Fatalf("Move = %v, %v", moved, err)
		}
		rec := got.Record
		if rec.Profile != "b" || rec.Adapter != "fx-b" || rec.Pin == nil || rec.Pin.Model != "model-b" || rec.Attempt != 0 || rec.Owner != "" || rec.State != wire.StateRouted {
			t.Fatalf("moved record = %+v", rec)
		}
	}
	ended := routed(t, s, "acme", "m2")
	w, err := s.Events().Open(ctx, "acme", "m2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.End(ctx, w, ended, wire.Status{State: wire.StateCancelled}); err != nil {
		t.Fatal(err)
	}
	if got, moved, err := s.Move(ctx, "acme", "m2", fb); err != nil || moved || got.Record.State != wire.StateCancelled {
		t.Fatalf("Move of an ended run = %v, %v (%s)", moved, err, got.Record.State)
	}
}

// Queued finds a work item by its Nats-Msg-Id among those on one subject
// only; Dispatched names the run of a fallback's work item.
func TestQueued(t *testing.T) {
	s, d := open(t)
	ctx := context.Background()
	subj := d.Names.Work("in_process", "fx-b", "acme")
	other := d.Names.Work("in_process", "fx-b", "beta")
	for _, m := range []struct{ subj, id string }{
		{subj, subject.RunMsgID("acme", "r1")},
		{other, subject.FallbackMsgID("beta", "r2", "b")},
		{subj, subject.FallbackMsgID("acme", "r2", "b")},
	} {
		msg := nats.NewMsg(m.subj)
		msg.Header.Set(jetstream.MsgIDHeader, m.id)
		if _, err := d.JS.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string]bool{
		subject.FallbackMsgID("acme", "r2", "b"): true,
		subject.RunMsgID("acme", "r1"):           true,
		subject.FallbackMsgID("beta", "r2", "b"): false, // on another subject
		subject.FallbackMsgID("acme", "r3", "b"): false,
	} {
		if got, err := s.Queued(ctx, subj, id); err != nil || got != want {
			t.Errorf("Queued(%s) = %v, %v, want %v", id, got, err, want)
		}
	}
	keys, err := s.Dispatched(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"acme.r1", "beta.r2", "acme.r2"}; len(keys) != 3 || keys[0] != want[0] || keys[1] != want[1] || keys[2] != want[2] {
		t.Fatalf("Dispatched = %v, want %v (a fallback's work names its run)", keys, want)
	}
}
