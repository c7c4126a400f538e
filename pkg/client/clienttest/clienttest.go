// Package clienttest reads runs in a test the way a client does: a new
// client on an embedded server (New), every event of a run up to its
// terminal status (Collect), the events in short (Describe), and a wait for
// a run's record to reach a state (WaitFor); and the way the stream holds
// them, a batch as one event (Stored).
package clienttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// New returns a client of the mesh on srv, on its own connection, which is
// closed when the test ends.
func New(t testing.TB, srv *server.Server) *client.Client {
	t.Helper()
	nc, _ := natstest.Connect(t, srv)
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Collect returns every event of tenant's run runID up to its terminal
// status, waiting up to 60s for it.
func Collect(t testing.TB, c *client.Client, tenant, runID string) []wire.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []wire.Event
	for ev, err := range c.Events(ctx, tenant, runID, 1) {
		if err != nil {
			t.Fatalf("events of %s.%s: %v (got %s)", tenant, runID, err, Describe(out))
		}
		out = append(out, ev)
	}
	return out
}

// Stored returns every event stored for tenant's run runID on js's
// events stream of names, in stream order, as stored: a batch is one
// event, not expanded.
func Stored(t testing.TB, js jetstream.JetStream, names subject.Names, tenant, runID string) []wire.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.Events(tenant, runID)}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var evs []wire.Event
	for range info.NumPending {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ev, err := wire.Decode[wire.Event](msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// Run submits req through c and returns its run id and every event of
// the run up to its terminal status (Collect).
func Run(t testing.TB, c *client.Client, req wire.RunRequest) (runID string, evs []wire.Event) {
	t.Helper()
	id, err := c.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return id, Collect(t, c, req.Tenant, id)
}

// Describe renders events as "[accepted routed running text ... succeeded]":
// a chunk by its type, a status by its state.
func Describe(evs []wire.Event) string {
	var s []string
	for _, ev := range evs {
		if ev.Kind == wire.KindChunk {
			s = append(s, string(ev.Chunk.Type))
		} else {
			s = append(s, string(ev.Status.State))
		}
	}
	return fmt.Sprint(s)
}

// Last is the status of the last event, the terminal one of Collect.
func Last(evs []wire.Event) wire.Status { return *evs[len(evs)-1].Status }

// CheckGapless fails the test unless the events' seq run 1, 2, 3, ...
func CheckGapless(t testing.TB, evs []wire.Event) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: %s", i, ev.Seq, Describe(evs))
		}
	}
}

// WaitFor waits up to 20s until the record of tenant's run runID is in
// state.
func WaitFor(t testing.TB, c *client.Client, tenant, runID string, state wire.State) {
	t.Helper()
	natstest.Eventually(t, 20*time.Second, func() error {
		rec, err := c.Status(context.Background(), tenant, runID)
		if err != nil {
			return err
		}
		if rec.State != state {
			return fmt.Errorf("run %s is %s, want %s", runID, rec.State, state)
		}
		return nil
	})
}

// WaitForOutput follows tenant's run runID from its first event until its
// first chunk (the run is then executing and has output) or the end of its
// events, failing the test on an error.
func WaitForOutput(ctx context.Context, t testing.TB, c *client.Client, tenant, runID string) {
	t.Helper()
	FollowUntil(ctx, t, c, tenant, runID, func(ev wire.Event) bool { return ev.Kind == wire.KindChunk })
}

// WaitForRouted follows tenant's run runID from its first event until its
// routed status or the end of its events, failing the test on an error.
func WaitForRouted(ctx context.Context, t testing.TB, c *client.Client, tenant, runID string) {
	t.Helper()
	FollowUntil(ctx, t, c, tenant, runID, func(ev wire.Event) bool {
		return ev.Kind == wire.KindStatus && ev.Status.State == wire.StateRouted
	})
}

// FollowUntil follows tenant's run runID from its first event until an
// event for which until is true or the end of its events, failing the test
// on an error.
func FollowUntil(ctx context.Context, t testing.TB, c *client.Client, tenant, runID string, until func(wire.Event) bool) {
	t.Helper()
	for ev, err := range c.Events(ctx, tenant, runID, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if until(ev) {
			return
		}
	}
}

// Msgpack is v encoded as wire.Marshal does, failing the test on error.
func Msgpack(t testing.TB, v any) []byte {
	t.Helper()
	b, err := wire.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FixtureRun is a request, with a new run id, for a run of the built-in
// fixture profile in tenant by principal alice; req is the fixture
// adapter's request (a prompt, and optionally a script).
func FixtureRun(t testing.TB, tenant string, req any) wire.RunRequest {
	t.Helper()
	return wire.RunRequest{RunID: client.NewRunID(), Tenant: tenant, Principal: "alice", Profile: "fixture", Request: Msgpack(t, req)}
}
