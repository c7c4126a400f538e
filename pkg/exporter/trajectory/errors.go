package trajectory

import (
	"errors"
	"fmt"
)

// Errors of Build and Decode. Each error they return matches exactly one
// of them with errors.Is, and is a struct type below carrying the details.
var (
	// ErrIncomplete: the events are not one whole run: not gapless from
	// seq 1, not ending in exactly one terminal status, malformed, or of
	// another run. The exporter never exports such a run in part.
	ErrIncomplete = errors.New("trajectory: incomplete run")
	// ErrInvalidInput: the record, a request field, a label or a chunk
	// value cannot be written as a schema v1 trajectory.
	ErrInvalidInput = errors.New("trajectory: invalid input")
	// ErrMalformed: Decode was given bytes that are not a canonical schema
	// v1 trajectory.
	ErrMalformed = errors.New("trajectory: malformed")
)

// IncompleteError says what is wrong with a run's events. It matches
// ErrIncomplete.
type IncompleteError struct {
	RunID string // the run record's run id
	// Seq is the seq at fault: the missing one, the one out of order, of
	// another run, malformed, or the terminal status found before the end;
	// 0 when no event at all is at fault (no events, no terminal status).
	Seq    uint64
	Reason string
}

func (e *IncompleteError) Error() string {
	if e.Seq == 0 {
		return fmt.Sprintf("%v: run %s: %s", ErrIncomplete, e.RunID, e.Reason)
	}
	return fmt.Sprintf("%v: run %s: seq %d: %s", ErrIncomplete, e.RunID, e.Seq, e.Reason)
}

// Is reports whether target is ErrIncomplete.
func (e *IncompleteError) Is(target error) bool { return target == ErrIncomplete }

// InputError names a value of Build's input that a trajectory cannot hold.
// It matches ErrInvalidInput.
type InputError struct {
	// Field is the path of the value, such as "record.tenant",
	// "request.messages[2].content" or "seq 14: chunk.tool_input.x".
	Field  string
	Reason string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrInvalidInput, e.Field, e.Reason)
}

// Is reports whether target is ErrInvalidInput.
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

// DecodeError says why Decode refused its input. It matches ErrMalformed.
type DecodeError struct {
	// Field is the path of the offending value ("chunks[3].type"), or ""
	// for the document as a whole.
	Field  string
	Reason string
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%v: %s", ErrMalformed, e.Reason)
	}
	return fmt.Sprintf("%v: %s: %s", ErrMalformed, e.Field, e.Reason)
}

// Is reports whether target is ErrMalformed.
func (e *DecodeError) Is(target error) bool { return target == ErrMalformed }
