package service_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/nats-io/nats.go/jetstream"
)

// consumeFixture publishes n messages on a fresh stream and returns a
// durable consumer of them.
func consumeFixture(t *testing.T, n int) jetstream.Consumer {
	t.Helper()
	_, js := natstest.Connect(t, natstest.RunJetStream(t))
	ctx := t.Context()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "C", Subjects: []string{"c.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := js.Publish(ctx, fmt.Sprintf("c.%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	return cons
}

// Every message is handled once, on the workers, and a message in hand
// when ctx ends is finished, with a context that did not end, before
// Consume returns.
func TestConsumeHandlesEveryMessageAndFinishesTheOnesInHand(t *testing.T) {
	const n = 20
	cons := consumeFixture(t, n)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		mu      sync.Mutex
		seen    = map[string]int{}
		last    = make(chan struct{})
		settled atomic.Bool
		lateErr error
	)
	handle := func(hctx context.Context, msg jetstream.Msg) {
		mu.Lock()
		seen[msg.Subject()]++
		count := len(seen)
		mu.Unlock()
		if count < n {
			_ = msg.Ack()
			return
		}
		// The last message: end ctx while it is in hand.
		close(last)
		<-ctx.Done()
		lateErr = hctx.Err()
		_ = msg.Ack()
		settled.Store(true)
	}
	done := make(chan error, 1)
	go func() {
		done <- service.Consume(ctx, cons, "d", 3, slog.New(slog.NewTextHandler(io.Discard, nil)), handle)
	}()
	<-last
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if !settled.Load() {
		t.Fatal("Consume returned before the message in hand was settled")
	}
	if lateErr != nil {
		t.Fatalf("the handler's context ended with ctx: %v", lateErr)
	}
	if len(seen) != n {
		t.Fatalf("handled %d distinct messages, want %d", len(seen), n)
	}
	for subj, k := range seen {
		if k != 1 {
			t.Errorf("%s handled %d times", subj, k)
		}
	}
}
