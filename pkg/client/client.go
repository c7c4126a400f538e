// Package client is the Go API for programs that run work on agentmesh:
// submit a run, stream its events from the start or from a seq, cancel it,
// wait for its terminal status, and read its record.
package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/service/telemetry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/trace"
)

// ErrNotFound is returned for a run the mesh has no record of.
var ErrNotFound = errors.New("run not found")

// Client talks to one deployment. It is safe for concurrent use; the caller
// owns and closes the connection.
type Client struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	names     subject.Names
	apiPrefix string // the JetStream API prefix, "$JS.API" by default
	refollow  time.Duration
	tracing   *telemetry.Tracing // nil: no spans of its own
}

// WithTracerProvider makes the client trace each submission on tp: a
// span ("submit <profile>") whose W3C trace context the submission
// carries, so the mesh's spans of the run are its children. Without it
// the client starts no span and the submission carries the trace context
// of the caller's ctx, if any.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *Client) error {
		c.tracing = telemetry.New(tp)
		return nil
	}
}

// WithTracing makes the client trace each submission with t, as
// WithTracerProvider does, on a Tracing the caller built (telemetry.Setup,
// from the OTEL_* environment) and shuts down. A nil t is tracing off.
func WithTracing(t *telemetry.Tracing) Option {
	return func(c *Client) error {
		c.tracing = t
		return nil
	}
}

// DefaultRefollowAfter is how long Events waits without an event before it
// follows the run again on a fresh consumer.
const DefaultRefollowAfter = 10 * time.Second

// WithRefollowAfter sets how long Events goes without an event before it
// follows the run again on a fresh consumer, from where it left off
// (default DefaultRefollowAfter): a consumer whose server stopped
// delivering without it noticing is replaced by one that reads on. d must
// be at least 100ms.
func WithRefollowAfter(d time.Duration) Option {
	return func(c *Client) error {
		if d < 100*time.Millisecond {
			return fmt.Errorf("%w: refollow after %s is under 100ms", ErrInvalidOption, d)
		}
		c.refollow = d
		return nil
	}
}

// DefaultAPIPrefix is the prefix of the JetStream API subjects in the
// account the mesh runs in.
const DefaultAPIPrefix = "$JS.API"

// Option configures a Client.
type Option func(*Client) error

// WithAPIPrefix makes the client send its JetStream API requests (the
// events consumer and the run record reads) under prefix instead of
// "$JS.API". A tenant whose account reaches the mesh's JetStream through
// imports renamed under a prefix (deploy/nats/accounts.conf,
// "$JS.agentmesh.API") uses it. An empty prefix is the default.
func WithAPIPrefix(prefix string) Option {
	return func(c *Client) error {
		if prefix == "" {
			return nil
		}
		prefix = strings.TrimSuffix(prefix, ".")
		for _, tok := range strings.Split(prefix, ".") {
			if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
				return fmt.Errorf("%w: JetStream API prefix %q is not a subject without wildcards", ErrInvalidOption, prefix)
			}
		}
		c.apiPrefix = prefix
		return nil
	}
}

// ErrInvalidOption is returned by New for an option it cannot use.
var ErrInvalidOption = errors.New("invalid client option")

// New returns a client on nc for the deployment with the given names.
func New(nc *nats.Conn, names subject.Names, opts ...Option) (*Client, error) {
	c := &Client{nc: nc, names: names, apiPrefix: DefaultAPIPrefix, refollow: DefaultRefollowAfter}
	for _, opt := range opts {
		if err := opt(c); err != nil {
			return nil, err
		}
	}
	var err error
	if c.apiPrefix == DefaultAPIPrefix {
		c.js, err = jetstream.New(nc)
	} else {
		c.js, err = jetstream.NewWithAPIPrefix(nc, c.apiPrefix)
	}
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return c, nil
}

// InboxPrefix is the inbox prefix a tenant's connection uses,
// "_INBOX_<tenant>": its replies (PubAcks, pulled events, cancel answers,
// run records) arrive under it, so a tenant's NATS user may subscribe to
// "_INBOX_<tenant>.>" only and never sees another tenant's replies.
func InboxPrefix(tenant string) string { return "_INBOX_" + tenant }

// Connect dials the mesh at url as tenant: with nats.CustomInboxPrefix
// set to InboxPrefix(tenant), then opts (a later CustomInboxPrefix in
// opts wins). The caller closes the connection.
func Connect(url, tenant string, opts ...nats.Option) (*nats.Conn, error) {
	if err := subject.ValidToken("tenant", tenant); err != nil {
		return nil, err
	}
	opts = append([]nats.Option{nats.CustomInboxPrefix(InboxPrefix(tenant))}, opts...)
	return nats.Connect(url, opts...)
}

// NewRunID returns a fresh run id.
func NewRunID() string { return nuid.Next() }

// Submit validates the request's identity at the edge and publishes it
// with Nats-Msg-Id <tenant>.<run_id>. It blocks until JetStream has stored
// it. Submitting the same RunID again in the same tenant is idempotent:
// the mesh runs it once (the same RunID in another tenant is another run). An empty RunID is filled in; the id
// used is returned.
//
// Through a failover (a JetStream leader election, a reconnect to another
// server) Submit publishes the same message again, with the same
// Nats-Msg-Id, with capped exponential backoff until it is stored or ctx
// ends. The submit stream keeps no dedupe window (docs/contract.md §3.2),
// so an attempt that got through and its retry are both stored; the
// router finds the run's record from the first and drops the second as a
// duplicate. Give ctx a deadline: without one Submit retries for as long as
// the failover lasts. On an error that is not a failover's (permissions, a
// missing stream) it returns at once.
func (c *Client) Submit(ctx context.Context, req wire.RunRequest) (string, error) {
	msg, err := c.submission(&req)
	if err != nil {
		return "", err
	}
	endSpan := c.tracing.Submit(ctx, &req, msg.Header)
	err = c.publish(ctx, msg)
	endSpan(err)
	if err != nil {
		return "", fmt.Errorf("submit %s: %w", req.RunID, err)
	}
	return req.RunID, nil
}

// Start submits req as Submit does and returns its events as Events(ctx,
// tenant, runID, 1) would, with the follower's consumer created while the
// submission is published rather than after it: a run's first events are
// not held up behind a consumer create. Iterate the events (or break out
// of them) to release that consumer; one never iterated is forgotten by
// the server a few seconds after it was created.
func (c *Client) Start(ctx context.Context, req wire.RunRequest) (string, iter.Seq2[wire.Event, error], error) {
	msg, err := c.submission(&req)
	if err != nil {
		return "", nil, err
	}
	f := c.newFollower(req.Tenant, req.RunID, 1)
	var (
		cons    jetstream.Consumer
		consErr error
		wg      sync.WaitGroup
	)
	wg.Go(func() { cons, consErr = f.consumer(ctx) })
	endSpan := c.tracing.Submit(ctx, &req, msg.Header)
	pubErr := c.publish(ctx, msg)
	endSpan(pubErr)
	wg.Wait()
	if consErr == nil {
		f.pre = cons
	}
	if pubErr != nil {
		if consErr == nil {
			f.release(ctx, cons)
		}
		return "", nil, fmt.Errorf("submit %s: %w", req.RunID, pubErr)
	}
	return req.RunID, c.iterate(ctx, f), nil
}

// requestContentType is every submission's Content-Type, one shared value.
var requestContentType = wire.TypeRunRequest.ContentType()

// submission validates req at the edge and builds its message.
func (c *Client) submission(req *wire.RunRequest) (*nats.Msg, error) {
	if req.RunID == "" {
		req.RunID = NewRunID()
	}
	// The newest contract this client reads: the run's events may use
	// any of its fields (docs/contract.md §3.9).
	req.V = wire.MaxVersion
	for _, f := range []struct{ name, v string }{{"run_id", req.RunID}, {"tenant", req.Tenant}, {"principal", req.Principal}} {
		if err := subject.ValidToken(f.name, f.v); err != nil {
			return nil, err
		}
	}
	if req.Conversation != "" {
		if err := subject.ValidToken("conversation", req.Conversation); err != nil {
			return nil, err
		}
	}
	b, err := wire.Marshal(req)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(c.names.Submit(req.Tenant))
	msg.Data = b
	msg.Header.Set(jetstream.MsgIDHeader, subject.RunMsgID(req.Tenant, req.RunID))
	requestContentType.Set(msg.Header)
	return msg, nil
}

// publish publishes a submission through a failover (see Submit).
func (c *Client) publish(ctx context.Context, msg *nats.Msg) error {
	_, err := jsretry.Do(ctx, func(ctx context.Context) (*jetstream.PubAck, error) {
		return c.js.PublishMsg(ctx, msg)
	})
	return err
}

// Events yields a run's events in order, starting at seq from (1 for the
// whole run), and ends after the terminal status. It waits for events that
// have not been published yet, and goes on through a failover: when its
// consumer's server goes away (a missed heartbeat, a deleted consumer, a
// gap in the deliveries) or no event comes for the refollow interval
// (WithRefollowAfter), it follows again on a fresh consumer that starts
// right after the last event read. Breaking out of the loop releases the
// consumer. A non-nil error is the last value yielded.
//
// Events yields one chunk per event: a batch of chunks on the wire
// (wire.KindChunks) is yielded as one wire.KindChunk event per seq, and a
// seq already yielded is never yielded again. A writer that retries a
// chunk through a leader election may get it stored after the chunk that
// follows it; Events holds such an event back until the ones before it
// have arrived. Every event before a terminal
// status is stored before it, so a gap still open when the terminal status
// arrives is an error.
func (c *Client) Events(ctx context.Context, tenant, runID string, from uint64) iter.Seq2[wire.Event, error] {
	return c.iterate(ctx, c.newFollower(tenant, runID, from))
}

func (c *Client) newFollower(tenant, runID string, from uint64) *follower {
	return &follower{c: c, tenant: tenant, runID: runID, name: nuid.Next(), next: max(from, 1)}
}

// iterate yields f's run's events (see Events).
func (c *Client) iterate(ctx context.Context, f *follower) iter.Seq2[wire.Event, error] {
	return func(yield func(wire.Event, error) bool) { c.followRun(ctx, f, yield) }
}

// followRun yields f's run's events, following on a consumer of its own and
// following again after each consumer it loses, until the terminal status,
// the caller stopping or an error (yielded), or, when f.until is set, until
// f has read every event stored up to that stream sequence. It reports
// whether it stopped for the last (the caller goes on from there).
func (c *Client) followRun(ctx context.Context, f *follower, yield func(wire.Event, error) bool) (caughtUp bool) {
	var b jsretry.Backoff
	for {
		read := f.read
		next, err := f.follow(ctx, yield)
		if err != nil {
			yield(wire.Event{}, err)
			return false
		}
		switch {
		case next == followDone:
			return false
		case next == followCaught:
			return true
		case next == followIdle || f.read > read:
			b = jsretry.Backoff{}
			continue
		}
		// A consumer that went away before it delivered anything:
		// wait a little before the next, so a failover that lasts is
		// not met with a create request in a tight loop.
		if err := b.Wait(ctx); err != nil {
			yield(wire.Event{}, fmt.Errorf("follow %s: %w", f.runID, err))
			return false
		}
	}
}

// follower is one Events call's position in the run: the next seq to
// yield, the events that arrived ahead of it, and the stream sequence of
// the last event read, after which its next consumer starts. It outlives
// the consumers it follows on.
//
// It is a plain ephemeral pull consumer, not nats.go's ordered consumer:
// in nats.go v1.55 stopping an ordered consumer while it resets (a
// failover) can leave the replacement's pull goroutines running for good.
type follower struct {
	c             *Client
	tenant, runID string
	name          string // the prefix of its consumers' names
	serial        int    // consumers created so far
	next          uint64
	ahead         map[uint64]wire.Event // arrived before an event with a lower seq
	streamSeq     uint64                // of the last event read; 0 before the first
	read          int                   // events read over all consumers
	pre           jetstream.Consumer    // created ahead of the first follow (Start)
	// until, when not 0, ends following once every event of the run
	// stored up to this stream sequence has been read (a TenantFollower's
	// catch-up: its own consumer delivers what comes after).
	until uint64
}

// consumer creates the follower's next consumer: in memory, on one
// replica, without acks, starting after the last event read, and
// forgotten by the server soon after nobody pulls on it. Creating it is
// retried through a failover; the same name makes a repeated create
// whose first attempt got through a no-op.
func (f *follower) consumer(ctx context.Context) (jetstream.Consumer, error) {
	f.serial++
	cfg := jetstream.ConsumerConfig{
		Name:              fmt.Sprintf("%s_%d", f.name, f.serial),
		FilterSubject:     f.c.names.Events(f.tenant, f.runID),
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: 5 * time.Second,
		Replicas:          1,
		MemoryStorage:     true,
	}
	if f.streamSeq > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = f.streamSeq + 1
	}
	return jsretry.Do(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return f.c.js.CreateConsumer(ctx, f.c.names.EventsStream(), cfg)
	})
}

// followNext is what Events does after one consumer.
type followNext int

const (
	followDone   followNext = iota // the terminal status, or the caller stopped
	followIdle                     // no event for the refollow interval: follow again
	followLost                     // the consumer or its server went away: follow again
	followCaught                   // read up to follower.until: the caller goes on
)

// follow reads the run on one consumer until the terminal status or the
// caller stopping (followDone), no event for the refollow interval
// (followIdle), the consumer going away (followLost), every event up to
// f.until read (followCaught), or an error.
func (f *follower) follow(ctx context.Context, yield func(wire.Event, error) bool) (followNext, error) {
	c := f.c
	cons := f.pre
	f.pre = nil
	var (
		msgs jetstream.MessagesContext
		err  error
		next = followDone
	)
	// Set up on a goroutine of its own (see aside), and release there.
	aside(func() {
		if cons == nil {
			if cons, err = f.consumer(ctx); err != nil {
				err = fmt.Errorf("follow %s: %w", f.runID, err)
				return
			}
		}
		if f.until > 0 && cons.CachedInfo().NumPending == 0 {
			// Nothing of the run is stored past where this consumer
			// starts: what comes later is stored after f.until.
			f.release(ctx, cons)
			next = followCaught
			return
		}
		if msgs, err = cons.Messages(jetstream.WithMessagesErrOnMissingHeartbeat(true), jetstream.PullMaxMessages(followBuffer)); err != nil {
			f.release(ctx, cons)
			err = fmt.Errorf("follow %s: %w", f.runID, err)
		}
	})
	if msgs == nil {
		return next, err
	}
	defer aside(func() {
		msgs.Stop()
		f.release(ctx, cons)
	})
	stop := context.AfterFunc(ctx, msgs.Stop)
	defer stop()
	var idle atomic.Bool
	quiet := time.AfterFunc(c.refollow, func() { idle.Store(true); msgs.Stop() })
	defer quiet.Stop()
	var delivered uint64 // the consumer's sequence of the last delivery
	for {
		msg, err := msgs.Next()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return followDone, fmt.Errorf("follow %s: %w", f.runID, ctx.Err())
			case c.nc.IsClosed():
				return followDone, fmt.Errorf("follow %s: %w", f.runID, err)
			case idle.Load():
				return followIdle, nil
			}
			// The consumer, or its server, went away.
			return followLost, nil
		}
		md, err := msg.Metadata()
		if err != nil {
			return followDone, fmt.Errorf("event of %s: %w", f.runID, err)
		}
		if md.Sequence.Consumer != delivered+1 {
			// The server lost deliveries: read on from the last event.
			return followLost, nil
		}
		delivered = md.Sequence.Consumer
		f.streamSeq = md.Sequence.Stream
		f.read++
		quiet.Reset(c.refollow)
		ev, err := wire.Decode[wire.Event](msg.Data())
		if err != nil {
			return followDone, fmt.Errorf("event of %s: %w", f.runID, err)
		}
		if f.take(ev, yield) {
			return followDone, nil
		}
		if f.until > 0 && (md.Sequence.Stream >= f.until || md.NumPending == 0) {
			// Every event stored up to f.until was stored when this
			// consumer was created: none is still pending.
			return followCaught, nil
		}
	}
}

// aside runs f on a goroutine of its own and waits for it. A JetStream
// API request (JSON encoding, the request and its reply) grows the stack
// of the goroutine that makes it to several KiB, and the stack does not
// shrink back all the way while the goroutine stays parked on a deep call
// chain; a follower's caller parks for as long as the run goes on, so its
// set-up and release are made aside, leaving a few KiB less stack for
// each run followed.
func aside(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// release deletes a consumer of the follower's now: a stream allows a
// bounded number of consumers, and a client may follow many runs.
func (f *follower) release(ctx context.Context, cons jetstream.Consumer) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	_ = f.c.js.DeleteConsumer(dctx, f.c.names.EventsStream(), cons.CachedInfo().Name)
	cancel()
}

// followBuffer bounds the events one follower pulls ahead of its reader
// (nats.go's default is 500 messages): a client following a thousand runs
// holds at most this many of each in memory.
const followBuffer = 64

// take yields, in seq order, what of ev comes next (a batch of chunks one
// chunk at a time, skipping the seqs already yielded), then whatever of
// the events held ahead follows on. An event that starts after the next
// seq is held ahead, and one that ends before it is dropped. It reports
// whether following is done: the caller stopped, the terminal status, or
// a gap that cannot close (yielded as an error).
func (f *follower) take(ev wire.Event, yield func(wire.Event, error) bool) bool {
	switch {
	case ev.LastSeq() < f.next:
		return false
	case ev.Seq > f.next && (ev.Terminal() || len(f.ahead) >= maxAhead):
		for first := range ev.Expand() {
			yield(first, fmt.Errorf("event of %s: seq %d, want %d", f.runID, ev.Seq, f.next))
			break
		}
		return true
	case ev.Seq > f.next:
		if f.ahead == nil {
			f.ahead = map[uint64]wire.Event{}
		}
		if _, ok := f.ahead[ev.Seq]; !ok {
			f.ahead[ev.Seq] = ev // the first stored of the seq is the one yielded
		}
		return false
	}
	for {
		for e := range ev.Expand() {
			if e.Seq < f.next {
				continue
			}
			f.next++
			if !yield(e, nil) || e.Terminal() {
				return true
			}
		}
		var ok bool
		if ev, ok = f.nextAhead(); !ok {
			return false
		}
	}
}

// nextAhead removes and returns an event held ahead that holds the next
// seq, dropping those that end before it.
func (f *follower) nextAhead() (wire.Event, bool) {
	if len(f.ahead) == 0 {
		return wire.Event{}, false
	}
	if ev, ok := f.ahead[f.next]; ok {
		delete(f.ahead, f.next)
		return ev, true
	}
	// Only writers that overlapped (a batch cut where another writer's
	// began) leave an event starting before the next seq and ending after.
	for seq, ev := range f.ahead {
		switch {
		case ev.LastSeq() < f.next:
			delete(f.ahead, seq)
		case seq < f.next:
			delete(f.ahead, seq)
			return ev, true
		}
	}
	return wire.Event{}, false
}

// maxAhead bounds the events (a batch counts as one) Events holds back
// waiting for a lower seq.
const maxAhead = 1024

// Wait blocks until the run ends and returns its terminal status.
func (c *Client) Wait(ctx context.Context, tenant, runID string) (wire.Status, error) {
	for ev, err := range c.Events(ctx, tenant, runID, 1) {
		if err != nil {
			return wire.Status{}, err
		}
		if ev.Terminal() {
			return *ev.Status, nil
		}
	}
	return wire.Status{}, fmt.Errorf("follow %s: stream ended without a terminal status", runID)
}

// Cancel asks the mesh to cancel a run, queued or running, and returns the
// answer: Cancelled if this request ended it, Ended if it had already ended.
// It blocks until a router answered (a running run answers once its
// transport is torn down).
func (c *Client) Cancel(ctx context.Context, tenant, runID string) (wire.CancelReply, error) {
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("run_id", runID)); err != nil {
		return wire.CancelReply{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	msg, err := c.nc.RequestWithContext(ctx, c.names.Cancel(tenant, runID), nil)
	if err != nil {
		return wire.CancelReply{}, fmt.Errorf("cancel %s: %w", runID, err)
	}
	reply, err := wire.Decode[wire.CancelReply](msg.Data)
	if err != nil {
		return wire.CancelReply{}, fmt.Errorf("cancel %s: reply: %w", runID, err)
	}
	if reply.Error != nil {
		return reply, reply.Error
	}
	return reply, nil
}

// Status returns the run's record. It reads the record with one JetStream
// direct get, so it needs no access to the rest of the runs bucket.
func (c *Client) Status(ctx context.Context, tenant, runID string) (wire.RunRecord, error) {
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("run_id", runID)); err != nil {
		return wire.RunRecord{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	b, err := c.kvGet(ctx, c.names.RunRecordGet(tenant, runID))
	switch {
	case errors.Is(err, errNoKey):
		return wire.RunRecord{}, fmt.Errorf("%w: %s for tenant %s", ErrNotFound, runID, tenant)
	case err != nil:
		return wire.RunRecord{}, fmt.Errorf("read run %s: %w", runID, err)
	}
	rec, err := wire.Decode[wire.RunRecord](b)
	if err != nil || rec.State.Terminal() {
		return rec, err
	}
	return c.withLastEvent(ctx, rec)
}

// errNoKey is kvGet's answer for a key never written, deleted or purged.
var errNoKey = errors.New("no such key")

// kvGet reads a key's value with one JetStream direct get, its subject
// (subj) named under the default API prefix.
func (c *Client) kvGet(ctx context.Context, subj string) ([]byte, error) {
	msg, err := c.nc.RequestWithContext(ctx, c.apiPrefix+strings.TrimPrefix(subj, DefaultAPIPrefix), nil)
	if err != nil {
		return nil, err
	}
	switch status := msg.Header.Get("Status"); {
	case status == "404":
		return nil, errNoKey
	case status != "":
		return nil, fmt.Errorf("status %s %s", status, msg.Header.Get("Description"))
	}
	if op := msg.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return nil, errNoKey
	}
	return msg.Data, nil
}

// Current is rec, a record read elsewhere (a watch of the runs bucket),
// as Status would give it: a run not ended overlaid with its last event
// (withLastEvent), an ended run's record as it is. It reads one event,
// with one JetStream direct get.
func (c *Client) Current(ctx context.Context, rec wire.RunRecord) (wire.RunRecord, error) {
	if rec.State.Terminal() {
		return rec, nil
	}
	return c.withLastEvent(ctx, rec)
}

// withLastEvent is rec, the record of a run not ended, as its last event
// says the run is now: the mesh writes a record when the run is created
// and when it ends, and in between the events say who holds it. A
// runner's event (wire.RunnerHeader) makes it running, owned by that
// runner, in that attempt; a chunk makes it committed. An event that
// cannot be read leaves rec as it is.
func (c *Client) withLastEvent(ctx context.Context, rec wire.RunRecord) (wire.RunRecord, error) {
	msg, ev, err := c.lastEvent(ctx, rec.Tenant, rec.RunID)
	if err != nil {
		return rec, nil
	}
	if runner := msg.Header.Get(wire.RunnerHeader); runner != "" {
		rec.State, rec.Owner = wire.StateRunning, runner
		if a, err := strconv.Atoi(msg.Header.Get(wire.AttemptHeader)); err == nil {
			rec.Attempt = max(rec.Attempt, a)
		}
	}
	if ev.Kind == wire.KindChunk || ev.Kind == wire.KindChunks {
		rec.Committed = true
	}
	return rec, nil
}

// LastEvent returns the run's last stored event (a batch as it is stored:
// its LastSeq is the run's last seq), with one JetStream direct get, so a
// tenant may read it for its own runs. A run with no events stored (none
// yet, or they aged out of the events stream) is ErrNotFound.
func (c *Client) LastEvent(ctx context.Context, tenant, runID string) (wire.Event, error) {
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("run_id", runID)); err != nil {
		return wire.Event{}, err
	}
	_, ev, err := c.lastEvent(ctx, tenant, runID)
	return ev, err
}

func (c *Client) lastEvent(ctx context.Context, tenant, runID string) (*nats.Msg, wire.Event, error) {
	subj := c.apiPrefix + strings.TrimPrefix(c.names.LastEventGet(tenant, runID), DefaultAPIPrefix)
	msg, err := c.nc.RequestWithContext(ctx, subj, nil)
	if err != nil {
		return nil, wire.Event{}, fmt.Errorf("read the last event of %s: %w", runID, err)
	}
	switch status := msg.Header.Get("Status"); {
	case status == "404":
		return nil, wire.Event{}, fmt.Errorf("%w: no events of %s for tenant %s", ErrNotFound, runID, tenant)
	case status != "":
		return nil, wire.Event{}, fmt.Errorf("read the last event of %s: status %s %s", runID, status, msg.Header.Get("Description"))
	}
	ev, err := wire.Decode[wire.Event](msg.Data)
	if err != nil {
		return nil, wire.Event{}, fmt.Errorf("the last event of %s: %w", runID, err)
	}
	return msg, ev, nil
}
