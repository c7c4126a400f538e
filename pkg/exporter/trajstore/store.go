package trajstore

import "context"

// Store keeps trajectory bytes under content-derived names (see Name).
//
// Every method validates the name with ParseName first and returns a
// *NameError, touching nothing, for a name of the wrong shape. Every method
// blocks until the backend has answered, or ctx ends; implementations are
// safe for concurrent use, also by several processes over one backend.
type Store interface {
	// Put stores data under name. Putting the same name again with the
	// same bytes is a no-op success (two exporters, a redelivery); with
	// different bytes it is a *ConflictError (names are content addressed,
	// so this means corruption or a bug). When Put returns nil the bytes
	// are durably stored and a Get sees all of them; no reader ever sees a
	// part of them. Put does not check that name's sha256 is that of data
	// (NameFor gives that name).
	Put(ctx context.Context, name string, data []byte) error

	// Get returns the bytes stored under name, or an error wrapping
	// ErrNotFound. The returned slice is the caller's.
	Get(ctx context.Context, name string) ([]byte, error)

	// Delete removes name. Deleting a name that is absent is success (a
	// sweep that crashed after the delete retries it), so Delete is
	// idempotent. When Delete returns nil the bytes are durably gone.
	Delete(ctx context.Context, name string) error

	// Exists reports whether name is stored.
	Exists(ctx context.Context, name string) (bool, error)
}
