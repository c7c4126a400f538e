package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// ErrFollowerClosed is yielded by the events of a TenantFollower that was
// closed, and returned by its Start.
var ErrFollowerClosed = errors.New("tenant follower closed")

// ErrOtherTenant is returned by TenantFollower.Start for a request of
// another tenant than the follower's.
var ErrOtherTenant = errors.New("request of another tenant")

// TenantFollower follows many runs of one tenant through one consumer on
// the tenant's events (filter agentmesh.events.<tenant>.>, which the
// consumer-create proxy allows a tenant) instead of one consumer a run.
// Each call of its Events or Start has an iterator of its own with the
// semantics of Client.Events: gapless seqs from the seq asked for, a
// batch of chunks yielded one chunk at a time, a terminal status last. A
// goroutine of the follower reads the consumer and hands each event to
// the iterators of its run; an iterator that falls more than
// MaxTenantQueue messages behind, or outlives a follower whose consumer
// could not be created again, reads on through a consumer of its own, as
// Client.Events does.
//
// The consumer receives every event of the tenant, followed or not: it
// pays off for a client that follows many of its tenant's runs at once.
// Its consumer goes on through a failover as Events' does: a missed
// heartbeat, a gap in the deliveries or no event for the refollow
// interval, and the follower follows again on a fresh consumer from the
// last event it read. A TenantFollower is safe for concurrent use; Close
// it when done.
type TenantFollower struct {
	c      *Client
	tenant string
	prefix string // the subject of the tenant's events without the run id
	name   string // the prefix of its consumers' names
	serial int    // consumers created so far; the pump's alone once it runs

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the pump has returned

	mu        sync.Mutex
	runs      map[string][]*tenantSub // the iterators fed, by run id
	pos       uint64                  // stream sequence of the last tenant event handed out
	following int                     // subs caught up and fed from the consumer
	stopped   error                   // why the pump returned; nil while it runs
}

// tenantSub is one iterator's share of a TenantFollower: the events handed
// to it since it registered, when every tenant event stored after stream
// sequence from started to be. Guarded by TenantFollower.mu.
type tenantSub struct {
	runID    string
	from     uint64
	queue    []queued
	over     bool // more than MaxTenantQueue behind: events were dropped
	live     bool // caught up: counted in following
	released bool
	wake     chan struct{} // cap 1: something was queued, or the pump stopped
}

// queued is one event as the consumer delivered it, decoded (or why not).
type queued struct {
	streamSeq uint64
	ev        wire.Event
	err       error
}

// MaxTenantQueue bounds the messages a TenantFollower holds for one
// iterator that has not read them yet; one that falls further behind
// reads on through a consumer of its own.
const MaxTenantQueue = 256

// tenantBuffer is how many messages the tenant's consumer pulls ahead of
// the follower's goroutine.
const tenantBuffer = 256

// FollowTenant starts a TenantFollower of tenant. It blocks until the
// follower's consumer exists (created as Events creates its own, retried
// through a failover until ctx ends); every event stored from then on
// reaches the follower. ctx bounds only that: the follower follows until
// Close.
func (c *Client) FollowTenant(ctx context.Context, tenant string) (*TenantFollower, error) {
	if err := subject.ValidToken("tenant", tenant); err != nil {
		return nil, err
	}
	t := &TenantFollower{
		c: c, tenant: tenant, prefix: c.names.Events(tenant, ""), name: nuid.Next(),
		runs: map[string][]*tenantSub{}, done: make(chan struct{}),
	}
	cons, err := t.consumer(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("follow tenant %s: %w", tenant, err)
	}
	// With DeliverNew the consumer starts right after the stream's last
	// message at its creation, which its info reports as delivered.
	t.pos = cons.CachedInfo().Delivered.Stream
	t.ctx, t.cancel = context.WithCancel(context.Background())
	go t.pump(cons)
	return t, nil
}

// Close stops following: the consumer is deleted, and the iterators still
// following yield ErrFollowerClosed once they have yielded what was handed
// to them. It blocks until the follower's goroutine has returned, and may
// be called more than once.
func (t *TenantFollower) Close() error {
	t.cancel()
	<-t.done
	return nil
}

// Done is closed once the follower's goroutine has returned: after Close,
// or when its consumer could not be created again (Err says why).
func (t *TenantFollower) Done() <-chan struct{} { return t.done }

// Err is nil while the follower follows, ErrFollowerClosed after Close,
// and otherwise the error that stopped it.
func (t *TenantFollower) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopped
}

// Following reports how many iterators the follower feeds from its
// consumer now: those that have read what was stored of their run before
// they started (through a consumer of their own, deleted when done) and
// wait on the follower's.
func (t *TenantFollower) Following() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.following
}

// Events yields a run's events from seq from as Client.Events does (see
// TenantFollower). An iterator first reads what of the run was stored
// before it started on a consumer of its own, then what the follower's
// consumer hands it. After Close it yields ErrFollowerClosed. Breaking out
// of the loop releases what it holds.
func (t *TenantFollower) Events(ctx context.Context, runID string, from uint64) iter.Seq2[wire.Event, error] {
	return func(yield func(wire.Event, error) bool) {
		if err := subject.ValidToken("run_id", runID); err != nil {
			yield(wire.Event{}, err)
			return
		}
		f := t.c.newFollower(t.tenant, runID, from)
		s, err := t.register(runID)
		if err != nil {
			yield(wire.Event{}, fmt.Errorf("follow %s: %w", runID, err))
			return
		}
		defer t.release(s)
		t.iterate(ctx, s, f, true, yield)
	}
}

// Start submits req as Client.Submit does and returns its events from seq
// 1, with the run followed before the submission is published. req's
// tenant must be the follower's (ErrOtherTenant). A run whose id Start
// generated has no events before, so its iterator needs no consumer at
// all; one with a RunID given reads what a submission of the same id made
// earlier stored first, as Events does. Iterate the events (or break out
// of them) to release them: an iterator never iterated holds up to
// MaxTenantQueue of its run's events until the follower is closed.
func (t *TenantFollower) Start(ctx context.Context, req wire.RunRequest) (string, iter.Seq2[wire.Event, error], error) {
	fresh := req.RunID == ""
	msg, err := t.c.submission(&req)
	if err != nil {
		return "", nil, err
	}
	if req.Tenant != t.tenant {
		return "", nil, fmt.Errorf("%w: %q on the follower of %q", ErrOtherTenant, req.Tenant, t.tenant)
	}
	s, err := t.register(req.RunID)
	if err != nil {
		return "", nil, fmt.Errorf("submit %s: %w", req.RunID, err)
	}
	if err := t.c.publish(ctx, msg); err != nil {
		t.release(s)
		return "", nil, fmt.Errorf("submit %s: %w", req.RunID, err)
	}
	f := t.c.newFollower(t.tenant, req.RunID, 1)
	var once atomic.Bool
	return req.RunID, func(yield func(wire.Event, error) bool) {
		sub, catchUp := s, !fresh
		if once.Swap(true) {
			// Iterated again: read on from where the last iteration
			// stopped, as a new iterator.
			var err error
			if sub, err = t.register(req.RunID); err != nil {
				yield(wire.Event{}, fmt.Errorf("follow %s: %w", req.RunID, err))
				return
			}
			catchUp = true
		}
		defer t.release(sub)
		t.iterate(ctx, sub, f, catchUp, yield)
	}, nil
}

// register adds an iterator of runID: every tenant event stored after
// the follower's position from now on is handed to it. After Close it
// returns ErrFollowerClosed; after the pump failed, a sub that is never
// fed, so that the iterator reads on through a consumer of its own.
func (t *TenantFollower) register(runID string) (*tenantSub, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &tenantSub{runID: runID, from: t.pos, wake: make(chan struct{}, 1)}
	switch {
	case errors.Is(t.stopped, ErrFollowerClosed):
		return nil, ErrFollowerClosed
	case t.stopped == nil:
		t.runs[runID] = append(t.runs[runID], s)
	}
	return s, nil
}

// release removes s; it may be called more than once.
func (t *TenantFollower) release(s *tenantSub) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	s.queue = nil
	if s.live {
		t.following--
	}
	subs := t.runs[s.runID]
	for i, o := range subs {
		if o == s {
			subs = append(subs[:i], subs[i+1:]...)
			break
		}
	}
	if len(subs) == 0 {
		delete(t.runs, s.runID)
	} else {
		t.runs[s.runID] = subs
	}
}

// iterate yields s's run's events through f: first, if catchUp, what was
// stored up to s.from, on a consumer of f's own; then what the pump hands
// s; and, once s fell behind or the pump failed, on through f's own
// consumers again.
func (t *TenantFollower) iterate(ctx context.Context, s *tenantSub, f *follower, catchUp bool, yield func(wire.Event, error) bool) {
	if catchUp && s.from > 0 {
		f.until = s.from
		if !t.c.followRun(ctx, f, yield) {
			return
		}
		f.until = 0
	}
	var q []queued
	for {
		var over bool
		var stopped error
		q, over, stopped = t.take(s, q)
		for _, m := range q {
			if m.streamSeq <= f.streamSeq {
				continue // read on the catch-up consumer already
			}
			f.streamSeq = m.streamSeq
			f.read++
			if m.err != nil {
				yield(wire.Event{}, fmt.Errorf("event of %s: %w", s.runID, m.err))
				return
			}
			if f.take(m.ev, yield) {
				return
			}
		}
		switch {
		case errors.Is(stopped, ErrFollowerClosed):
			yield(wire.Event{}, fmt.Errorf("follow %s: %w", s.runID, stopped))
			return
		case over || stopped != nil:
			// Read on, on a consumer of its own, right after the last
			// event handed to s.
			t.release(s)
			t.c.followRun(ctx, f, yield)
			return
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			yield(wire.Event{}, fmt.Errorf("follow %s: %w", s.runID, ctx.Err()))
			return
		}
	}
}

// take marks s caught up and returns what was handed to it, giving it
// prev (read, and no longer needed) to fill next; whether it fell behind;
// and why the pump stopped, if it did.
func (t *TenantFollower) take(s *tenantSub, prev []queued) ([]queued, bool, error) {
	clear(prev)
	if cap(prev) > 2*tenantSpare {
		prev = nil // keep no burst's buffer for good
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !s.live && !s.released && t.stopped == nil {
		s.live = true
		t.following++
	}
	q := s.queue
	s.queue = prev[:0]
	return q, s.over, t.stopped
}

// tenantSpare is about how many queued messages an iterator keeps room for
// between reads.
const tenantSpare = 8

// hand gives the message at streamSeq on subj to the iterators of its
// run. It decodes the event here, once for all of them, and on the
// follower's goroutine: decoding grows the stack of the goroutine that
// does it, and an iterator's caller parks for as long as its run goes on.
func (t *TenantFollower) hand(subj string, streamSeq uint64, data []byte) {
	runID, ok := strings.CutPrefix(subj, t.prefix)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pos = streamSeq
	subs := t.runs[runID]
	if !ok || len(subs) == 0 {
		return
	}
	ev, err := wire.Decode[wire.Event](data)
	for _, s := range subs {
		if s.over {
			continue
		}
		if len(s.queue) >= MaxTenantQueue {
			s.over = true
		} else {
			s.queue = append(s.queue, queued{streamSeq: streamSeq, ev: ev, err: err})
		}
		wake(s)
	}
}

func wake(s *tenantSub) {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// consumer creates the follower's next consumer, as follower.consumer
// does but on the whole tenant's events: the first with DeliverNew, the
// later ones right after the last event handed out.
func (t *TenantFollower) consumer(ctx context.Context, first bool) (jetstream.Consumer, error) {
	t.serial++
	cfg := jetstream.ConsumerConfig{
		Name:              fmt.Sprintf("%s_%d", t.name, t.serial),
		FilterSubject:     t.c.names.TenantEvents(t.tenant),
		DeliverPolicy:     jetstream.DeliverNewPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: 5 * time.Second,
		Replicas:          1,
		MemoryStorage:     true,
	}
	if !first {
		t.mu.Lock()
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, t.pos+1
		t.mu.Unlock()
	}
	return jsretry.Do(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return t.c.js.CreateConsumer(ctx, t.c.names.EventsStream(), cfg)
	})
}

// pump reads the tenant's events, one consumer after the other, until
// Close or a consumer that cannot be created, and then wakes every
// iterator.
func (t *TenantFollower) pump(cons jetstream.Consumer) {
	defer close(t.done)
	var b jsretry.Backoff
	var err error
	for {
		var next followNext
		var read bool
		next, read, err = t.consume(cons)
		if err != nil || next == followDone {
			break
		}
		if next == followLost && !read {
			// As Events: no create request in a tight loop through a
			// failover that lasts.
			if err = b.Wait(t.ctx); err != nil {
				break
			}
		} else {
			b = jsretry.Backoff{}
		}
		if cons, err = t.consumer(t.ctx, false); err != nil {
			break
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = ErrFollowerClosed
	if t.ctx.Err() == nil {
		t.stopped = fmt.Errorf("follow tenant %s: %w", t.tenant, err)
	}
	for _, subs := range t.runs {
		for _, s := range subs {
			wake(s)
		}
	}
}

// consume hands out what one consumer delivers until Close (followDone),
// no event for the refollow interval (followIdle), the consumer or its
// server going away (followLost), or an error; read reports whether it
// delivered anything.
func (t *TenantFollower) consume(cons jetstream.Consumer) (next followNext, read bool, err error) {
	ctx := t.ctx
	msgs, err := cons.Messages(jetstream.WithMessagesErrOnMissingHeartbeat(true), jetstream.PullMaxMessages(tenantBuffer))
	if err != nil {
		t.delete(cons)
		return followDone, false, err
	}
	defer func() {
		msgs.Stop()
		t.delete(cons)
	}()
	stop := context.AfterFunc(ctx, msgs.Stop)
	defer stop()
	var idle atomic.Bool
	quiet := time.AfterFunc(t.c.refollow, func() { idle.Store(true); msgs.Stop() })
	defer quiet.Stop()
	var delivered uint64
	for {
		msg, err := msgs.Next()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return followDone, read, nil
			case t.c.nc.IsClosed():
				return followDone, read, err
			case idle.Load():
				return followIdle, read, nil
			}
			return followLost, read, nil
		}
		md, err := msg.Metadata()
		if err != nil || md.Sequence.Consumer != delivered+1 {
			// Not a delivery of the consumer's, or the server lost
			// deliveries: read on from the last event handed out.
			return followLost, read, nil
		}
		delivered = md.Sequence.Consumer
		read = true
		quiet.Reset(t.c.refollow)
		t.hand(msg.Subject(), md.Sequence.Stream, msg.Data())
	}
}

// delete deletes one of the follower's consumers now.
func (t *TenantFollower) delete(cons jetstream.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = t.c.js.DeleteConsumer(ctx, t.c.names.EventsStream(), cons.CachedInfo().Name)
}
