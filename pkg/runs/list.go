package runs

import (
	"context"
	"fmt"
	"iter"

	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// List yields the records of tenant's runs ("" for every tenant's) as the
// runs are now: the record of a run not ended is overlaid with its last
// event (WithTail), as a cancel and the sweeper read it. It reads the
// bucket once, through one watch of its current values, and ends when it
// has yielded every record stored when it started (in the order they were
// last written) or the caller breaks. A record that does not decode is
// yielded as an error and the listing goes on; any other error is the
// last value yielded. Records written meanwhile may or may not be yielded. It blocks
// and is safe for concurrent use.
func (s *Store) List(ctx context.Context, tenant string) iter.Seq2[Run, error] {
	return func(yield func(Run, error) bool) {
		filter := ">"
		if tenant != "" {
			if err := subject.ValidToken("tenant", tenant); err != nil {
				yield(Run{}, err)
				return
			}
			filter = tenant + ".*"
		}
		w, err := s.runs.WatchFiltered(ctx, []string{filter}, jetstream.IgnoreDeletes())
		if err != nil {
			yield(Run{}, fmt.Errorf("list runs: %w", err))
			return
		}
		defer func() { _ = w.Stop() }()
		for {
			var e jetstream.KeyValueEntry
			select {
			case <-ctx.Done():
				yield(Run{}, fmt.Errorf("list runs: %w", ctx.Err()))
				return
			case e = <-w.Updates():
			}
			if e == nil {
				return // every current value has been delivered
			}
			rec, err := wire.Decode[wire.RunRecord](e.Value())
			if err != nil {
				if !yield(Run{}, fmt.Errorf("decode run record %s: %w", e.Key(), err)) {
					return
				}
				continue
			}
			if !rec.State.Terminal() {
				t, err := s.log.Tail(ctx, rec.Tenant, rec.RunID)
				if err != nil {
					yield(Run{}, fmt.Errorf("last event of %s: %w", e.Key(), err))
					return
				}
				rec = WithTail(rec, t)
			}
			if !yield(Run{Record: rec, Rev: e.Revision()}, nil) {
				return
			}
		}
	}
}
