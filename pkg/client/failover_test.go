package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestSubmitRetriesUntilStored: while no stream stores the submission (as
// during a leader election, when nothing answers), Submit sends the same
// message again, with the same Nats-Msg-Id, until it is stored once.
func TestSubmitRetriesUntilStored(t *testing.T) {
	srv := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, srv)
	names := subject.Names{}
	c, err := client.New(nc, names)
	if err != nil {
		t.Fatal(err)
	}
	// A subscriber that never answers stands in for the stream leader that
	// went away: each attempt reaches it and times out.
	seen := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(names.Submit("acme"), seen)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Submit(ctx, wire.RunRequest{RunID: "r1", Tenant: "acme", Principal: "p", Profile: "fixture"})
		done <- err
	}()
	first := <-seen
	// The leader is back: the stream exists now.
	if err := topology.Ensure(ctx, js, topology.Config{Names: names}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("submit through the failover: %v", err)
	}
	again := <-seen
	if id := again.Header.Get(jetstream.MsgIDHeader); id != "acme.r1" || id != first.Header.Get(jetstream.MsgIDHeader) {
		t.Errorf("retried with Nats-Msg-Id %q after %q, want acme.r1 both times", id, first.Header.Get(jetstream.MsgIDHeader))
	}
	st, err := js.Stream(ctx, names.SubmitStream())
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 1 {
		t.Errorf("submit stream holds %d messages, want 1", n)
	}
	// Submitting again is idempotent: the duplicate ack is a success.
	if _, err := c.Submit(ctx, wire.RunRequest{RunID: "r1", Tenant: "acme", Principal: "p", Profile: "fixture"}); err != nil {
		t.Errorf("resubmit: %v", err)
	}
}

func TestSubmitGivesUpWithTheContext(t *testing.T) {
	srv := natstest.RunJetStream(t)
	nc, _ := natstest.Connect(t, srv)
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Submit(ctx, wire.RunRequest{RunID: "r1", Tenant: "acme", Principal: "p", Profile: "fixture"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("submit without a stream = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("submit returned after %s, want soon after its 300ms deadline", d)
	}
}

// publish stores run events in the given seq order, as a writer retrying
// through a leader election may get them stored.
func publish(t *testing.T, js jetstream.JetStream, runID string, seqs ...uint64) {
	t.Helper()
	for _, seq := range seqs {
		ev := wire.Event{V: wire.Version, RunID: runID, Seq: seq, Kind: wire.KindChunk, Chunk: &wire.Chunk{Type: wire.ChunkText, Content: fmt.Sprint(seq)}}
		if seq == seqs[len(seqs)-1] {
			ev.Kind, ev.Chunk, ev.Status = wire.KindStatus, nil, &wire.Status{State: wire.StateSucceeded}
		}
		b, err := wire.Marshal(&ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(context.Background(), subject.Names{}.Events("acme", runID), b); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEventsReorderARetriedChunk(t *testing.T) {
	tests := []struct {
		name    string
		in      []uint64
		want    string
		wantErr string
	}{
		{name: "in order", in: []uint64{1, 2, 3, 4}, want: "[1 2 3 4]"},
		{name: "one retried", in: []uint64{1, 3, 2, 4}, want: "[1 2 3 4]"},
		{name: "two retried", in: []uint64{1, 4, 5, 2, 3, 6}, want: "[1 2 3 4 5 6]"},
		{name: "duplicate", in: []uint64{1, 2, 2, 3}, want: "[1 2 3]"},
		{name: "gap at the end", in: []uint64{1, 3, 4}, want: "[1]", wantErr: "seq 4, want 2"},
	}
	_, nc, js := natstest.RunMesh(t)
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runID := fmt.Sprint("r", i)
			publish(t, js, runID, tt.in...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var got []uint64
			var gotErr error
			for ev, err := range c.Events(ctx, "acme", runID, 1) {
				if err != nil {
					gotErr = err
					break
				}
				got = append(got, ev.Seq)
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("seqs = %v, want %s", got, tt.want)
			}
			if tt.wantErr == "" && gotErr != nil || tt.wantErr != "" && (gotErr == nil || !strings.Contains(gotErr.Error(), tt.wantErr)) {
				t.Errorf("error = %v, want %q", gotErr, tt.wantErr)
			}
		})
	}
}
