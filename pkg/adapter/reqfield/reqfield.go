package reqfield

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Decoder holds one decoded request and the problems found in it so far.
// Its methods are not safe for concurrent use; a Decoder is meant to live
// for one call of an adapter's Decode or Validate.
type Decoder struct {
	adapter  string
	m        map[string]any
	read     map[string]bool // the fields a getter or Require has claimed
	required []required
	problems []problem
}

// required is a field Require or RequireUnless made required; unless, if
// set, is the field that would have stood in for it, for the message.
type required struct{ field, unless string }

// problem is one entry of the error message; field orders it.
type problem struct{ field, msg string }

// Decode strictly decodes b, which must be one msgpack map with string keys
// (wire.DecodeStrict). A payload that is not such a map is returned as a
// *wire.Error of class AgenticRequestValidationError whose message begins
// "<adapter> request: ". It does no I/O and is safe for concurrent use.
func Decode(adapter string, b []byte) (*Decoder, error) {
	var m map[string]any
	if err := wire.DecodeStrict(b, &m); err != nil {
		return nil, wire.Errorf(wire.AgenticRequestValidationError, "%s request: %v", adapter, err)
	}
	return &Decoder{adapter: adapter, m: m, read: make(map[string]bool, len(m))}, nil
}

// Read decodes b as Decode does and reads the request with read, which
// takes each field from d into an R and records the problems it finds with
// Bad and BadElem. It returns that R, or the zero R and one error naming
// every problem (Err). It does no I/O of its own and is safe for concurrent
// use when read is.
func Read[R any](adapter string, b []byte, read func(d *Decoder) R) (R, error) {
	var zero R
	d, err := Decode(adapter, b)
	if err != nil {
		return zero, err
	}
	req := read(d)
	if err := d.Err(); err != nil {
		return zero, err
	}
	return req, nil
}

// get claims field k and returns its value (nil when absent).
func (d *Decoder) get(k string) any {
	d.read[k] = true
	return d.m[k]
}

func (d *Decoder) add(field, msg string) {
	d.problems = append(d.problems, problem{field, msg})
}

// wrongType records that k (or its element i, when i >= 0) is not of the
// wanted type.
func (d *Decoder) wrongType(k string, i int, want string, v any) {
	if i < 0 {
		d.Bad(k, "want %s, got %s", want, typeName(v))
		return
	}
	d.BadElem(k, i, "want %s, got %s", want, typeName(v))
}

// String returns field k as a string; absent, nil or of another type it
// returns "" (the last is a problem).
func (d *Decoder) String(k string) string {
	switch v := d.get(k).(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		d.wrongType(k, -1, "a string", v)
		return ""
	}
}

// Arg is String for a value that becomes one argv element of a child
// process: a NUL byte in it is also a problem, and yields "".
func (d *Decoder) Arg(k string) string {
	s := d.String(k)
	if strings.IndexByte(s, 0) >= 0 {
		d.Bad(k, "%s", nulProblem)
		return ""
	}
	return s
}

const nulProblem = "contains a NUL byte, which no argv element can carry"

// Strings returns field k as a list of strings; absent or nil it returns
// nil. A value that is not an array, or an element that is not a string,
// is a problem (each bad element is named) and yields nil.
func (d *Decoder) Strings(k string) []string { return d.list(k, false) }

// Args is Strings for a list whose elements become argv elements: an
// element holding a NUL byte is also a problem.
func (d *Decoder) Args(k string) []string { return d.list(k, true) }

func (d *Decoder) list(k string, argv bool) []string {
	v := d.get(k)
	if v == nil {
		return nil
	}
	items, ok := v.([]any)
	if !ok {
		d.wrongType(k, -1, "an array of strings", v)
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		s, ok := it.(string)
		switch {
		case !ok:
			d.wrongType(k, i, "a string", it)
		case argv && strings.IndexByte(s, 0) >= 0:
			d.BadElem(k, i, "%s", nulProblem)
		default:
			out = append(out, s)
		}
	}
	if len(out) < len(items) {
		return nil
	}
	return out
}

// Bool returns field k as a bool; absent, nil or of another type it returns
// false (the last is a problem).
func (d *Decoder) Bool(k string) bool {
	switch v := d.get(k).(type) {
	case nil:
		return false
	case bool:
		return v
	default:
		d.wrongType(k, -1, "a boolean", v)
		return false
	}
}

// Int returns field k as an integer in [lo, hi]; absent or nil it returns
// 0. A value of another type (a float too, even a whole one) or out of the
// range is a problem and yields 0.
func (d *Decoder) Int(k string, lo, hi int) int {
	v := d.get(k)
	if v == nil {
		return 0
	}
	n, huge, ok := integer(v)
	switch {
	case !ok:
		d.wrongType(k, -1, "an integer", v)
		return 0
	case huge:
		d.Bad(k, "%d is out of range [%d, %d]", v, lo, hi)
		return 0
	case n < int64(lo) || n > int64(hi):
		d.Bad(k, "%d is out of range [%d, %d]", n, lo, hi)
		return 0
	}
	return int(n)
}

// integer returns v as an int64 when it is one of the integer types msgpack
// decodes to; huge says it is a uint64 above math.MaxInt64, which n cannot
// hold.
func integer(v any) (n int64, huge, ok bool) {
	switch v := v.(type) {
	case int8:
		return int64(v), false, true
	case int16:
		return int64(v), false, true
	case int32:
		return int64(v), false, true
	case int64:
		return v, false, true
	case uint8:
		return int64(v), false, true
	case uint16:
		return int64(v), false, true
	case uint32:
		return int64(v), false, true
	case uint64:
		return int64(v), v > math.MaxInt64, true
	}
	return 0, false, false
}

// Value claims field k and returns its value as decoded (nil when absent),
// for a field no typed getter fits; checking it is the caller's business.
func (d *Decoder) Value(k string) any { return d.get(k) }

// Float returns field k as a number in [lo, hi]; absent or nil it returns
// 0. An integer is accepted too. A value of another type, NaN or out of the
// range is a problem and yields 0. Use Has to tell 0 from an absent field.
func (d *Decoder) Float(k string, lo, hi float64) float64 {
	var f float64
	switch v := d.get(k).(type) {
	case nil:
		return 0
	case float32:
		f = float64(v)
	case float64:
		f = v
	case uint64: // all of it, beyond math.MaxInt64 too
		f = float64(v)
	default:
		n, _, ok := integer(v)
		if !ok {
			d.wrongType(k, -1, "a number", v)
			return 0
		}
		f = float64(n)
	}
	if !(f >= lo && f <= hi) { // also refuses NaN
		d.Bad(k, "%v is out of range [%v, %v]", f, lo, hi)
		return 0
	}
	return f
}

// Maps returns field k as a list of maps; absent or nil it returns nil, and
// an empty list gives an empty, non-nil slice. A value that is not an array
// is a problem and yields nil. An element that is not a map is a problem
// (each is named with BadElem) and is nil in the result, so the indexes of
// the result are still those of the request.
func (d *Decoder) Maps(k string) []map[string]any {
	v := d.get(k)
	if v == nil {
		return nil
	}
	items, ok := v.([]any)
	if !ok {
		d.wrongType(k, -1, "an array of maps", v)
		return nil
	}
	out := make([]map[string]any, len(items))
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			d.wrongType(k, i, "a map", it)
			continue
		}
		out[i] = m
	}
	return out
}

// IsUUID reports whether s is a UUID in its canonical 8-4-4-4-12 hex form,
// either case: the form of the session and thread ids the CLI adapters
// publish and accept for a resume.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// TypeName names the msgpack type of v as wire.DecodeStrict decodes it
// ("an integer", "a map", …), for an adapter's own "want …, got …"
// messages about the values it reads with Value or Maps.
func TypeName(v any) string { return typeName(v) }

// Require makes field k a required string: Err names it
// `field "k": required, a non-empty string` when it is absent, nil or "",
// unless a problem was already recorded against it. It also claims k, so it
// is never unknown. It may be called before or after k's getter.
func (d *Decoder) Require(k string) { d.require(k, "") }

// RequireUnless is Require, unless the request holds a non-nil field
// other, whatever its value: a request may carry either, as a turn carries
// a prompt or the tool results that answer the last one. When neither is
// given Err names k as `field "k": required, a non-empty string, unless
// other is given`. Like Require it claims k; it claims nothing of other.
func (d *Decoder) RequireUnless(k, other string) {
	if v := d.m[other]; v != nil {
		d.read[k] = true
		return
	}
	d.require(k, other)
}

func (d *Decoder) require(k, unless string) {
	d.read[k] = true
	d.required = append(d.required, required{k, unless})
}

// Has reports whether field k holds a non-nil value against which no
// problem has been recorded so far. Call it after k's getter; it claims
// nothing.
func (d *Decoder) Has(k string) bool {
	v, ok := d.m[k]
	return ok && v != nil && !d.failed(k)
}

func (d *Decoder) failed(k string) bool {
	return slices.ContainsFunc(d.problems, func(p problem) bool { return p.field == k })
}

// Bad records a problem with field: `field "<field>": ` and the formatted
// text.
func (d *Decoder) Bad(field, format string, args ...any) {
	d.add(field, fmt.Sprintf("field %q: ", field)+fmt.Sprintf(format, args...))
}

// BadElem records a problem with element i of the list field:
// `field "<field>"[i]: ` and the formatted text.
func (d *Decoder) BadElem(field string, i int, format string, args ...any) {
	d.add(field, fmt.Sprintf("field %q[%d]: ", field, i)+fmt.Sprintf(format, args...))
}

// Err returns nil if the request has no problem, else one non-retryable
// *wire.Error of class AgenticRequestValidationError:
// "<adapter> request: <problem>; <problem>; …". Besides the problems
// recorded so far it names every field no getter or Require claimed
// (`unknown field "k"`) and every required field left empty. Problems are
// sorted by field name, those of one field in the order they were found;
// the message is redacted and bounded by wire.Error.Bound, and once it
// would pass wire.MaxErrorText the rest are only counted. Err does not
// change d: calling it again gives the same answer.
func (d *Decoder) Err() error {
	problems := slices.Clone(d.problems)
	for k := range d.m { // in any order: the sort below settles it
		if !d.read[k] {
			problems = append(problems, problem{k, fmt.Sprintf("unknown field %.64q", k)})
		}
	}
	for _, r := range d.required {
		if v := d.m[r.field]; (v == nil || v == "") && !d.failed(r.field) {
			msg := fmt.Sprintf("field %q: required, a non-empty string", r.field)
			if r.unless != "" {
				msg += ", unless " + r.unless + " is given"
			}
			problems = append(problems, problem{r.field, msg})
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.SortStableFunc(problems, func(a, b problem) int { return strings.Compare(a.field, b.field) })
	// Room for the count of what is left out: a request of at most
	// wire.MaxMessageSize bytes holds fewer than ten million values.
	const room = len("; and 9999999 more")
	var msg strings.Builder
	msg.WriteString(d.adapter + " request: ")
	for i, p := range problems {
		if i > 0 {
			need := len("; ") + len(p.msg)
			if i < len(problems)-1 {
				need += room
			}
			if msg.Len()+need > wire.MaxErrorText {
				fmt.Fprintf(&msg, "; and %d more", len(problems)-i)
				break
			}
			msg.WriteString("; ")
		}
		msg.WriteString(p.msg)
	}
	return wire.Errorf(wire.AgenticRequestValidationError, "%s", msg.String())
}

// typeName names the msgpack type of a value as wire.DecodeStrict decodes
// it, for "want …, got …" messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case bool:
		return "a boolean"
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return "an integer"
	case float32, float64:
		return "a float"
	case string:
		return "a string"
	case []byte:
		return "binary"
	case []any:
		return "an array"
	case map[string]any:
		return "a map"
	case time.Time:
		return "a timestamp"
	}
	return fmt.Sprintf("%T", v)
}
