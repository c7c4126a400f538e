package wire

import (
	"context"
	"errors"
	"fmt"
)

// Class is the wire name of an error class (docs/contract.md §1.5). A Class is itself an
// error, so errors.Is(err, wire.ProviderTransportError) reports whether err is
// an *Error of that class or of one of its subclasses.
type Class string

// The error classes of docs/contract.md §1.5.
const (
	ProviderError              Class = "ProviderError"
	ProviderQuotaError         Class = "ProviderQuotaError"
	ProviderAuthError          Class = "ProviderAuthError"
	ProviderContextError       Class = "ProviderContextError"
	ProviderTransportError     Class = "ProviderTransportError"
	ProviderExecutableNotFound Class = "ProviderExecutableNotFound"
	ProviderProcessError       Class = "ProviderProcessError"
	ProviderProtocolError      Class = "ProviderProtocolError"
	ProviderStreamError        Class = "ProviderStreamError"
	// ProviderStallError: the transport produced nothing for the
	// profile's policy.stall_after (a CLI hung mid-stream).
	ProviderStallError Class = "ProviderStallError"

	AgenticRequestValidationError Class = "AgenticRequestValidationError"
	AgenticHandlerError           Class = "AgenticHandlerError"
	AgenticOperationUnsupported   Class = "AgenticOperationUnsupported"
	AdmissionRejected             Class = "AdmissionRejected"
	// BudgetExceeded: the tenant's or the principal's spend in the
	// budget's period had reached the budget when the run was submitted
	// (docs/contract.md §12).
	BudgetExceeded      Class = "BudgetExceeded"
	DeadlineExceeded    Class = "DeadlineExceeded"
	ProfileError        Class = "ProfileError"
	PinMismatch         Class = "PinMismatch"
	ProviderUnavailable Class = "ProviderUnavailable"

	// The classes of sessions (contract v3, docs/contract.md §6.1).

	// SessionEnded: a follow-up prompt or a permission answer for a run
	// that has ended, or was never a session.
	SessionEnded Class = "SessionEnded"
	// SessionLost: the session's runner died and its agent cannot load
	// the conversation elsewhere (no session/load); the mesh never starts
	// a fresh conversation in its place.
	SessionLost Class = "SessionLost"
	// PermissionTimeout: nobody answered a permission request within the
	// profile's permission timeout, so it was denied.
	PermissionTimeout Class = "PermissionTimeout"
)

var parents = map[Class]Class{
	ProviderQuotaError:         ProviderError,
	ProviderAuthError:          ProviderError,
	ProviderContextError:       ProviderError,
	ProviderTransportError:     ProviderError,
	ProviderExecutableNotFound: ProviderTransportError,
	ProviderProcessError:       ProviderTransportError,
	ProviderStallError:         ProviderTransportError,
	ProviderProtocolError:      ProviderError,
	ProviderStreamError:        ProviderError,
}

var roots = map[Class]bool{
	ProviderError: true, AgenticRequestValidationError: true, AgenticHandlerError: true,
	AgenticOperationUnsupported: true, AdmissionRejected: true, BudgetExceeded: true, DeadlineExceeded: true,
	ProfileError: true, PinMismatch: true, ProviderUnavailable: true,
	SessionEnded: true, SessionLost: true, PermissionTimeout: true,
}

// Known reports whether c is one of the classes of docs/contract.md §1.5.
func (c Class) Known() bool { _, ok := parents[c]; return ok || roots[c] }

// IsA reports whether c is ancestor or one of its subclasses.
func (c Class) IsA(ancestor Class) bool {
	for cur := c; cur != ""; cur = parents[cur] {
		if cur == ancestor {
			return true
		}
	}
	return false
}

func (c Class) Error() string { return string(c) }

// MaxErrorText bounds Error.Message and Error.StderrTail on the wire.
const MaxErrorText = 4 << 10

// Error is a typed error as it crosses NATS: {class, message, retryable,
// returncode?, stderr_tail?, retry_after_ms?}. Message and StderrTail are
// bounded to MaxErrorText and redacted by New and Bound.
type Error struct {
	Class      Class  `msgpack:"class" json:"class"`
	Message    string `msgpack:"message" json:"message"`
	Retryable  bool   `msgpack:"retryable" json:"retryable"`
	ReturnCode *int   `msgpack:"returncode,omitempty" json:"returncode,omitempty"`
	StderrTail string `msgpack:"stderr_tail,omitempty" json:"stderr_tail,omitempty"`
	// RetryAfterMS is how long the provider asked to be left alone before
	// another attempt (its Retry-After header, docs/contract.md §1.5), in
	// milliseconds; 0 when it said nothing.
	RetryAfterMS int64 `msgpack:"retry_after_ms,omitempty" json:"retry_after_ms,omitempty"`
}

// Errorf returns a non-retryable *Error of class c with a formatted,
// redacted and bounded message.
func Errorf(c Class, format string, args ...any) *Error {
	e := &Error{Class: c, Message: fmt.Sprintf(format, args...)}
	e.Bound()
	return e
}

// Retry marks e retryable and returns it.
func (e *Error) Retry() *Error { e.Retryable = true; return e }

// Bound redacts Message and StderrTail and cuts each to MaxErrorText bytes
// (on a UTF-8 boundary). It is idempotent.
func (e *Error) Bound() {
	// Cut before redacting (a secret cut in half still matches at twice the
	// bound), so a 256 KiB stderr capture is not scanned whole.
	e.Message = boundText(Redact(boundText(e.Message, 2*MaxErrorText, false)), MaxErrorText, false)
	e.StderrTail = boundText(Redact(boundText(e.StderrTail, 2*MaxErrorText, true)), MaxErrorText, true)
}

func (e *Error) Error() string {
	if e.ReturnCode != nil {
		return fmt.Sprintf("%s: %s (returncode %d)", e.Class, e.Message, *e.ReturnCode)
	}
	return fmt.Sprintf("%s: %s", e.Class, e.Message)
}

// Is lets errors.Is match an *Error against a Class (with inheritance) or
// another *Error of the same class.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Class:
		return e.Class.IsA(t)
	case *Error:
		return t.Class == e.Class
	}
	return false
}

// AsError converts err into a wire error. An *Error anywhere in the chain is
// returned as is; context.DeadlineExceeded becomes DeadlineExceeded; anything
// else becomes a non-retryable ProviderError carrying err's text.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var we *Error
	if errors.As(err, &we) {
		return we
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Errorf(DeadlineExceeded, "%v", err)
	}
	return Errorf(ProviderError, "%v", err)
}

// boundText cuts s to at most n bytes without splitting a UTF-8 sequence.
// With keepTail it keeps the last n bytes (a stderr tail), else the first.
func boundText(s string, n int, keepTail bool) string {
	if len(s) <= n {
		return s
	}
	if keepTail {
		i := len(s) - n
		for i < len(s) && s[i]&0xC0 == 0x80 {
			i++
		}
		return s[i:]
	}
	i := n
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i]
}
