package artifacts

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound is a snapshot, artifact or head that is not stored (or
	// is withdrawn, or not yet completely stored).
	ErrNotFound = errors.New("artifact not found")
	// ErrTooLarge is bytes over their limit; the error is a *TooLargeError.
	ErrTooLarge = errors.New("artifact over its size limit")
	// ErrInvalidName is an artifact name or snapshot id of the wrong shape.
	ErrInvalidName = errors.New("invalid artifact name")
	// ErrCorrupt is stored bytes whose SHA-256 or length is not what their
	// record says.
	ErrCorrupt = errors.New("artifact bytes do not match their record")
	// ErrChanged is a conditional write or delete of a record another
	// writer changed since it was read.
	ErrChanged = errors.New("artifact record changed since it was read")
)

// TooLargeError is bytes over their limit: a snapshot pushed or opened, or
// a run's artifact put.
type TooLargeError struct {
	What  string // "snapshot" or "artifact <name>"
	Limit int64  // the limit in bytes
	// Size is the bytes' length when it is known, or the length read
	// before the limit was passed.
	Size int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: %s of at least %d bytes is over the limit of %d bytes", ErrTooLarge, e.What, e.Size, e.Limit)
}

// Unwrap gives ErrTooLarge.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }
