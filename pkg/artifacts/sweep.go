package artifacts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exports"
)

// Why an artifact is expired.
const (
	ReasonRetention = exports.ReasonRetention // its retention passed
	ReasonWithdrawn = exports.ReasonWithdrawn // its run's artifacts were withdrawn
	ReasonAbandoned = exports.ReasonAbandoned // unstored for longer than the abandon grace: its writer died half way
)

// Expired says why rec is expired at now, or "" if it is not. An unstored
// record is abandoned once its write began abandonAfter ago.
func Expired(rec Record, now time.Time, abandonAfter time.Duration) string {
	switch {
	case rec.Withdrawn:
		return ReasonWithdrawn
	case rec.Stored && rec.Expires <= now.UnixMilli():
		return ReasonRetention
	case !rec.Stored && now.Sub(time.UnixMilli(rec.Began)) >= abandonAfter:
		return ReasonAbandoned
	}
	return ""
}

// Bytes returns the store of the artifacts' bytes, as the sweep deletes
// them: deleting a name that is absent is success.
func (s *Store) Bytes() exports.Bytes { return s.bytes }

// Remove removes an artifact in two phases: it deletes the bytes its
// record may claim, checks they are gone, and only then deletes the
// record, at the revision it was read at. A failed byte delete keeps the
// record for the next sweep. It reports whether this call removed the
// record; of several sweepers removing one artifact exactly one does (the
// others get ErrChanged or find it gone).
func (s *Store) Remove(ctx context.Context, bytes exports.Bytes, rec Record) (bool, error) {
	key := rec.Key()
	rm := exports.Removal{What: "artifact " + key, Store: bytes, Objects: rec.objects(), KV: s.records, Key: key, Rev: rec.Rev, Changed: ErrChanged,
		Gone: func() bool {
			_, err := s.get(ctx, key)
			return errors.Is(err, ErrNotFound)
		}}
	return rm.Do(ctx)
}

// Sweeper removes expired artifacts in two phases: it lists the expired
// records (retention passed, withdrawn, or abandoned half way by their
// writer), deletes their bytes, and then deletes each record whose bytes
// are gone. A failed removal keeps the record, and the next sweep tries it
// again. Several sweepers may sweep at once: each artifact is removed, and
// counted, once. A Sweeper's Sweep is not for concurrent use.
type Sweeper struct {
	Store *Store
	// Bytes is where the artifacts' bytes are deleted (nil: Store.Bytes()).
	Bytes exports.Bytes
	// AbandonAfter is how long a record may stay unstored before it is
	// swept as abandoned (0: exports.DefaultAbandonAfter).
	AbandonAfter time.Duration
	// Now is the sweep's clock (nil: time.Now).
	Now func() time.Time
}

// Sweep runs one sweep. Every failure to remove one artifact is counted in
// Failed and joined into the error; the others are still swept.
func (s *Sweeper) Sweep(ctx context.Context) (exports.Result, error) {
	bytes, now, grace := s.Bytes, s.Now, s.AbandonAfter
	if bytes == nil {
		bytes = s.Store.Bytes()
	}
	if now == nil {
		now = time.Now
	}
	if grace == 0 {
		grace = exports.DefaultAbandonAfter
	}
	recs, err := s.Store.Records(ctx)
	if err != nil {
		return exports.Result{}, err
	}
	var res exports.Result
	var errs []error
	for _, rec := range recs {
		reason := Expired(rec, now(), grace)
		if reason == "" {
			res.Kept++
			continue
		}
		removed, err := s.Store.Remove(ctx, bytes, rec)
		switch {
		case removed:
			res.Swept++
		case errors.Is(err, ErrChanged):
			// Another sweeper removed it, or its writer moved it on: the
			// next sweep looks at it again.
			res.Pending++
		default:
			res.Failed++
			res.Pending++
			errs = append(errs, fmt.Errorf("%s expired (%s): %w", rec.Key(), reason, err))
		}
	}
	return res, errors.Join(errs...)
}
