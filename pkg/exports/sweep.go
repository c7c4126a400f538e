package exports

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/service"
)

// Why an export is expired.
const (
	ReasonRetention = "retention" // its retention passed
	ReasonWithdrawn = "withdrawn" // its principal withdrew consent after it was granted
	ReasonAbandoned = "abandoned" // unstored for longer than the abandon grace: its exporter died half way
)

// DefaultAbandonAfter is how long an unstored record may stay before a
// sweep treats its export as abandoned.
const DefaultAbandonAfter = 10 * time.Minute

// Expired says why e is expired at now, given its principal's consent, or
// "" if it is not. abandoned reports that e has stayed unstored at its
// revision for the abandon grace (the record carries no time until it is
// stored, so the sweeper times it).
func Expired(e Entry, c consent.State, now time.Time, abandoned bool) string {
	switch {
	case c.WithdrawnSince(e.Record.ConsentRev):
		return ReasonWithdrawn
	case e.Record.Stored && e.Record.Expires <= now.UnixMilli():
		return ReasonRetention
	case !e.Record.Stored && abandoned:
		return ReasonAbandoned
	}
	return ""
}

// Sweeper removes expired exports in two phases: it lists the expired
// records (retention passed, or consent withdrawn), deletes their bytes,
// and then deletes each record whose bytes are gone. Several sweepers may
// sweep at once: each export is removed, and counted, once.
type Sweeper struct {
	Records *Records
	Consent *consent.Store
	Store   Bytes
	Metrics *service.Metrics
	// AbandonAfter is how long a record may stay unstored at one revision
	// before it is swept as abandoned (0: DefaultAbandonAfter).
	AbandonAfter time.Duration

	// unstored is when this sweeper first saw each unstored record at its
	// revision; only the goroutine running Sweep uses it.
	unstored map[string]seen
	now      func() time.Time
}

type seen struct {
	rev uint64
	at  time.Time
}

// Result counts one sweep.
type Result struct {
	// Swept is the exports this sweep removed, bytes and record.
	Swept int `json:"swept" msgpack:"swept"`
	// Failed is the expired exports whose removal failed; their records
	// are kept for the next sweep.
	Failed int `json:"failed" msgpack:"failed"`
	// Pending is the expired exports still there after the sweep (Failed,
	// and those another sweeper is removing).
	Pending int `json:"pending" msgpack:"pending"`
	// Kept is the exports that are not expired.
	Kept int `json:"kept" msgpack:"kept"`
}

// Sweep runs one sweep. Every failure to remove one export is counted in
// Failed and joined into the error; the others are still swept.
func (s *Sweeper) Sweep(ctx context.Context) (Result, error) {
	if s.unstored == nil {
		s.unstored = map[string]seen{}
	}
	clock := s.now
	if clock == nil {
		clock = time.Now
	}
	grace := s.AbandonAfter
	if grace == 0 {
		grace = DefaultAbandonAfter
	}
	entries, err := s.Records.List(ctx, "")
	if err != nil {
		return Result{}, err
	}
	var res Result
	var errs []error
	grants := map[string]consent.State{}
	live := map[string]bool{}
	for _, e := range entries {
		key := Key(e.Record)
		live[key] = true
		ck := e.Record.Tenant + "." + e.Record.Principal
		c, ok := grants[ck]
		if !ok {
			if c, err = s.Consent.Get(ctx, e.Record.Tenant, e.Record.Principal); err != nil {
				res.Failed++
				errs = append(errs, err)
				continue
			}
			grants[ck] = c
		}
		now := clock()
		abandoned := false
		if !e.Record.Stored {
			first, ok := s.unstored[key]
			if !ok || first.rev != e.Rev {
				first = seen{rev: e.Rev, at: now}
				s.unstored[key] = first
			}
			abandoned = now.Sub(first.at) >= grace
		}
		reason := Expired(e, c, now, abandoned)
		if reason == "" {
			res.Kept++
			continue
		}
		removed, err := s.Records.Remove(ctx, s.Store, e)
		switch {
		case removed:
			res.Swept++
			delete(s.unstored, key)
			if s.Metrics != nil {
				s.Metrics.ExportsSwept.WithLabelValues(reason).Inc()
			}
		case errors.Is(err, ErrChanged):
			// Another sweeper removed it, or its exporter moved it on:
			// the next sweep looks at it again.
			res.Pending++
		default:
			res.Failed++
			res.Pending++
			errs = append(errs, fmt.Errorf("%s expired (%s): %w", key, reason, err))
			if s.Metrics != nil {
				s.Metrics.ExportSweepFailures.Inc()
			}
		}
	}
	for k := range s.unstored {
		if !live[k] {
			delete(s.unstored, k)
		}
	}
	if s.Metrics != nil {
		s.Metrics.ExportsPending.Set(float64(res.Pending))
	}
	return res, errors.Join(errs...)
}
