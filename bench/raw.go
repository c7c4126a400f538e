package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The baseline's stream. It is stored like the mesh's events stream (file
// storage, limits retention) and takes a fresh subject per lane and per
// measurement, so that every ordered consumer starts on an empty subject.
const (
	RawStream   = "BENCH_RAW"
	rawSubjects = "bench.raw.>"
)

// pubWindow bounds the async publishes of one lane awaiting their
// acknowledgement; a full window waits for its older half. It is the same
// bound events.Writer keeps per run, so both sides pipeline alike.
const pubWindow = 256

// Raw is plain JetStream, used as the baseline: a publishing connection
// and a consuming connection (as the mesh's runner and its client have)
// and one stream. Measurements must not overlap: each ends by reaping the
// stream's released consumers.
type Raw struct {
	pub, sub jetstream.JetStream
	subjects atomic.Uint64 // makes every subject fresh
}

// rawMaxPending is the publishing connection's cap on unacknowledged
// async publishes. The nats.go default (4,000, with a 200ms stall wait)
// is less than 32 lanes × pubWindow: lanes contending at the cap can wait
// out the stall and fail with ErrTooManyStalledMsgs on a loaded machine.
// The baseline is meant to be JetStream at its best, so it never reaches
// the cap. (The mesh's services connect through service.Connect, whose
// cap is service.AsyncMaxPending, and events.Writer publishes
// synchronously when that is full.)
const rawMaxPending = 1 << 16

// rawMaxConsumers is RawStream's consumer limit. The server's default,
// 1,000 a stream (JSDefaultMaxConsumersPerStream), is what 1,000 lanes at
// once need with nothing to spare: an ordered consumer that resets under
// load creates its next consumer before the server has forgotten the
// last, and the lanes would fail with "maximum consumers limit reached"
// (err_code 10026). The baseline is meant to be JetStream at its best, so
// it does not meet that limit; the mesh's events stream keeps the default,
// which is one of the limits the 1,000-runs measurements show.
const rawMaxConsumers = 1 << 20

// StartRaw connects twice to srv and creates RawStream. The connections
// are closed when tb ends.
func StartRaw(tb testing.TB, srv *server.Server) *Raw {
	tb.Helper()
	nc, _ := natstest.Connect(tb, srv)
	pub, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(rawMaxPending))
	if err != nil {
		tb.Fatalf("bench: jetstream: %v", err)
	}
	_, sub := natstest.Connect(tb, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pub.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: RawStream, Subjects: []string{rawSubjects},
		Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage,
		MaxConsumers: rawMaxConsumers,
	}); err != nil {
		tb.Fatalf("bench: create stream %s: %v", RawStream, err)
	}
	return &Raw{pub: pub, sub: sub}
}

func (r *Raw) subject(lane string) string {
	return fmt.Sprintf("bench.raw.%d.%s", r.subjects.Add(1), lane)
}

// Throughput runs w.Runs lanes at once. Each lane opens an ordered consumer
// on its own subject, publishes w.Chunks copies of ChunkEvent(w) with
// PublishAsync (at most pubWindow unacknowledged) and receives them all.
// It blocks until every lane has received and every publish is
// acknowledged, and returns the messages received and the time from the
// start to the last lane's end. Its released consumers are reaped
// afterwards, untimed, as the mesh's are.
func (r *Raw) Throughput(ctx context.Context, w Workload) (Throughput, error) {
	if err := w.validate(); err != nil {
		return Throughput{}, err
	}
	payload, err := ChunkEvent(w)
	if err != nil {
		return Throughput{}, err
	}
	errs := make([]error, w.Runs)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range w.Runs {
		wg.Go(func() { errs[i] = r.lane(ctx, r.subject(fmt.Sprint(i)), payload, w.Chunks) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return Throughput{}, err
	}
	if err := reap(ctx, r.sub, RawStream); err != nil {
		return Throughput{}, err
	}
	return Throughput{Items: w.Runs * w.Chunks, Elapsed: elapsed}, nil
}

// lane publishes n copies of payload on subj from one goroutine while
// receiving them through an ordered consumer on this one. A failed publish
// stops the receiving at once.
func (r *Raw) lane(ctx context.Context, subj string, payload []byte, n int) error {
	msgs, stop, err := r.follow(ctx, subj)
	if err != nil {
		return err
	}
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	var pubErr error
	wg.Go(func() {
		if pubErr = r.publish(ctx, subj, payload, n); pubErr != nil {
			stop()
		}
	})
	for got := range n {
		if _, err := msgs.Next(); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			wg.Wait()
			if pubErr != nil {
				return pubErr
			}
			return fmt.Errorf("receive on %s: %d of %d messages, then: %w", subj, got, n, err)
		}
	}
	wg.Wait()
	return pubErr
}

// publish sends n copies of payload on subj asynchronously, keeping at most
// pubWindow unacknowledged, and waits for every acknowledgement.
func (r *Raw) publish(ctx context.Context, subj string, payload []byte, n int) error {
	futs := make([]jetstream.PubAckFuture, 0, pubWindow)
	settle := func(k int) error {
		for _, f := range futs[:k] {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return fmt.Errorf("publish on %s: %w", subj, err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futs = append(futs[:0], futs[k:]...)
		return nil
	}
	for range n {
		f, err := r.pub.PublishAsync(subj, payload)
		if err != nil {
			return fmt.Errorf("publish on %s: %w", subj, err)
		}
		futs = append(futs, f)
		if len(futs) >= pubWindow {
			if err := settle(pubWindow / 2); err != nil {
				return err
			}
		}
	}
	return settle(len(futs))
}

// follow opens an ordered consumer on subj and starts its delivery. The
// returned stop releases it; it may be called more than once, and ctx
// ending stops the delivery too.
func (r *Raw) follow(ctx context.Context, subj string) (jetstream.MessagesContext, func(), error) {
	cons, err := r.sub.OrderedConsumer(ctx, RawStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		return nil, nil, fmt.Errorf("follow %s: %w", subj, err)
	}
	msgs, err := cons.Messages()
	if err != nil {
		return nil, nil, fmt.Errorf("follow %s: %w", subj, err)
	}
	unhook := context.AfterFunc(ctx, msgs.Stop)
	return msgs, func() { unhook(); msgs.Stop() }, nil
}

// HopLatency measures one JetStream hop, the unit the mesh's first chunk
// is counted in: with an ordered consumer already pulling on a fresh
// subject, it publishes one ChunkEvent-sized message at a time with a
// synchronous PublishMsg, which returns once the stream has stored it and
// the PubAck is back, and returns, for each of p.Samples after p.Warmup,
// the time from the start of the publish to the consumer yielding the
// message.
func (r *Raw) HopLatency(ctx context.Context, p Probe) (Latencies, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	payload, err := ChunkEvent(Workload{Runs: 1, Chunks: 1, ChunkBytes: p.ChunkBytes})
	if err != nil {
		return nil, err
	}
	subj := r.subject("hop")
	msgs, stop, err := r.follow(ctx, subj)
	if err != nil {
		return nil, err
	}
	defer stop()
	out := make(Latencies, 0, p.Samples)
	for i := range p.Warmup + p.Samples {
		start := time.Now()
		if _, err := r.pub.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: payload}); err != nil {
			return nil, fmt.Errorf("publish on %s: %w", subj, err)
		}
		if _, err := msgs.Next(); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return nil, fmt.Errorf("receive on %s: sample %d: %w", subj, i, err)
		}
		d := time.Since(start)
		if i >= p.Warmup {
			out = append(out, d)
		}
	}
	stop()
	if err := reap(ctx, r.sub, RawStream); err != nil {
		return nil, err
	}
	return out, nil
}
