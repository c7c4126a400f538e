package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stored is what the server stored for a number of runs (or hops): the
// messages appended to every stream, by stream.
type Stored struct {
	Runs     int
	ByStream map[string]int
}

// Messages is the total over every stream.
func (s Stored) Messages() int {
	n := 0
	for _, c := range s.ByStream {
		n += c
	}
	return n
}

// PerRun returns Messages / Runs, or 0 for no runs.
func (s Stored) PerRun() float64 {
	if s.Runs == 0 {
		return 0
	}
	return float64(s.Messages()) / float64(s.Runs)
}

// String lists the streams with messages stored, by name: "EVENTS 4, KV_runs 3".
func (s Stored) String() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(s.ByStream)) {
		if c := s.ByStream[name]; c != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", name, c))
		}
	}
	return strings.Join(parts, ", ")
}

// lastSeqs returns every stream's last sequence: the count of messages it
// ever stored, whether they are still there or were since acked, deleted
// or replaced (a work queue's acked work, a key-value delete or update).
func lastSeqs(ctx context.Context, js jetstream.JetStream) (map[string]uint64, error) {
	out := map[string]uint64{}
	streams := js.ListStreams(ctx)
	for info := range streams.Info() {
		out[info.Config.Name] = info.State.LastSeq
	}
	if err := streams.Err(); err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	return out, nil
}

// settleQuiet is how long every stream's last sequence must stay put
// before settledSeqs takes it, and settleMax how long it waits for that.
const (
	settleQuiet = 300 * time.Millisecond
	settleMax   = 10 * time.Second
)

// settledSeqs returns lastSeqs once no stream has grown for settleQuiet,
// so that writes a run makes after its terminal event (a record update or
// lease delete completed asynchronously) are counted with it. It is a
// measurement's settling, not a test's synchronization: it fails only if
// the streams keep growing for settleMax.
func settledSeqs(ctx context.Context, js jetstream.JetStream) (map[string]uint64, error) {
	deadline := time.Now().Add(settleMax)
	prev, err := lastSeqs(ctx, js)
	if err != nil {
		return nil, err
	}
	for {
		t := time.NewTimer(settleQuiet)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		cur, err := lastSeqs(ctx, js)
		if err != nil {
			return nil, err
		}
		if maps.Equal(prev, cur) {
			return cur, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("streams still growing after %s: %v, then %v", settleMax, prev, cur)
		}
		prev = cur
	}
}

// delta is after - before, by stream, as a Stored of runs.
func delta(runs int, before, after map[string]uint64) Stored {
	s := Stored{Runs: runs, ByStream: map[string]int{}}
	for name, seq := range after {
		s.ByStream[name] = int(seq - before[name])
	}
	return s
}

// StoredPerRun runs n fixture runs of one text chunk, one after the other,
// each followed to its terminal status, and returns what the server stored
// for them on every stream: the growth of every stream's last sequence from
// before the first submission to after the last run, once the streams
// have settled (settledSeqs). Nothing else may write to the server
// meanwhile; the mesh's own background writes (the sweeper's, say) are
// counted with the runs.
func (m *Mesh) StoredPerRun(ctx context.Context, n int) (Stored, error) {
	if n < 1 {
		return Stored{}, fmt.Errorf("%w: stored per run needs runs > 0, got %d", ErrInvalidConfig, n)
	}
	req, err := m.request(Workload{Runs: 1, Chunks: 1, ChunkBytes: 64})
	if err != nil {
		return Stored{}, err
	}
	before, err := settledSeqs(ctx, m.js)
	if err != nil {
		return Stored{}, err
	}
	for range n {
		if err := m.run(ctx, "fixture", req, 1, nil); err != nil {
			return Stored{}, err
		}
	}
	after, err := settledSeqs(ctx, m.js)
	if err != nil {
		return Stored{}, err
	}
	return delta(n, before, after), reap(ctx, m.js, m.events)
}

// StoredPerHop is StoredPerRun's baseline: n synchronous publishes of a
// one-chunk event to a fresh subject of RawStream, counted the same way
// (every stream of the server). It is 1 per hop unless something else
// writes meanwhile; it checks the count, not JetStream.
func (r *Raw) StoredPerHop(ctx context.Context, n int) (Stored, error) {
	if n < 1 {
		return Stored{}, fmt.Errorf("%w: stored per hop needs hops > 0, got %d", ErrInvalidConfig, n)
	}
	payload, err := ChunkEvent(Workload{Runs: 1, Chunks: 1, ChunkBytes: 64})
	if err != nil {
		return Stored{}, err
	}
	before, err := settledSeqs(ctx, r.sub)
	if err != nil {
		return Stored{}, err
	}
	subj := r.subject("stored")
	for range n {
		if _, err := r.pub.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: payload}); err != nil {
			return Stored{}, fmt.Errorf("publish on %s: %w", subj, err)
		}
	}
	after, err := settledSeqs(ctx, r.sub)
	if err != nil {
		return Stored{}, err
	}
	return delta(n, before, after), nil
}
