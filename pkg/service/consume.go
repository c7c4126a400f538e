package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Consume pulls the messages of cons (named name in logs and errors) and
// hands each to one of workers goroutines running handle, until ctx ends;
// then it drains what was pulled, waits for every handler to return and
// returns nil. handle's context is not cancelled with ctx, so a message
// in hand is finished and settled. A missed heartbeat (the consumer's
// server went away, a failover) is logged and consuming goes on once a
// server answers; any other failure to pull is returned, once the
// handlers have returned.
func Consume(ctx context.Context, cons jetstream.Consumer, name string, workers int, log *slog.Logger, handle func(context.Context, jetstream.Msg)) error {
	msgs, err := cons.Messages(jetstream.PullMaxMessages(2 * workers))
	if err != nil {
		return fmt.Errorf("consume %s: %w", name, err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	work := make(chan jetstream.Msg)
	for range workers {
		wg.Go(func() {
			for msg := range work {
				handle(context.WithoutCancel(ctx), msg)
			}
		})
	}
	wg.Go(func() {
		<-ctx.Done()
		msgs.Drain()
	})
	for {
		msg, err := msgs.Next()
		if errors.Is(err, jetstream.ErrNoHeartbeat) {
			log.Warn("consumer missed its heartbeat", "consumer", name, "err", err)
			continue
		}
		if err != nil {
			close(work)
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("next message of %s: %w", name, err)
		}
		work <- msg
	}
}
