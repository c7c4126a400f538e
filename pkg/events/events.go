// Package events writes a run's event stream on
// agentmesh.events.<tenant>.<run_id>: a gapless per-run seq, chunks
// batched into one message and published pipelined, and terminal statuses
// fenced with Nats-Expected-Last-Subject-Sequence so that two writers can
// never both end a run.
package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
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

// Chunks that ChunkAsync takes are batched: the consecutive chunks of a
// run go out as one wire.KindChunks event (a lone chunk as a plain
// wire.KindChunk event) at most BatchWindow after the first of them, or as
// soon as their encoding reaches BatchBytes, whichever comes first, and
// before any other event of the writer.
const (
	BatchWindow = time.Millisecond
	// BatchBytes bounds a batch's encoded chunks: a chunk that would take
	// a batch past it starts the next batch, and a chunk that large goes
	// alone.
	BatchBytes = 64 << 10
)

// Log opens writers on the events stream. It is safe for concurrent use.
type Log struct {
	js     jetstream.JetStream
	names  subject.Names
	stream string
	// window and batchBytes are BatchWindow and BatchBytes (tests change
	// them).
	window     time.Duration
	batchBytes int
}

// NewLog binds to the events stream, which must exist.
func NewLog(ctx context.Context, js jetstream.JetStream, names subject.Names) (*Log, error) {
	if _, err := js.Stream(ctx, names.EventsStream()); err != nil {
		return nil, fmt.Errorf("open stream %s: %w", names.EventsStream(), err)
	}
	return &Log{js: js, names: names, stream: names.EventsStream(), window: BatchWindow, batchBytes: BatchBytes}, nil
}

// Last returns the last event of a run and its stream sequence, or
// jetstream.ErrMsgNotFound if the run has no event. The last event may be
// a batch of chunks (wire.KindChunks): its LastSeq is the run's last seq;
// a batch of statuses (wire.KindStatuses) is returned as its last status,
// a wire.KindStatus event of that seq. It reads from the
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
	ev, err := decodeLast(raw.Data, runID)
	return ev, raw.Sequence, err
}

// decodeLast decodes a run's last stored message: a batch of statuses is
// given as its last status.
func decodeLast(b []byte, runID string) (wire.Event, error) {
	ev, err := wire.Decode[wire.Event](b)
	if err != nil {
		return wire.Event{}, fmt.Errorf("decode last event of %s: %w", runID, err)
	}
	if ev.Kind == wire.KindStatuses {
		st := ev.Statuses[len(ev.Statuses)-1]
		ev = wire.Event{V: ev.V, RunID: ev.RunID, Seq: ev.Last, TS: ev.TS, Kind: wire.KindStatus, Status: &st}
	}
	return ev, nil
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
	w.seq, w.last = ev.LastSeq(), seq
	return w, ev, nil
}

// Writer publishes one run's events. Its methods serialize, so it is safe
// for concurrent use, but a run has one writer at a time and the seqs
// follow the order of the calls.
//
// Every publish is retried with the same Nats-Msg-Id (so the stream stores
// it once) and capped exponential backoff while JetStream answers as it
// does during a leader election or a reconnect (no responders, 503
// "temporarily unavailable", not the leader, no answer in time), until the
// caller's context ends. An event whose publish failed that way stays the
// writer's: the next call sends it again before anything else, so the seq
// stays gapless whatever the earlier attempts did.
//
// Chunks given to ChunkAsync are batched (BatchWindow, BatchBytes): a
// batch is one message, with the Nats-Msg-Id of its first seq, and once
// cut it is never changed, so a retry stores it once. The writer's own
// timer publishes a batch whose window has passed, so a lone chunk is not
// held back waiting for the next call.
type Writer struct {
	l       *Log
	subject string
	tenant  string
	runID   string

	// mu guards what follows: the batch timer publishes from its own
	// goroutine.
	mu      sync.Mutex
	seq     uint64 // seq of the last event handed over, the open batch's included
	last    uint64 // stream sequence of the last acknowledged event
	pending []pending
	err     error  // ErrDuplicate or ErrFenced: the writer is done
	runner  string // Author's, stamped on each message; "" for none
	epoch   string
	attempt string
	sandbox string // StampSandbox's
	// unbatched: the run's submitter reads a contract version below
	// wire.BatchVersion (ReaderVersion), so every chunk and every status
	// is an event of its own.
	unbatched bool

	batch  wire.ChunkBatch // the open batch: chunks not handed to NATS yet
	chunk  wire.Chunk      // the chunk ChunkAsync encodes
	first  uint64          // seq of the open batch's first chunk
	opened time.Time       // when its first chunk came
	timer  *time.Timer     // publishes the open batch once its window has passed; nil before the first batch
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

// Seq is the seq of the last event written: handed to the writer, whether
// or not it is published yet.
func (w *Writer) Seq() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq
}

// msgID is the Nats-Msg-Id of the run's event (or batch) that starts at
// seq.
func (w *Writer) msgID(seq uint64) string { return subject.EventMsgID(w.tenant, w.runID, seq) }

// hand builds the next event's message and makes it pending, after the
// open batch's. The caller holds w.mu.
func (w *Writer) hand(ev wire.Event) (*pending, error) {
	if err := w.cut(); err != nil {
		return nil, err
	}
	if w.sandbox != "" {
		ev = stampSandbox(ev, w.sandbox)
	}
	ev.V, ev.RunID, ev.Seq, ev.TS = wire.VersionOf(&ev), w.runID, w.seq+1, time.Now().UnixNano()
	if ev.Kind == wire.KindStatuses {
		ev.Last = ev.Seq + uint64(len(ev.Statuses)) - 1
	}
	b, err := wire.Marshal(&ev)
	if err != nil {
		return nil, err
	}
	w.seq = ev.LastSeq()
	w.pending = append(w.pending, pending{msg: w.message(b, ev.Seq)})
	return &w.pending[len(w.pending)-1], nil
}

// eventContentType is every event's Content-Type, one shared value.
var eventContentType = wire.TypeEvent.ContentType()

// message is the NATS message of the encoded event that starts at seq.
func (w *Writer) message(b []byte, seq uint64) *nats.Msg {
	msg := nats.NewMsg(w.subject)
	msg.Data = b
	msg.Header.Set(jetstream.MsgIDHeader, w.msgID(seq))
	eventContentType.Set(msg.Header)
	if w.runner != "" {
		msg.Header.Set(RunnerHeader, w.runner)
		msg.Header.Set(EpochHeader, w.epoch)
		msg.Header.Set(AttemptHeader, w.attempt)
	}
	return msg
}

// cut hands the open batch over as one pending event and publishes it
// asynchronously, unless an earlier event is still to be sent
// synchronously (order) or NATS does not take it: then the next settle
// sends it. A chunk the batch held back opens the next batch. The caller
// holds w.mu.
func (w *Writer) cut() error {
	n := w.batch.Len()
	if n == 0 {
		return nil
	}
	b, err := w.batch.Encode(w.runID, w.first, w.opened.UnixNano())
	if err != nil {
		return fmt.Errorf("publish chunks %d to %d of %s: %w", w.first, w.first+uint64(n)-1, w.runID, err)
	}
	w.pending = append(w.pending, pending{msg: w.message(b, w.first)})
	w.batch.Reset()
	w.first += uint64(n)
	if w.batch.Len() > 0 {
		w.open()
	} else {
		w.stopTimer()
	}
	if k := len(w.pending); k > 1 && w.pending[k-2].fut == nil {
		return nil
	}
	p := &w.pending[len(w.pending)-1]
	if fut, err := w.l.js.PublishMsgAsync(p.msg); err == nil {
		p.fut, p.sent = fut, time.Now()
	}
	// Else not handed over: the connection's async window is full (many
	// runs share it, jetstream.ErrTooManyStalledMsgs) or the connection is
	// down. The next settle sends it, and what is before it,
	// synchronously, so order and the gapless seq hold.
	return nil
}

// open starts the window of a batch whose first chunk just came.
func (w *Writer) open() {
	w.opened = time.Now()
	if w.timer == nil {
		w.timer = time.AfterFunc(w.l.window, w.expire)
		return
	}
	w.timer.Reset(w.l.window)
}

// stopTimer stops the batch timer, if there is one (an unbatched writer
// has none).
func (w *Writer) stopTimer() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// expire is the batch timer's: it cuts the open batch if its window has
// passed. It never waits for an acknowledgement, so it holds w.mu only
// while the writer's caller does not. (It runs on the timer's goroutine,
// which exits as soon as it has: nothing to wait for.)
func (w *Writer) expire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	// A batch opened after this timer fired has its own firing to come.
	if w.err != nil || w.batch.Len() == 0 || time.Since(w.opened) < w.l.window {
		return
	}
	if err := w.cut(); err != nil {
		w.err = err
	}
}

// Status publishes a non-terminal status and waits for its acknowledgement
// (and for every chunk before it).
func (w *Writer) Status(ctx context.Context, st wire.Status) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.publish(ctx, wire.Event{Kind: wire.KindStatus, Status: &st})
}

// Chunk publishes a chunk on its own and waits for its acknowledgement
// (and for every chunk before it).
func (w *Writer) Chunk(ctx context.Context, c wire.Chunk) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.publish(ctx, wire.Event{Kind: wire.KindChunk, Chunk: &c})
}

func (w *Writer) publish(ctx context.Context, ev wire.Event) error {
	if err := w.flush(ctx); err != nil {
		return err
	}
	if _, err := w.hand(ev); err != nil {
		return err
	}
	return w.flush(ctx)
}

// ChunkAsync adds a chunk to the open batch without waiting (see
// BatchWindow), keeping at most asyncWindow publishes in flight; when the
// window is full it waits for the older half. Flush, Terminal or any other
// publish sends the open batch first and waits for them all. An error
// from an earlier asynchronous publish, or a chunk that cannot be encoded,
// is returned here; the chunk is then not the writer's.
func (w *Writer) ChunkAsync(ctx context.Context, c wire.Chunk) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	// Encoded from a field, not from &c: c stays off the heap. (The field
	// holds the last chunk until the next, or until the writer goes.)
	w.chunk = c
	added, err := w.batch.Add(&w.chunk, w.l.batchBytes)
	if err != nil {
		return fmt.Errorf("publish chunk %d of %s: %w", w.seq+1, w.runID, err)
	}
	w.seq++
	switch {
	case !added:
		// c would take the batch past its size: the batch goes, c opens
		// the next.
		if err := w.cut(); err != nil {
			return err
		}
	case w.batch.Len() == 1 && w.unbatched:
		w.first, w.opened = w.seq, time.Now()
	case w.batch.Len() == 1:
		w.first = w.seq
		w.open()
	}
	if w.batch.Size() >= w.l.batchBytes || w.unbatched {
		if err := w.cut(); err != nil {
			// Only a chunk too large for a message on its own fails so:
			// it is not the writer's.
			w.seq -= uint64(w.batch.Len())
			w.batch.Reset()
			w.stopTimer()
			return err
		}
	}
	if n := len(w.pending); n > 0 && w.pending[n-1].fut == nil {
		// An earlier event is still to be sent synchronously: keep order.
		return w.flush(ctx)
	}
	if len(w.pending) >= asyncWindow {
		return w.settle(ctx, asyncWindow/2)
	}
	return nil
}

// Flush waits until every event handed over so far is acknowledged. A
// publish that failed, or was not acknowledged within a bound, is sent
// again synchronously with the same Nats-Msg-Id, so it is stored once and
// the seq stays gapless. It returns ctx's error if ctx ends first; the
// events not yet acknowledged stay pending for the next call. It sends
// the open batch first.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flush(ctx)
}

func (w *Writer) flush(ctx context.Context) error {
	if w.err != nil {
		return w.err
	}
	if err := w.cut(); err != nil {
		return err
	}
	return w.settle(ctx, len(w.pending))
}

// settle resolves the first n pending events, in order. The caller holds
// w.mu.
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
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.pending); n > 0 && w.pending[n-1].terminal && w.batch.Len() == 0 {
		return w.flush(ctx)
	}
	return w.publishFenced(ctx, wire.Event{Kind: wire.KindStatus, Status: &st}, true)
}

// StatusFenced publishes a non-terminal status like Status, but only if
// the run's last stored event is this writer's own (ErrFenced otherwise).
// A runner claims an attempt with it: its running status cannot land
// after another writer ended the run.
func (w *Writer) StatusFenced(ctx context.Context, st wire.Status) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.publishFenced(ctx, wire.Event{Kind: wire.KindStatus, Status: &st}, false)
}

// StatusesFenced publishes sts, two or more non-terminal statuses, as one
// message (a wire.KindStatuses event of the next len(sts) seqs), fenced
// like StatusFenced: all of them or none are stored. A router publishes a
// validated run's accepted and routed with it. An unbatched writer
// (ReaderVersion below wire.BatchVersion) publishes them one event each,
// each fenced on the one before: a failure part way leaves the first ones
// stored.
func (w *Writer) StatusesFenced(ctx context.Context, sts ...wire.Status) error {
	if len(sts) < 2 {
		return fmt.Errorf("publish statuses of %s: %d statuses, at least 2", w.runID, len(sts))
	}
	for _, st := range sts {
		if st.State.Terminal() {
			return fmt.Errorf("publish statuses of %s: %s is terminal", w.runID, st.State)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.unbatched {
		for i := range sts {
			if err := w.publishFenced(ctx, wire.Event{Kind: wire.KindStatus, Status: &sts[i]}, false); err != nil {
				return err
			}
		}
		return nil
	}
	return w.publishFenced(ctx, wire.Event{Kind: wire.KindStatuses, Statuses: sts}, false)
}

// ChunkFenced publishes a chunk like Chunk, on its own and at once, but
// only if the run's last stored event is this writer's own (ErrFenced
// otherwise). A runner publishes its first output with it.
func (w *Writer) ChunkFenced(ctx context.Context, c wire.Chunk) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.publishFenced(ctx, wire.Event{Kind: wire.KindChunk, Chunk: &c}, false)
}

// publishFenced is StatusFenced's, ChunkFenced's and Terminal's. The
// caller holds w.mu.
func (w *Writer) publishFenced(ctx context.Context, ev wire.Event, terminal bool) error {
	if err := w.flush(ctx); err != nil {
		return err
	}
	p, err := w.hand(ev)
	if err != nil {
		return err
	}
	p.fenced, p.terminal = true, terminal
	p.msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(w.last, 10))
	return w.flush(ctx)
}

// ReaderVersion sets the newest contract version the run's submitter
// reads (its RunRequest's v, which the router copies onto the Work):
// below wire.BatchVersion the writer batches nothing, publishing every
// chunk and every status as an event of its own (a chunk given to
// ChunkAsync still goes out at once, pipelined), as contract v1 has them
// (docs/contract.md §3.9). A writer batches by default; whoever writes a
// run's events calls it before the first.
func (w *Writer) ReaderVersion(v int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unbatched = v < wire.BatchVersion
}

// StampSandbox has every status w publishes from now on carry v as its
// Sandbox (wire.SandboxOff: the run's CLI runs outside the sandbox),
// unless the status names one itself.
func (w *Writer) StampSandbox(v string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sandbox = v
}

// stampSandbox returns ev with v as the Sandbox of each status it
// carries that names none, leaving the caller's statuses as they were.
func stampSandbox(ev wire.Event, v string) wire.Event {
	if ev.Status != nil && ev.Status.Sandbox == "" {
		st := *ev.Status
		st.Sandbox = v
		ev.Status = &st
	}
	if len(ev.Statuses) > 0 {
		sts := make([]wire.Status, len(ev.Statuses))
		for i, st := range ev.Statuses {
			if st.Sandbox == "" {
				st.Sandbox = v
			}
			sts[i] = st
		}
		ev.Statuses = sts
	}
	return ev
}
