package ledger

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Record feeds one ended run's record into the ledger: its spend entry
// (once), its day's rollup folded, and its slot of the tenant's quota
// freed. It is idempotent and safe to call for the same run from several
// writers at once; a writer stopped between any two of its writes leaves
// what the next call completes.
func (s *Store) Record(ctx context.Context, rec wire.RunRecord) error {
	if !rec.State.Terminal() {
		return nil
	}
	if e, key, ok := Entry(rec); ok {
		if err := s.Put(ctx, key, e); err != nil {
			return err
		}
		if err := s.Fold(ctx, rec.Tenant, e.Day); err != nil {
			return err
		}
	}
	return s.Release(ctx, rec.Tenant, rec.RunID)
}

// WriterConfig configures a Writer.
type WriterConfig struct {
	// Workers is how many records one writer feeds at once (default 8).
	Workers int
	// AckWait is the consumer's ack wait (default 30s).
	AckWait time.Duration
}

// Writer feeds ended runs into the ledger from the ledger writers' shared
// durable consumer of the run records (runs.Store.Follow). Several may
// run, in several processes.
type Writer struct {
	s       *Store
	runs    *runs.Store
	durable string
	cfg     WriterConfig
	log     *slog.Logger
}

// NewWriter returns a writer feeding s from rs's records through the
// durable consumer named durable.
func NewWriter(s *Store, rs *runs.Store, durable string, cfg WriterConfig, log *slog.Logger) *Writer {
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = 30 * time.Second
	}
	return &Writer{s: s, runs: rs, durable: durable, cfg: cfg, log: log}
}

// Run feeds records until ctx ends, then finishes the ones in hand and
// returns.
func (w *Writer) Run(ctx context.Context) error {
	cons, err := w.runs.Follow(ctx, w.durable, w.cfg.AckWait, 4*w.cfg.Workers)
	if err != nil {
		return err
	}
	return service.Consume(ctx, cons, w.durable, w.cfg.Workers, w.log, w.handle)
}

// handle feeds one record write and settles it: acked once fed (or when
// it is not an end), else redelivered after a growing delay.
func (w *Writer) handle(ctx context.Context, msg jetstream.Msg) {
	got, err := runs.DecodeRecorded(msg)
	if err != nil {
		w.log.Error("undecodable run record; not in the ledger", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	if got.Deleted || !got.Record.State.Terminal() {
		_ = msg.Ack()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.AckWait)
	defer cancel()
	if err := w.s.Record(ctx, got.Record); err != nil {
		n := uint64(1)
		if md, merr := msg.Metadata(); merr == nil {
			n = md.NumDelivered
		}
		delay := min(time.Duration(n)*time.Second, 30*time.Second)
		w.log.Warn("feed the ledger; retrying", "tenant", got.Record.Tenant, "run_id", got.Record.RunID, "delivery", n, "retry_in", delay, "err", err)
		_ = msg.NakWithDelay(delay)
		return
	}
	_ = msg.Ack()
}
