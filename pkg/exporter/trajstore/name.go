package trajstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/subject"
)

var (
	// ErrNotFound is a name with no object stored under it.
	ErrNotFound = errors.New("trajectory not found")
	// ErrConflict is a Put of a name already stored with different bytes.
	// Names are content addressed, so it means corruption or a bug. The
	// error is a *ConflictError.
	ErrConflict = errors.New("trajectory name already stored with different bytes")
	// ErrInvalidName is an object name, tenant, run id or sha256 of the
	// wrong shape. The error is a *NameError.
	ErrInvalidName = errors.New("invalid trajectory name")
	// ErrInvalidRoot is a directory store root that is refused. The error
	// is a *RootError.
	ErrInvalidRoot = errors.New("invalid artifact root")
)

// ext ends every object name.
const ext = ".json"

// NameError is a name, or a part of one, that is refused.
type NameError struct {
	Name   string // the object name, or "" when the name was being built
	Field  string // "name", "tenant", "run_id" or "sha256"
	Value  string // the refused value of Field
	Reason string
	Err    error // the cause, such as subject.ErrInvalidToken; may be nil
}

func (e *NameError) Error() string {
	s := ErrInvalidName.Error()
	if e.Name != "" {
		s += fmt.Sprintf(" %q", e.Name)
	}
	return fmt.Sprintf("%s: %s %q: %s", s, e.Field, e.Value, e.Reason)
}

// Unwrap gives ErrInvalidName and the cause.
func (e *NameError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidName}
	}
	return []error{ErrInvalidName, e.Err}
}

// ConflictError is a Put of a name whose stored bytes differ from the
// bytes put. Both digests are lowercase hex sha256.
type ConflictError struct {
	Name         string
	StoredSHA256 string
	PutSHA256    string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s: %s holds sha256 %s, put %s", ErrConflict, e.Name, e.StoredSHA256, e.PutSHA256)
}

// Unwrap gives ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Name is the object name of a run's trajectory:
// "<tenant>/<run_id>/<sha256hex>.json". tenant and runID must be single
// subject tokens ([A-Za-z0-9_-]{1,64}, subject.ValidToken) and sha256hex
// 64 lowercase hex digits; otherwise the error is a *NameError. Name and
// ParseName are inverse.
func Name(tenant, runID, sha256hex string) (string, error) {
	if err := validParts("", tenant, runID, sha256hex); err != nil {
		return "", err
	}
	return tenant + "/" + runID + "/" + sha256hex + ext, nil
}

// NameFor is Name with the sha256 of data: the name data is stored under.
func NameFor(tenant, runID string, data []byte) (string, error) {
	return Name(tenant, runID, SHA256(data))
}

// SHA256 is the lowercase hex sha256 of data, as it appears in a name.
func SHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// ParseName splits an object name made by Name into its parts, or returns
// a *NameError. A name that parses cannot leave a directory: it has exactly
// two separators, no "." or ".." element and no absolute prefix.
func ParseName(name string) (tenant, runID, sha string, err error) {
	parts := strings.Split(name, "/")
	if len(parts) != 3 {
		return "", "", "", &NameError{Name: name, Field: "name", Value: name,
			Reason: fmt.Sprintf("want <tenant>/<run_id>/<sha256>%s, got %d elements separated by /", ext, len(parts))}
	}
	file, ok := strings.CutSuffix(parts[2], ext)
	if !ok {
		return "", "", "", &NameError{Name: name, Field: "name", Value: parts[2], Reason: "does not end in " + ext}
	}
	if err := validParts(name, parts[0], parts[1], file); err != nil {
		return "", "", "", err
	}
	return parts[0], parts[1], file, nil
}

func validParts(name, tenant, runID, sha string) error {
	for _, p := range []struct{ field, v string }{{"tenant", tenant}, {"run_id", runID}} {
		if err := subject.ValidToken(p.field, p.v); err != nil {
			return &NameError{Name: name, Field: p.field, Value: p.v,
				Reason: fmt.Sprintf("not 1 to %d characters of [A-Za-z0-9_-]", subject.MaxTokenLen), Err: err}
		}
	}
	if len(sha) != sha256.Size*2 {
		return &NameError{Name: name, Field: "sha256", Value: sha,
			Reason: fmt.Sprintf("want %d lowercase hex digits, got %d characters", sha256.Size*2, len(sha))}
	}
	for i := 0; i < len(sha); i++ {
		if c := sha[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return &NameError{Name: name, Field: "sha256", Value: sha,
				Reason: fmt.Sprintf("has %q at %d; want lowercase hex", c, i)}
		}
	}
	return nil
}
