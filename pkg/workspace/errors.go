// Package workspace moves a run's working tree between machines: Pack and
// Unpack a deterministic tar of a directory, materialize a git source from
// an allow-listed remote, record the base a run starts from, and produce
// and apply a git-format binary patch of what changed since. It touches
// the filesystem and runs git; it knows nothing of NATS.
package workspace

import (
	"errors"
	"fmt"
)

var (
	// ErrTooLarge is matched by every refusal of input or output over a
	// size limit (*TooLargeError).
	ErrTooLarge = errors.New("over the size limit")
	// ErrUnsafePath is matched by every refusal of an archive entry or a
	// tree entry that is, or could lead, outside the directory
	// (*UnsafePathError).
	ErrUnsafePath = errors.New("unsafe path")
	// ErrNotAllowed is matched by the refusal of a git remote outside the
	// operator's allow-list (*NotAllowedError).
	ErrNotAllowed = errors.New("git remote not allowed")
)

// TooLargeError names what went over which limit.
type TooLargeError struct {
	What  string // "archive", "patch", "git tree", …
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is over the size limit of %d bytes", e.What, e.Limit)
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// UnsafePathError names the refused path and why.
type UnsafePathError struct {
	Path string
	Why  string
}

func (e *UnsafePathError) Error() string {
	return fmt.Sprintf("unsafe path %q: %s", e.Path, e.Why)
}

// Is makes errors.Is(err, ErrUnsafePath) true.
func (e *UnsafePathError) Is(target error) bool { return target == ErrUnsafePath }

// NotAllowedError names the refused remote.
type NotAllowedError struct{ URL string }

func (e *NotAllowedError) Error() string {
	return fmt.Sprintf("git remote %q is not in the allow-list", e.URL)
}

// Is makes errors.Is(err, ErrNotAllowed) true.
func (e *NotAllowedError) Is(target error) bool { return target == ErrNotAllowed }

// limitWriter passes writes on until more than limit bytes in all would
// have been written; that write, and every later one, fails with a
// *TooLargeError and writes nothing. A limit <= 0 is no limit.
type limitWriter struct {
	w     interface{ Write([]byte) (int, error) }
	n     int64
	limit int64
	what  string
	over  *TooLargeError // set by the first write over the limit
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.limit > 0 && l.n+int64(len(p)) > l.limit {
		l.over = &TooLargeError{What: l.what, Limit: l.limit}
		return 0, l.over
	}
	n, err := l.w.Write(p)
	l.n += int64(n)
	return n, err
}
