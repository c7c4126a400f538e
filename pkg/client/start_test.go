package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Start has the run's follower in place when it returns, before any
// event exists, stores the submission, and yields the run's events from
// seq 1 once they are published; iterating releases its consumer.
func TestStartFollowsAlongsideTheSubmit(t *testing.T) {
	srv := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, srv)
	names := subject.Names{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := topology.Ensure(ctx, js, topology.Config{Names: names}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(nc, names)
	if err != nil {
		t.Fatal(err)
	}
	id, evs, err := c.Start(ctx, wire.RunRequest{Tenant: "acme", Principal: "ana", Profile: "fixture"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	if n := consumers(ctx, t, stream); n != 1 {
		t.Fatalf("consumers on the events stream after Start: %d, want its follower's 1", n)
	}
	sub, err := js.Stream(ctx, names.SubmitStream())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.GetLastMsgForSubject(ctx, names.Submit("acme")); err != nil {
		t.Fatalf("submission of %s not stored: %v", id, err)
	}
	log, err := events.NewLog(ctx, js, names)
	if err != nil {
		t.Fatal(err)
	}
	w := log.New("acme", id)
	if err := w.Status(ctx, wire.Status{State: wire.StateAccepted}); err != nil {
		t.Fatal(err)
	}
	if err := w.Terminal(ctx, wire.Status{State: wire.StateCancelled}); err != nil {
		t.Fatal(err)
	}
	var got []wire.State
	for ev, err := range evs {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Status.State)
	}
	if len(got) != 2 || got[0] != wire.StateAccepted || got[1] != wire.StateCancelled {
		t.Fatalf("events %v, want [accepted cancelled]", got)
	}
	if n := consumers(ctx, t, stream); n != 0 {
		t.Fatalf("consumers after the events were read: %d, want 0", n)
	}
	// A request the edge refuses creates nothing.
	if _, _, err := c.Start(ctx, wire.RunRequest{Tenant: "ac.me", Principal: "ana"}); err == nil {
		t.Fatal("Start with an invalid tenant: no error")
	}
	if n := consumers(ctx, t, stream); n != 0 {
		t.Fatalf("consumers after a refused Start: %d, want 0", n)
	}
}

func consumers(ctx context.Context, t *testing.T, s jetstream.Stream) int {
	t.Helper()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Consumers
}
