// Package client is the Go API for programs that run work on agentmesh:
// submit a run, stream its events from the start or from a seq, cancel it,
// wait for its terminal status, and read its record.
package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/pkg/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
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
}

// DefaultRefollowAfter is how long Events waits without an event before it
// follows the run again on a fresh consumer.
const DefaultRefollowAfter = 10 * time.Second

// WithRefollowAfter sets how long Events goes without an event before it
// follows the run again on a fresh consumer, from where it left off
// (default DefaultRefollowAfter). After a failover, nats.go's ordered
// consumer can stay stalled in its reset for minutes with no consumer on
// the server; a fresh one reads on at once. d must be at least 100ms.
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
// ends; a duplicate acknowledgement then means an earlier attempt got
// through. Give ctx a deadline: without one Submit retries for as long as
// the failover lasts. On an error that is not a failover's (permissions, a
// missing stream) it returns at once.
func (c *Client) Submit(ctx context.Context, req wire.RunRequest) (string, error) {
	if req.RunID == "" {
		req.RunID = NewRunID()
	}
	req.V = wire.Version
	for _, f := range []struct{ name, v string }{{"run_id", req.RunID}, {"tenant", req.Tenant}, {"principal", req.Principal}} {
		if err := subject.ValidToken(f.name, f.v); err != nil {
			return "", err
		}
	}
	if req.Conversation != "" {
		if err := subject.ValidToken("conversation", req.Conversation); err != nil {
			return "", err
		}
	}
	b, err := wire.Marshal(&req)
	if err != nil {
		return "", err
	}
	msg := nats.NewMsg(c.names.Submit(req.Tenant))
	msg.Data = b
	msg.Header.Set(jetstream.MsgIDHeader, subject.RunMsgID(req.Tenant, req.RunID))
	if _, err := jsretry.Do(ctx, func(ctx context.Context) (*jetstream.PubAck, error) {
		return c.js.PublishMsg(ctx, msg)
	}); err != nil {
		return "", fmt.Errorf("submit %s: %w", req.RunID, err)
	}
	return req.RunID, nil
}

// Events yields a run's events in order, starting at seq from (1 for the
// whole run), and ends after the terminal status. It waits for events that
// have not been published yet, and through a failover (the stream's
// consumer is recreated where it left off; and with no event for the
// refollow interval, WithRefollowAfter, it follows again on a fresh one). Breaking out of the loop
// releases the consumer. A non-nil error is the last value yielded.
//
// A writer that retries a chunk through a leader election may get it
// stored after the chunk that follows it; Events holds such an event back
// until the ones before it have arrived. Every event before a terminal
// status is stored before it, so a gap still open when the terminal status
// arrives is an error.
func (c *Client) Events(ctx context.Context, tenant, runID string, from uint64) iter.Seq2[wire.Event, error] {
	return func(yield func(wire.Event, error) bool) {
		f := follower{c: c, tenant: tenant, runID: runID, next: max(from, 1), ahead: map[uint64]wire.Event{}}
		for {
			again, err := f.follow(ctx, yield)
			if err != nil {
				yield(wire.Event{}, err)
				return
			}
			if !again {
				return
			}
		}
	}
}

// follower is one Events call's position in the run: the next seq to
// yield and the events that arrived ahead of it. It outlives the consumers
// it follows on.
type follower struct {
	c             *Client
	tenant, runID string
	next          uint64
	ahead         map[uint64]wire.Event // arrived before an event with a lower seq
}

// follow reads the run on one ordered consumer until the terminal status
// (false, nil), the caller stopping (false, nil), an error, or no event for
// the refollow interval (true, nil: follow again on a fresh consumer).
func (f *follower) follow(ctx context.Context, yield func(wire.Event, error) bool) (again bool, err error) {
	c := f.c
	cons, err := c.js.OrderedConsumer(ctx, c.names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.names.Events(f.tenant, f.runID)},
		// The server forgets the consumer soon after we stop pulling,
		// even if the delete below does not reach it.
		InactiveThreshold: 5 * time.Second,
	})
	if err != nil {
		return false, fmt.Errorf("follow %s: %w", f.runID, err)
	}
	msgs, err := cons.Messages()
	if err != nil {
		return false, fmt.Errorf("follow %s: %w", f.runID, err)
	}
	defer func() {
		msgs.Stop()
		// Free the server-side consumer now: a stream allows a bounded
		// number of consumers, and a client may follow many runs.
		if info := cons.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = c.js.DeleteConsumer(dctx, c.names.EventsStream(), info.Name)
			cancel()
		}
	}()
	stop := context.AfterFunc(ctx, msgs.Stop)
	defer stop()
	var idle atomic.Bool
	quiet := time.AfterFunc(c.refollow, func() { idle.Store(true); msgs.Stop() })
	defer quiet.Stop()
	for {
		msg, err := msgs.Next()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return false, fmt.Errorf("follow %s: %w", f.runID, ctx.Err())
			case idle.Load():
				return true, nil
			}
			return false, fmt.Errorf("follow %s: %w", f.runID, err)
		}
		quiet.Reset(c.refollow)
		ev, err := wire.Decode[wire.Event](msg.Data())
		if err != nil {
			return false, fmt.Errorf("event of %s: %w", f.runID, err)
		}
		switch {
		case ev.Seq < f.next:
			continue
		case ev.Seq > f.next && (ev.Terminal() || len(f.ahead) >= maxAhead):
			yield(ev, fmt.Errorf("event of %s: seq %d, want %d", f.runID, ev.Seq, f.next))
			return false, nil
		case ev.Seq > f.next:
			f.ahead[ev.Seq] = ev
			continue
		}
		for ok := true; ok; ev, ok = f.ahead[f.next] {
			delete(f.ahead, f.next)
			f.next++
			if !yield(ev, nil) || ev.Terminal() {
				return false, nil
			}
		}
	}
}

// maxAhead bounds the events Events holds back waiting for a lower seq.
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
	// RunRecordGet names the subject under the default API prefix.
	subj := c.apiPrefix + strings.TrimPrefix(c.names.RunRecordGet(tenant, runID), DefaultAPIPrefix)
	msg, err := c.nc.RequestWithContext(ctx, subj, nil)
	if err != nil {
		return wire.RunRecord{}, fmt.Errorf("read run %s: %w", runID, err)
	}
	switch status := msg.Header.Get("Status"); {
	case status == "404":
		return wire.RunRecord{}, fmt.Errorf("%w: %s for tenant %s", ErrNotFound, runID, tenant)
	case status != "":
		return wire.RunRecord{}, fmt.Errorf("read run %s: status %s %s", runID, status, msg.Header.Get("Description"))
	}
	if op := msg.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return wire.RunRecord{}, fmt.Errorf("%w: %s for tenant %s", ErrNotFound, runID, tenant)
	}
	return wire.Decode[wire.RunRecord](msg.Data)
}
