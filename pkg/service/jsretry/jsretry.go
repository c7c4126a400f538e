// Package jsretry retries JetStream requests through a leader election or
// a reconnect: it says which errors such a failover produces, and repeats a
// request with capped exponential backoff while they last, until the
// caller's context ends.
package jsretry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// AttemptTimeout bounds one attempt. A JetStream leader election takes a
// few seconds (deploy/README.md, "Failover"); a request in flight when the
// leader went away gets no answer, so each attempt is bounded on its own
// and made again.
const AttemptTimeout = 2 * time.Second

const (
	backoffMin = 20 * time.Millisecond
	backoffMax = time.Second
)

// ErrAckTimeout is an asynchronous publish that got no acknowledgement
// within AttemptTimeout.
var ErrAckTimeout = errors.New("no acknowledgement in time")

// ErrCodeMsgIDInProcess is JetStream's "duplicate message id is in
// process" (409): a publish with the same Nats-Msg-Id is still being
// replicated. Made again once that one is stored, the publish is
// acknowledged as a duplicate.
const ErrCodeMsgIDInProcess jetstream.ErrorCode = 10158

// Transient reports whether err is one a JetStream leader election or a
// reconnect produces: the request may be answered if made again. Whether
// the caller still wants it made again is the caller's context's business.
func Transient(err error) bool {
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, jetstream.ErrAsyncPublishTimeout), errors.Is(err, ErrAckTimeout),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrReconnectBufExceeded):
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10008, // JetStream system temporarily unavailable (no leader yet)
			10009, // JetStream cluster can not handle request (not the leader)
			10163, // expected last sequence per subject temporarily unavailable (a new leader catching up)
			ErrCodeMsgIDInProcess:
			return true
		}
	}
	return false
}

// Backoff is a capped exponential backoff with jitter, so that the writers
// of many runs do not retry in step: Min doubling to Max, each wait drawn
// from the upper half of the current interval. The zero value is ready to
// use, with Min 20 ms and Max 1 s.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// Wait sleeps for the next backoff interval, or returns ctx's error if ctx
// ends first.
func (b *Backoff) Wait(ctx context.Context) error {
	if b.next == 0 {
		b.next = cmp.Or(b.Min, backoffMin)
	}
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(2*b.next, cmp.Or(b.Max, backoffMax))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Do calls f, with a context bounded by AttemptTimeout each time, until f
// returns nil or an error that is not Transient, or ctx ends. The error
// returned when ctx ends wraps both ctx's error and f's last one. It blocks.
func Do[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	var b Backoff
	for {
		actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
		v, err := f(actx)
		cancel()
		if err == nil || !Transient(err) {
			return v, err
		}
		if werr := b.Wait(ctx); werr != nil {
			return v, fmt.Errorf("%w; last attempt: %w", werr, err)
		}
	}
}
