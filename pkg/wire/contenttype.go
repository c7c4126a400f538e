package wire

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// ContentTypeHeader is the header naming what a message's body is
// (docs/contract.md §3.1). Every message agentmesh publishes carries it;
// no receiver requires it, since messages stored before it have none.
const ContentTypeHeader = "Content-Type"

// ContentType is one Content-Type header value, built once: Set puts the
// same one-value slice into every header it is given, so stamping a
// message allocates nothing. The zero value sets nothing. It is safe for
// concurrent use; nobody may modify the slices it puts in a header.
type ContentType struct{ v []string }

func newContentType(s string) ContentType { return ContentType{v: []string{s}} }

// String is the header value.
func (c ContentType) String() string {
	if c.v == nil {
		return ""
	}
	return c.v[0]
}

// Set sets h's Content-Type to c (a nats.Header is such a map).
func (c ContentType) Set(h map[string][]string) {
	if c.v != nil {
		h[ContentTypeHeader] = c.v
	}
}

// Header is a new header holding only c, for a reply whose API takes a
// header of its own (micro's Respond).
func (c ContentType) Header() map[string][]string {
	return map[string][]string{ContentTypeHeader: c.v}
}

// The Content-Types of the bodies that are not msgpack messages: the
// sweeper's counts and the run key a router sends a runner.
var (
	TextContentType = newContentType("text/plain; charset=utf-8")
	JSONContentType = newContentType("application/json")
)

// MessageType names one kind of message of this package: what Decode
// takes as its type parameter, as a word (docs/contract.md §3.1).
type MessageType string

// The message types, one for each type of Versioned.
const (
	TypeRunRequest     MessageType = "run-request"
	TypeWork           MessageType = "work"
	TypeEvent          MessageType = "event"
	TypeRunRecord      MessageType = "run-record"
	TypeLease          MessageType = "lease"
	TypeCancelReply    MessageType = "cancel-reply"
	TypeCheckpoint     MessageType = "checkpoint"
	TypeConsent        MessageType = "consent"
	TypeExportRecord   MessageType = "export-record"
	TypeRedactionRules MessageType = "redaction-rules"
	// The spend ledger's and the limits' entries (docs/contract.md §12).
	TypeSpendEntry  MessageType = "spend-entry"
	TypeSpendRollup MessageType = "spend-rollup"
	TypeBudget      MessageType = "budget"
	TypeQuota       MessageType = "quota"
	TypeInFlight    MessageType = "in-flight"
	// The session control messages (contract v3, docs/contract.md §6.1).
	TypeInput            MessageType = "input"
	TypeInputReply       MessageType = "input-reply"
	TypePermissionAnswer MessageType = "permission-answer"
	TypePermissionReply  MessageType = "permission-reply"
)

// ErrUnknownType is returned for a message type, a Content-Type or a body
// that names or matches no message type of this package.
var ErrUnknownType = errors.New("unknown message type")

// messageType is what this package knows of one message type.
type messageType struct {
	name  MessageType
	ct    ContentType
	typ   reflect.Type
	check func([]byte) error // strict Decode of the type
	// keys are the type's msgpack field names; required those the
	// encoder always writes (not omitempty).
	keys, required []string
}

func typeOf[T Versioned](name MessageType) messageType {
	m := messageType{
		name:  name,
		ct:    newContentType(mediaPrefix + string(name) + mediaSuffix),
		typ:   reflect.TypeFor[T](),
		check: func(b []byte) error { _, err := Decode[T](b); return err },
	}
	for f := range m.typ.Fields() {
		tag, ok := f.Tag.Lookup("msgpack")
		if !ok || tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		m.keys = append(m.keys, name)
		if !slices.Contains(strings.Split(opts, ","), "omitempty") {
			m.required = append(m.required, name)
		}
	}
	return m
}

// The media type of a message type t is mediaPrefix + t + mediaSuffix.
const (
	mediaPrefix = "application/vnd.agentmesh."
	mediaSuffix = "+msgpack"
)

// messageTypes lists every message type, in the order sniffing tries them.
var messageTypes = []messageType{
	typeOf[RunRequest](TypeRunRequest),
	typeOf[Work](TypeWork),
	typeOf[Event](TypeEvent),
	typeOf[RunRecord](TypeRunRecord),
	typeOf[Lease](TypeLease),
	typeOf[CancelReply](TypeCancelReply),
	typeOf[Checkpoint](TypeCheckpoint),
	typeOf[Consent](TypeConsent),
	typeOf[ExportRecord](TypeExportRecord),
	typeOf[RedactionRules](TypeRedactionRules),
	typeOf[SpendEntry](TypeSpendEntry),
	typeOf[SpendRollup](TypeSpendRollup),
	typeOf[Budget](TypeBudget),
	typeOf[Quota](TypeQuota),
	typeOf[InFlight](TypeInFlight),
	typeOf[Input](TypeInput),
	typeOf[InputReply](TypeInputReply),
	typeOf[PermissionAnswer](TypePermissionAnswer),
	typeOf[PermissionReply](TypePermissionReply),
}

func lookup(t MessageType) (*messageType, bool) {
	for i := range messageTypes {
		if messageTypes[i].name == t {
			return &messageTypes[i], true
		}
	}
	return nil, false
}

// MessageTypes lists every message type.
func MessageTypes() []MessageType {
	out := make([]MessageType, len(messageTypes))
	for i, m := range messageTypes {
		out[i] = m.name
	}
	return out
}

// ContentType is t's Content-Type, application/vnd.agentmesh.<t>+msgpack;
// the zero ContentType for a type this package does not have.
func (t MessageType) ContentType() ContentType {
	if m, ok := lookup(t); ok {
		return m.ct
	}
	return ContentType{}
}

// ParseMessageType reads a message type from s: its name (event) or its
// Content-Type (application/vnd.agentmesh.event+msgpack, parameters and
// case ignored). It fails with ErrUnknownType naming the types there are.
func ParseMessageType(s string) (MessageType, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	if mt, _, ok := strings.Cut(name, ";"); ok {
		name = strings.TrimSpace(mt)
	}
	if rest, ok := strings.CutPrefix(name, mediaPrefix); ok {
		if name, ok = strings.CutSuffix(rest, mediaSuffix); !ok {
			return "", fmt.Errorf("%w: %q is not %s<type>%s", ErrUnknownType, s, mediaPrefix, mediaSuffix)
		}
	}
	if _, ok := lookup(MessageType(name)); !ok {
		return "", fmt.Errorf("%w: %q; the types are %s", ErrUnknownType, s, typeList())
	}
	return MessageType(name), nil
}

func typeList() string {
	names := make([]string, len(messageTypes))
	for i, m := range messageTypes {
		names[i] = string(m.name)
	}
	return strings.Join(names, ", ")
}

// Sniff says which message type b is, from its top-level keys: the one
// type that has every key b has and whose encoder always writes every key
// b has not got missing, else the one type that merely has every key b
// has. The bytes are not decoded: Check or JSON does that. It fails with
// ErrMalformed for what is not one msgpack map with string keys, and
// with ErrUnknownType for a map no type or several types match.
func Sniff(b []byte) (MessageType, error) {
	keys, err := topKeys(b)
	if err != nil {
		return "", err
	}
	var exact, loose []MessageType
	for _, m := range messageTypes {
		if !subset(keys, m.keys) {
			continue
		}
		loose = append(loose, m.name)
		if subset(m.required, keys) {
			exact = append(exact, m.name)
		}
	}
	switch {
	case len(exact) == 1:
		return exact[0], nil
	case len(exact) == 0 && len(loose) == 1:
		return loose[0], nil
	case len(loose) == 0:
		return "", fmt.Errorf("%w: no message type has all of the keys %s", ErrUnknownType, strings.Join(keys, ", "))
	}
	cands := exact
	if len(cands) == 0 {
		cands = loose
	}
	return "", fmt.Errorf("%w: the keys %s fit %d types (%v); name one", ErrUnknownType, strings.Join(keys, ", "), len(cands), cands)
}

// Check strictly decodes b as a message of type t, as Decode does.
func Check(t MessageType, b []byte) error {
	m, ok := lookup(t)
	if !ok {
		return fmt.Errorf("%w: %q; the types are %s", ErrUnknownType, t, typeList())
	}
	return m.check(b)
}

func subset(a, b []string) bool {
	for _, k := range a {
		if !slices.Contains(b, k) {
			return false
		}
	}
	return true
}
