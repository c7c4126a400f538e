package artifacts

import (
	"context"
	"errors"
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
