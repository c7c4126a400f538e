// Package events writes a run's event stream on
// agentmesh.events.<tenant>.<run_id>: a gapless per-run seq, pipelined chunk
// publishing, and terminal statuses fenced with
// Nats-Expected-Last-Subject-Sequence so that two writers can never both end
// a run.
package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/pkg/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	// ErrEnded is returned by Open for a run whose last event is terminal.
	ErrEnded = errors.New("run has ended")
	// ErrFenced is returned by Terminal when another writer published on the
	// run since this writer's last event: this writer no longer owns the run.
	ErrFenced = errors.New("run was written by another writer")
	// ErrDuplicate is returned when JetStream acknowledges an event this
	// writer had not sent before as a duplicate: another writer already
	// published that seq of the run (under the same Nats-Msg-Id), and this
	// writer's event was dropped. The writer's idea of the run's last seq was
	// wrong; it is unusable from then on (Open a new one).
	ErrDuplicate = errors.New("event seq already used by another writer")
)

// asyncWindow bounds the chunk publishes awaiting their acknowledgement.
const asyncWindow = 256

// Log opens writers on the events stream. It is safe for concurrent use.
type Log struct {
	js     jetstream.JetStream
	names  subject.Names
	stream string
}

// NewLog binds to the events stream, which must exist.
func NewLog(ctx context.Context, js jetstream.JetStream, names subject.Names) (*Log, error) {
	if _, err := js.Stream(ctx, names.EventsStream()); err != nil {
		return nil, fmt.Errorf("open stream %s: %w", names.EventsStream(), err)
	}
	return &Log{js: js, names: names, stream: names.EventsStream()}, nil
}

// Last returns the last event of a run and its stream sequence, or
// jetstream.ErrMsgNotFound if the run has no event. It reads from the
// stream's leader, never a replica that may lag behind, and retries through
// a leader election until ctx ends. It blocks; it is safe for concurrent
// use.
func (l *Log) Last(ctx context.Context, tenant, runID string) (wire.Event, uint64, error) {
	subj := l.names.Events(tenant, runID)
	raw, err := jsretry.Do(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return l.lastFromLeader(ctx, subj)
	})
	if err != nil {
		return wire.Event{}, 0, err
	}
	ev, err := wire.Decode[wire.Event](raw.Data)
	if err != nil {
		return wire.Event{}, 0, fmt.Errorf("decode last event of %s: %w", runID, err)
	}
	return ev, raw.Sequence, nil
}

// New returns a writer for a run with no events yet (the router's).
func (l *Log) New(tenant, runID string) *Writer {
	return &Writer{l: l, subject: l.names.Events(tenant, runID), tenant: tenant, runID: runID}
}

// Open returns a writer that continues a run's events after its last one,
// read from the stream's leader (see Last). It returns ErrEnded if the
// run's last event is terminal.
func (l *Log) Open(ctx context.Context, tenant, runID string) (*Writer, error) {
	w, _, err := l.OpenLast(ctx, tenant, runID)
	return w, err
}

// OpenLast is Open that also returns the run's last event (zero if the
// run has none).
func (l *Log) OpenLast(ctx context.Context, tenant, runID string) (*Writer, wire.Event, error) {
	w := l.New(tenant, runID)
	ev, seq, err := l.Last(ctx, tenant, runID)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return w, wire.Event{}, nil
	case err != nil:
		return nil, wire.Event{}, err
	case ev.Terminal():
		return nil, ev, fmt.Errorf("%w: %s is %s", ErrEnded, runID, ev.Status.State)
	}
	w.seq, w.last = ev.Seq, seq
	return w, ev, nil
}

// Writer publishes one run's events. It is not safe for concurrent use: a
// run has one writer at a time.
//
// Every publish is retried with the same Nats-Msg-Id (so the stream stores
// it once) and capped exponential backoff while JetStream answers as it
// does during a leader election or a reconnect (no responders, 503
// "temporarily unavailable", not the leader, no answer in time), until the
// caller's context ends. An event whose publish failed that way stays the
// writer's: the next call sends it again before anything else, so the seq
// stays gapless whatever the earlier attempts did.
type Writer struct {
	l       *Log
	subject string
	tenant  string
	runID   string
	seq     uint64 // seq of the last event handed to NATS
	last    uint64 // stream sequence of the last acknowledged event
	pending []pending
	err     error // ErrDuplicate or ErrFenced: the writer is done
}

// pending is an event handed to NATS and not yet known to be stored.
type pending struct {
	msg  *nats.Msg
	fut  jetstream.PubAckFuture // in flight asynchronously; nil: to send synchronously
	sent time.Time              // when fut was sent
	// tried: an earlier attempt may have stored msg, so a duplicate
	// acknowledgement is that attempt's, not another writer's.
	tried    bool
	fenced   bool // published only on top of w.last
	terminal bool // a terminal status
}

// Seq is the seq of the last event written.
func (w *Writer) Seq() uint64 { return w.seq }

// msgID is the Nats-Msg-Id of the run's seq-th event.
func (w *Writer) msgID(seq uint64) string { return subject.EventMsgID(w.tenant, w.runID, seq) }

// hand builds the next event's message and makes it pending.
func (w *Writer) hand(ev wire.Event) (*pending, error) {
	ev.V, ev.RunID, ev.Seq, ev.TS = wire.Version, w.runID, w.seq+1, time.Now().UnixNano()
	b, err := wire.Marshal(&ev)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(w.subject)
	msg.Data = b
	msg.Header.Set(jetstream.MsgIDHeader, w.msgID(ev.Seq))
	w.seq++
	w.pending = append(w.pending, pending{msg: msg})
	return &w.pending[len(w.pending)-1], nil
}

// Status publishes a non-terminal status and waits for its acknowledgement
// (and for every chunk before it).
func (w *Writer) Status(ctx context.Context, st wire.Status) error {
	return w.publish(ctx, wire.Event{Kind: wire.KindStatus, Status: &st})
}

// Chunk publishes a chunk and waits for its acknowledgement (and for every
// chunk before it).
func (w *Writer) Chunk(ctx context.Context, c wire.Chunk) error {
	return w.publish(ctx, wire.Event{Kind: wire.KindChunk, Chunk: &c})
}

func (w *Writer) publish(ctx context.Context, ev wire.Event) error {
	if err := w.Flush(ctx); err != nil {
		return err
	}
	if _, err := w.hand(ev); err != nil {
		return err
	}
	return w.Flush(ctx)
}

// ChunkAsync publishes a chunk without waiting, keeping at most asyncWindow
// publishes in flight; when the window is full it waits for the older half.
// Flush or Terminal waits for them all.
func (w *Writer) ChunkAsync(ctx context.Context, c wire.Chunk) error {
	if w.err != nil {
		return w.err
	}
	p, err := w.hand(wire.Event{Kind: wire.KindChunk, Chunk: &c})
	if err != nil {
		return err
	}
	if len(w.pending) > 1 && w.pending[len(w.pending)-2].fut == nil {
		// An earlier event is still to be sent synchronously: keep order.
		return w.Flush(ctx)
	}
	fut, err := w.l.js.PublishMsgAsync(p.msg)
	if err != nil {
		// Not handed over: the connection's async window is full (many runs
		// share it, jetstream.ErrTooManyStalledMsgs) or the connection is
		// down. Send it, and what is before it, synchronously, so order and
		// the gapless seq hold.
		return w.Flush(ctx)
	}
	p.fut, p.sent = fut, time.Now()
	if len(w.pending) >= asyncWindow {
		return w.settle(ctx, asyncWindow/2)
	}
	return nil
}

// Flush waits until every event handed over so far is acknowledged. A
// publish that failed, or was not acknowledged within a bound, is sent
// again synchronously with the same Nats-Msg-Id, so it is stored once and
// the seq stays gapless. It returns ctx's error if ctx ends first; the
// events not yet acknowledged stay pending for the next call.
func (w *Writer) Flush(ctx context.Context) error { return w.settle(ctx, len(w.pending)) }

// settle resolves the first n pending events, in order.
func (w *Writer) settle(ctx context.Context, n int) error {
	if w.err != nil {
		return w.err
	}
	done := 0
	defer func() { w.pending = append(w.pending[:0], w.pending[done:]...) }()
	for ; done < n; done++ {
		p := &w.pending[done]
		if p.fut != nil {
			ack, err := w.await(ctx, p)
			if ctx.Err() != nil {
				return fmt.Errorf("publish event of %s: %w", w.runID, ctx.Err())
			}
			if err == nil {
				if err := w.acked(p, ack); err != nil {
					done++ // never to be stored under its id: drop it
					return err
				}
				continue
			}
			// Failed or unanswered: it may be stored or not. Send it again.
			p.fut, p.tried = nil, true
		}
		ack, err := w.send(ctx, p)
		if err != nil {
			if errors.Is(err, ErrDuplicate) || errors.Is(err, ErrFenced) {
				done++
			}
			return err
		}
		if err := w.acked(p, ack); err != nil {
			done++
			return err
		}
	}
	return nil
}

// await waits for an asynchronous publish's acknowledgement, at most
// jsretry.AttemptTimeout after it was sent.
func (w *Writer) await(ctx context.Context, p *pending) (*jetstream.PubAck, error) {
	t := time.NewTimer(time.Until(p.sent.Add(jsretry.AttemptTimeout)))
	defer t.Stop()
	select {
	case ack := <-p.fut.Ok():
		return ack, nil
	case err := <-p.fut.Err():
		return nil, err
	case <-t.C:
		return nil, jsretry.ErrAckTimeout
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// acked takes a pending event's acknowledgement.
func (w *Writer) acked(p *pending, ack *jetstream.PubAck) error {
	if ack.Duplicate && !p.tried {
		w.err = fmt.Errorf("%w: %s (stream sequence %d)", ErrDuplicate, p.msg.Header.Get(jetstream.MsgIDHeader), ack.Sequence)
		return w.err
	}
	w.last = max(w.last, ack.Sequence)
	return nil
}

// send publishes a pending event synchronously, retrying transient errors
// until ctx ends. A fenced event refused because the subject's last
// sequence moved is decided on what the stream leader has stored: this
// event there (an earlier attempt whose acknowledgement was lost) is
// success; another event after the expected sequence is ErrFenced; and
// nothing after it means the write the leader refused this one for is
// still being replicated, or was lost with a leader that died before
// committing it (a leader checks the expected sequence against writes it
// has not committed yet), so it waits and sends again.
func (w *Writer) send(ctx context.Context, p *pending) (*jetstream.PubAck, error) {
	var wait jsretry.Backoff
	for {
		ack, err := jsretry.Do(ctx, func(ctx context.Context) (*jetstream.PubAck, error) {
			ack, err := w.l.js.PublishMsg(ctx, p.msg)
			var apiErr *jetstream.APIError
			if !p.tried && errors.As(err, &apiErr) && apiErr.ErrorCode == jsretry.ErrCodeMsgIDInProcess {
				// Not this writer's earlier attempt: another writer's.
				w.err = fmt.Errorf("%w: %s (in process)", ErrDuplicate, p.msg.Header.Get(jetstream.MsgIDHeader))
				return nil, w.err
			}
			if err != nil && jsretry.Transient(err) {
				p.tried = true
			}
			return ack, err
		})
		if err == nil {
			return ack, nil
		}
		var apiErr *jetstream.APIError
		if !p.fenced || !errors.As(err, &apiErr) || (apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence && apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return nil, fmt.Errorf("publish event %s: %w", p.msg.Header.Get(jetstream.MsgIDHeader), err)
		}
		expected, _ := strconv.ParseUint(p.msg.Header.Get(jetstream.ExpectedLastSubjSeqHeader), 10, 64)
		last, lerr := jsretry.Do(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
			return w.l.lastFromLeader(ctx, w.subject)
		})
		switch {
		case lerr != nil && !errors.Is(lerr, jetstream.ErrMsgNotFound):
			return nil, fmt.Errorf("publish event %s: refused, and reading the last event: %w", p.msg.Header.Get(jetstream.MsgIDHeader), lerr)
		case lerr == nil && last.Sequence > expected && p.tried && last.Header.Get(jetstream.MsgIDHeader) == p.msg.Header.Get(jetstream.MsgIDHeader):
			return &jetstream.PubAck{Stream: w.l.stream, Sequence: last.Sequence, Duplicate: true}, nil
		case lerr == nil && last.Sequence > expected:
			w.err = fmt.Errorf("%w: %s", ErrFenced, w.runID)
			return nil, w.err
		}
		// Nothing after the expected sequence is stored yet.
		if err := wait.Wait(ctx); err != nil {
			return nil, fmt.Errorf("publish event %s: refused, and nothing after sequence %d is stored: %w", p.msg.Header.Get(jetstream.MsgIDHeader), expected, err)
		}
		p.tried = true
	}
}

// Terminal flushes pending events and publishes st, which must be
// terminal, only if the run's last stored event is this writer's own. It
// returns ErrFenced if another writer got there first. If it returns
// another error (ctx ended during a failover), the terminal status stays
// pending: calling Terminal again sends that same status again, whatever
// st says, since it may already be stored.
func (w *Writer) Terminal(ctx context.Context, st wire.Status) error {
	if !st.State.Terminal() {
		return fmt.Errorf("terminal status with state %s", st.State)
	}
	if n := len(w.pending); n > 0 && w.pending[n-1].terminal {
		return w.Flush(ctx)
	}
	return w.publishFenced(ctx, wire.Event{Kind: wire.KindStatus, Status: &st}, true)
}

// StatusFenced publishes a non-terminal status like Status, but only if
// the run's last stored event is this writer's own (ErrFenced otherwise).
// A runner claims an attempt with it: its running status cannot land
// after another writer ended the run.
func (w *Writer) StatusFenced(ctx context.Context, st wire.Status) error {
	return w.publishFenced(ctx, wire.Event{Kind: wire.KindStatus, Status: &st}, false)
}

// ChunkFenced publishes a chunk like Chunk, but only if the run's last
// stored event is this writer's own (ErrFenced otherwise). A runner
// publishes its first output with it.
func (w *Writer) ChunkFenced(ctx context.Context, c wire.Chunk) error {
	return w.publishFenced(ctx, wire.Event{Kind: wire.KindChunk, Chunk: &c}, false)
}

func (w *Writer) publishFenced(ctx context.Context, ev wire.Event, terminal bool) error {
	if err := w.Flush(ctx); err != nil {
		return err
	}
	p, err := w.hand(ev)
	if err != nil {
		return err
	}
	p.fenced, p.terminal = true, terminal
	p.msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(w.last, 10))
	return w.Flush(ctx)
}
