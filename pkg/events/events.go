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
	"time"

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
)

// asyncWindow bounds the chunk publishes awaiting their acknowledgement.
const asyncWindow = 256

// Log opens writers on the events stream. It is safe for concurrent use.
type Log struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	names  subject.Names
}

// NewLog binds to the events stream, which must exist.
func NewLog(ctx context.Context, js jetstream.JetStream, names subject.Names) (*Log, error) {
	st, err := js.Stream(ctx, names.EventsStream())
	if err != nil {
		return nil, fmt.Errorf("open stream %s: %w", names.EventsStream(), err)
	}
	return &Log{js: js, stream: st, names: names}, nil
}

// Last returns the last event of a run and its stream sequence, or
// jetstream.ErrMsgNotFound if the run has no event.
func (l *Log) Last(ctx context.Context, tenant, runID string) (wire.Event, uint64, error) {
	raw, err := l.stream.GetLastMsgForSubject(ctx, l.names.Events(tenant, runID))
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
	return &Writer{js: l.js, subject: l.names.Events(tenant, runID), tenant: tenant, runID: runID}
}

// Open returns a writer that continues a run's events after its last one. It
// returns ErrEnded if the run's last event is terminal.
func (l *Log) Open(ctx context.Context, tenant, runID string) (*Writer, error) {
	w := l.New(tenant, runID)
	ev, seq, err := l.Last(ctx, tenant, runID)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return w, nil
	case err != nil:
		return nil, err
	case ev.Terminal():
		return nil, fmt.Errorf("%w: %s is %s", ErrEnded, runID, ev.Status.State)
	}
	w.seq, w.last = ev.Seq, seq
	return w, nil
}

// Writer publishes one run's events. It is not safe for concurrent use: a
// run has one writer at a time.
type Writer struct {
	js      jetstream.JetStream
	subject string
	tenant  string
	runID   string
	seq     uint64 // seq of the last event handed to NATS
	last    uint64 // stream sequence of the last acknowledged event
	pending []pending
}

type pending struct {
	msg *nats.Msg
	fut jetstream.PubAckFuture
}

// Seq is the seq of the last event written.
func (w *Writer) Seq() uint64 { return w.seq }

func (w *Writer) next(ev wire.Event) (*nats.Msg, error) {
	ev.V, ev.RunID, ev.Seq, ev.TS = wire.Version, w.runID, w.seq+1, time.Now().UnixNano()
	b, err := wire.Marshal(&ev)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(w.subject)
	msg.Data = b
	msg.Header.Set(jetstream.MsgIDHeader, subject.EventMsgID(w.tenant, w.runID, ev.Seq))
	return msg, nil
}

func (w *Writer) publish(ctx context.Context, ev wire.Event, opts ...jetstream.PublishOpt) error {
	msg, err := w.next(ev)
	if err != nil {
		return err
	}
	ack, err := w.js.PublishMsg(ctx, msg, opts...)
	if err != nil {
		return fmt.Errorf("publish event %d of %s: %w", w.seq+1, w.runID, err)
	}
	w.seq++
	w.last = max(w.last, ack.Sequence)
	return nil
}

// Status publishes a non-terminal status and waits for its acknowledgement.
func (w *Writer) Status(ctx context.Context, st wire.Status) error {
	if err := w.Flush(ctx); err != nil {
		return err
	}
	return w.publish(ctx, wire.Event{Kind: wire.KindStatus, Status: &st})
}

// Chunk publishes a chunk and waits for its acknowledgement.
func (w *Writer) Chunk(ctx context.Context, c wire.Chunk) error {
	if err := w.Flush(ctx); err != nil {
		return err
	}
	return w.publish(ctx, wire.Event{Kind: wire.KindChunk, Chunk: &c})
}

// ChunkAsync publishes a chunk without waiting, keeping at most asyncWindow
// publishes in flight. Flush or Terminal waits for them.
func (w *Writer) ChunkAsync(ctx context.Context, c wire.Chunk) error {
	msg, err := w.next(wire.Event{Kind: wire.KindChunk, Chunk: &c})
	if err != nil {
		return err
	}
	fut, err := w.js.PublishMsgAsync(msg)
	if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
		// The connection's async window is full (many runs share it): wait
		// for this run's own publishes, then send this one synchronously, so
		// order and the gapless seq hold.
		if err := w.Flush(ctx); err != nil {
			return err
		}
		ack, err := w.js.PublishMsg(ctx, msg)
		if err != nil {
			return fmt.Errorf("publish event %d of %s: %w", w.seq+1, w.runID, err)
		}
		w.seq++
		w.last = max(w.last, ack.Sequence)
		return nil
	}
	if err != nil {
		return fmt.Errorf("publish event %d of %s: %w", w.seq+1, w.runID, err)
	}
	w.seq++
	w.pending = append(w.pending, pending{msg: msg, fut: fut})
	if len(w.pending) >= asyncWindow {
		return w.settle(ctx, asyncWindow/2)
	}
	return nil
}

// Flush waits until every chunk published so far is acknowledged. A publish
// that failed is sent again synchronously with the same Nats-Msg-Id, so it
// is stored once and the seq stays gapless.
func (w *Writer) Flush(ctx context.Context) error { return w.settle(ctx, len(w.pending)) }

func (w *Writer) settle(ctx context.Context, n int) error {
	for i := range n {
		p := w.pending[i]
		var seq uint64
		select {
		case ack := <-p.fut.Ok():
			seq = ack.Sequence
		case <-p.fut.Err():
			ack, err := w.js.PublishMsg(ctx, p.msg)
			if err != nil {
				w.pending = w.pending[i:]
				return fmt.Errorf("republish event of %s: %w", w.runID, err)
			}
			seq = ack.Sequence
		case <-ctx.Done():
			w.pending = w.pending[i:]
			return ctx.Err()
		}
		w.last = max(w.last, seq)
	}
	w.pending = append(w.pending[:0], w.pending[n:]...)
	return nil
}

// Terminal flushes pending chunks and publishes st, which must be terminal,
// only if the run's last stored event is this writer's own. It returns
// ErrFenced if another writer got there first.
func (w *Writer) Terminal(ctx context.Context, st wire.Status) error {
	if !st.State.Terminal() {
		return fmt.Errorf("terminal status with state %s", st.State)
	}
	return w.fenced(ctx, wire.Event{Kind: wire.KindStatus, Status: &st})
}

// StatusFenced publishes a non-terminal status like Status, but only if
// the run's last stored event is this writer's own (ErrFenced otherwise).
// A runner claims an attempt with it: its running status cannot land
// after another writer ended the run.
func (w *Writer) StatusFenced(ctx context.Context, st wire.Status) error {
	return w.fenced(ctx, wire.Event{Kind: wire.KindStatus, Status: &st})
}

// ChunkFenced publishes a chunk like Chunk, but only if the run's last
// stored event is this writer's own (ErrFenced otherwise). A runner
// publishes its first output with it.
func (w *Writer) ChunkFenced(ctx context.Context, c wire.Chunk) error {
	return w.fenced(ctx, wire.Event{Kind: wire.KindChunk, Chunk: &c})
}

func (w *Writer) fenced(ctx context.Context, ev wire.Event) error {
	if err := w.Flush(ctx); err != nil {
		return err
	}
	err := w.publish(ctx, ev, jetstream.WithExpectLastSequencePerSubject(w.last))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return fmt.Errorf("%w: %s", ErrFenced, w.runID)
	}
	return err
}
