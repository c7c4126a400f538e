package trajectory

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// NoSchemaSHA256 is the schema_sha256 of a tool given without a schema
// (a bare tool name): the sha256 of the JSON null.
var NoSchemaSHA256 = hashHex([]byte("null"))

func hashHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// pathError is a problem found deep in a tree; each level it unwinds
// through prepends its step, so no path is built unless there is a problem.
type pathError struct {
	steps  []string // innermost last, once reversed
	reason string
}

func (e *pathError) Error() string { return e.path("") + ": " + e.reason }

// path joins the steps under root: keys as .k, indexes as [i].
func (e *pathError) path(root string) string {
	var b strings.Builder
	b.WriteString(root)
	for i := len(e.steps) - 1; i >= 0; i-- {
		b.WriteString(e.steps[i])
	}
	return b.String()
}

func (e *pathError) under(step string) *pathError {
	e.steps = append(e.steps, step)
	return e
}

func keyStep(k string) string {
	if k != "" && strings.IndexFunc(k, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return "." + k
	}
	return fmt.Sprintf("[%.64q]", k)
}

// walker normalises a decoded tree to the value types encoding/json writes
// canonically (nil, bool, string, int64, uint64, float64, []any and
// map[string]any) and, when r is set, redacts every string and map key.
type walker struct {
	r Redactor // nil: normalise only
}

func (w walker) str(s string) string {
	if w.r == nil || s == "" {
		return s
	}
	return w.r.String(s)
}

func (w walker) value(v any) (any, *pathError) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return w.str(v), nil
	case bool:
		return v, nil
	case int:
		return int64(v), nil
	case int8:
		return int64(v), nil
	case int16:
		return int64(v), nil
	case int32:
		return int64(v), nil
	case int64:
		return v, nil
	case uint:
		return unsigned(uint64(v)), nil
	case uint8:
		return int64(v), nil
	case uint16:
		return int64(v), nil
	case uint32:
		return int64(v), nil
	case uint64:
		return unsigned(v), nil
	case float32:
		// The float64 of the shortest decimal that is this float32, so
		// float32(0.1) is written 0.1, as its sender meant.
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(v), 'g', -1, 32), 64)
		return float(f)
	case float64:
		return float(v)
	case json.Number:
		return number(v)
	case []byte:
		// msgpack bin: stored as the string it holds, so it is redacted
		// (encoding/json would write it as base64, past redaction).
		return w.str(string(v)), nil
	case time.Time:
		// msgpack's timestamp extension.
		return w.str(v.UTC().Format(time.RFC3339Nano)), nil
	case map[string]any:
		return w.object(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			n, err := w.value(e)
			if err != nil {
				return nil, err.under("[" + strconv.Itoa(i) + "]")
			}
			out[i] = n
		}
		return out, nil
	}
	return w.reflected(v)
}

// reflected handles the typed maps and slices a caller may build by hand
// (map[string]string, []string, []map[string]any, …).
func (w walker) reflected(v any) (any, *pathError) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, &pathError{reason: fmt.Sprintf("a map with %s keys; keys must be strings", rv.Type().Key())}
		}
		m := make(map[string]any, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			m[it.Key().String()] = it.Value().Interface()
		}
		return w.object(m)
	case reflect.Slice, reflect.Array:
		s := make([]any, rv.Len())
		for i := range s {
			s[i] = rv.Index(i).Interface()
		}
		return w.value(s)
	case reflect.Pointer:
		if rv.IsNil() {
			return nil, nil
		}
		return w.value(rv.Elem().Interface())
	case reflect.String:
		return w.str(rv.String()), nil
	case reflect.Bool:
		return rv.Bool(), nil
	}
	return nil, &pathError{reason: fmt.Sprintf("a value of type %T has no JSON form", v)}
}

func unsigned(u uint64) any {
	if u <= math.MaxInt64 {
		return int64(u)
	}
	return u
}

func float(f float64) (any, *pathError) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, &pathError{reason: fmt.Sprintf("%v has no JSON form", f)}
	}
	if f == 0 {
		return float64(0), nil // -0 and 0 are one value; encoding/json writes -0 as "-0"
	}
	return f, nil
}

// number is the value of a JSON number as Build would have written it:
// the int64 or uint64 its digits spell, or else its float64.
func number(n json.Number) (any, *pathError) {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return u, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, &pathError{reason: fmt.Sprintf("number %.32s is out of range", s)}
	}
	return float(f)
}

func (w walker) object(m map[string]any) (map[string]any, *pathError) {
	return w.objectReserving(m, "")
}

// objectReserving is object with one output key held back (a redacted key
// that happens to spell it is renamed): the request's "tools".
func (w walker) objectReserving(m map[string]any, reserved string) (map[string]any, *pathError) {
	keys, outKeys := w.keys(m, reserved)
	out := make(map[string]any, len(m))
	for i, k := range keys {
		n, err := w.value(m[k])
		if err != nil {
			return nil, err.under(keyStep(k))
		}
		out[outKeys[i]] = n
	}
	return out, nil
}

// keys returns the keys of m sorted, and the key each becomes in the
// output: its redacted form, made unique. When redaction maps two keys to
// one (two secrets, both "[REDACTED]"), the first in sorted order keeps it
// and each later one gets the first free "<key>#<n>", n = 2, 3, …, never a
// key another entry has as its own. So no entry is lost and the result does
// not depend on map order.
func (w walker) keys(m map[string]any, reserved string) (keys, out []string) {
	keys = make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // also orders the walk, so the first problem reported is always the same
	if w.r == nil && reserved == "" {
		return keys, keys // normalising only: keys are unchanged and unique
	}
	out = make([]string, len(keys))
	for i, k := range keys {
		out[i] = w.str(k)
	}
	return keys, unique(out, reserved)
}

// unique renames the later duplicates of out (and any entry equal to
// reserved) as keys describes; out is in the order the names are claimed.
func unique(out []string, reserved string) []string {
	clash := false
	seen := make(map[string]bool, len(out))
	for _, k := range out {
		if seen[k] || k == reserved && reserved != "" {
			clash = true
			break
		}
		seen[k] = true
	}
	if !clash {
		return out
	}
	natural := make(map[string]bool, len(out)+1) // every name as redaction gave it
	for _, k := range out {
		natural[k] = true
	}
	if reserved != "" {
		natural[reserved] = true
	}
	taken := make(map[string]bool, len(out)+1)
	if reserved != "" {
		taken[reserved] = true
	}
	for i, k := range out {
		if !taken[k] {
			taken[k] = true
			continue
		}
		for n := 2; ; n++ {
			c := k + "#" + strconv.Itoa(n)
			if !taken[c] && !natural[c] {
				out[i] = c
				taken[c] = true
				break
			}
		}
	}
	return out
}

// labels redacts a string map, keys too, as object does.
func (w walker) labels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = w.str(k)
	}
	out = unique(out, "")
	res := make(map[string]string, len(m))
	for i, k := range keys {
		res[out[i]] = w.str(m[k])
	}
	return res
}

// compact is the canonical JSON of a normalised value, without a trailing
// newline: sorted keys, no whitespace, no HTML escaping.
func compact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// encode writes t canonically, with its trailing newline. Its open trees
// must already be normalised.
func encode(t *Trajectory) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(256 + 128*len(t.Chunks))
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(t); err != nil {
		return nil, fmt.Errorf("encode trajectory: %w", err)
	}
	return buf.Bytes(), nil
}
