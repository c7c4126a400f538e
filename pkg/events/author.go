package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// The headers naming who wrote an event (see wire.RunnerHeader).
const (
	RunnerHeader  = wire.RunnerHeader
	EpochHeader   = wire.EpochHeader
	AttemptHeader = wire.AttemptHeader
)

// Author stamps every event w publishes from now on with runner, the
// epoch of the runner's lease (wire.Lease.Epoch) and attempt
// (RunnerHeader, EpochHeader, AttemptHeader).
func (w *Writer) Author(runner, epoch string, attempt int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runner, w.epoch, w.attempt = runner, epoch, strconv.Itoa(attempt)
}

// Tail is a run's last stored event and who wrote it.
type Tail struct {
	// Event is the last event, a batch of statuses given as its last
	// status (see Log.Last); zero if the run has none.
	Event wire.Event
	// Stream is its stream sequence; 0 if the run has no event.
	Stream uint64
	// Runner, Epoch and Attempt are its author's, from its headers: the
	// runner holding the run, the epoch of its lease and the attempt, when
	// a runner wrote it; empty and 0 when the router, a cancel or the
	// sweeper did.
	Runner  string
	Epoch   string
	Attempt int
}

// Ended reports whether the tail is a terminal status.
func (t Tail) Ended() bool { return t.Event.Terminal() }

// HasOutput reports whether the run has published output: its last event
// is a chunk or a batch of chunks (after its first chunk, a run's events
// are chunks and then its terminal status).
func (t Tail) HasOutput() bool {
	return t.Event.Kind == wire.KindChunk || t.Event.Kind == wire.KindChunks
}

// Tail reads a run's last event and its author from the stream's leader,
// like Last; a run with no event is a zero Tail and no error.
func (l *Log) Tail(ctx context.Context, tenant, runID string) (Tail, error) {
	raw, err := jsretry.Do(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return l.lastFromLeader(ctx, l.names.Events(tenant, runID))
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Tail{}, nil
	}
	if err != nil {
		return Tail{}, err
	}
	return tailOf(raw, runID)
}

func tailOf(raw *jetstream.RawStreamMsg, runID string) (Tail, error) {
	ev, err := decodeLast(raw.Data, runID)
	if err != nil {
		return Tail{}, err
	}
	t := Tail{Event: ev, Stream: raw.Sequence, Runner: raw.Header.Get(RunnerHeader), Epoch: raw.Header.Get(EpochHeader)}
	if a := raw.Header.Get(AttemptHeader); a != "" {
		if t.Attempt, err = strconv.Atoi(a); err != nil {
			return Tail{}, fmt.Errorf("last event of %s: %s %q: %w", runID, AttemptHeader, a, err)
		}
	}
	return t, nil
}

// OpenTail is OpenLast returning the run's tail.
func (l *Log) OpenTail(ctx context.Context, tenant, runID string) (*Writer, Tail, error) {
	w := l.New(tenant, runID)
	t, err := l.Tail(ctx, tenant, runID)
	switch {
	case err != nil:
		return nil, t, err
	case t.Ended():
		return nil, t, fmt.Errorf("%w: %s is %s", ErrEnded, runID, t.Event.Status.State)
	}
	w.seq, w.last = t.Event.LastSeq(), t.Stream
	return w, t, nil
}
