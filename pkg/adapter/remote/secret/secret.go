// Package secret provides a string type for credentials that cannot print,
// log, encode or export itself: every formatting, JSON, text, msgpack and
// slog path renders it as [REDACTED]. Only Reveal returns the value, at the
// one place that sends it to a provider.
package secret

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
)

// Redacted is how a secret renders everywhere.
const Redacted = "[REDACTED]"

// ErrNotEncodable is returned by the encoders: a secret never enters a
// message, an event or an export.
var ErrNotEncodable = errors.New("a secret cannot be encoded")

// String holds a credential. The zero value is an absent credential.
type String struct{ v string }

// New wraps v.
func New(v string) String { return String{v: v} }

// FromEnv reads the variable name; ok is false when it is unset or empty.
func FromEnv(name string) (s String, ok bool) {
	v := os.Getenv(name)
	return String{v: v}, v != ""
}

// Reveal returns the credential, for the request header that needs it.
func (s String) Reveal() string { return s.v }

// Empty reports whether no credential is held.
func (s String) Empty() bool { return s.v == "" }

func (s String) String() string                  { return Redacted }
func (s String) GoString() string                { return "secret.String{" + Redacted + "}" }
func (s String) Format(f fmt.State, _ rune)      { _, _ = f.Write([]byte(Redacted)) }
func (s String) LogValue() slog.Value            { return slog.StringValue(Redacted) }
func (s String) MarshalJSON() ([]byte, error)    { return nil, ErrNotEncodable }
func (s String) MarshalText() ([]byte, error)    { return nil, ErrNotEncodable }
func (s String) MarshalBinary() ([]byte, error)  { return nil, ErrNotEncodable }
func (s String) MarshalMsgpack() ([]byte, error) { return nil, ErrNotEncodable }
