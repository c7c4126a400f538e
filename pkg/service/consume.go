package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Consume hands each message of msgs to handle on workers goroutines until
// ctx ends, then drains msgs: the messages already pulled are still
// handled, and Consume returns, nil, once every handle call has returned.
// handle gets ctx without its cancellation, so that a message in hand is
// settled after ctx ends; it settles the message itself.
//
// A missed heartbeat (the consumer's server went away, a failover) is
// logged and the iterator pulls again once a server answers. Any other
// error of the iterator ends Consume with that error, naming what the
// messages are ("submission", "run record"). It blocks; workers must be
// at least 1.
func Consume(ctx context.Context, msgs jetstream.MessagesContext, workers int, what string, log *slog.Logger, handle func(context.Context, jetstream.Msg)) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	// stop ends the drain goroutine when the iterator fails before ctx ends.
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan jetstream.Msg)
	for range workers {
		wg.Go(func() {
			for msg := range work {
				handle(context.WithoutCancel(ctx), msg)
			}
		})
	}
	wg.Go(func() {
		<-stop.Done()
		msgs.Drain()
	})
	defer close(work)
	for {
		msg, err := msgs.Next()
		if errors.Is(err, jetstream.ErrNoHeartbeat) {
			log.Warn("consumer missed its heartbeat", "messages", what, "err", err)
			continue
		}
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("next %s: %w", what, err)
		}
		work <- msg
	}
}
