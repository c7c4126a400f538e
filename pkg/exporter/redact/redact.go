package redact

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Redactor finds secrets with the built-in detectors and a tenant's rules.
// It is immutable and safe for concurrent use; redaction itself goes through
// a Session.
type Redactor struct {
	tenant  []tenantRule
	names   []string // by priority: detectors, then tenant rules
	markers []string // "[REDACTED:<name>]", by priority
}

// New returns a Redactor with the built-in detectors and rules, which are
// validated again as ParseRules does (every refusal joined, each a
// *RuleError). New(nil) has the built-ins only.
func New(rules []Rule) (*Redactor, error) {
	if err := validateAll(rules); err != nil {
		return nil, err
	}
	r := &Redactor{}
	for _, d := range detectors {
		r.add(d.name)
	}
	for _, rule := range rules {
		tree, _ := parsePattern(rule.Pattern) // validated above
		r.tenant = append(r.tenant, compileTenant(rule.Pattern, tree))
		r.add(rule.Name)
	}
	return r, nil
}

func (r *Redactor) add(name string) {
	r.names = append(r.names, name)
	r.markers = append(r.markers, "[REDACTED:"+name+"]")
}

// Session returns a new Session, which redacts one trajectory and counts
// what fired in it.
func (r *Redactor) Session() *Session {
	return &Session{r: r, counts: make([]int, len(r.names)), cands: make([][]candidate, len(detectors))}
}

// Session redacts the strings of one trajectory and counts, per rule, how
// many replacements it made. It is not safe for concurrent use.
type Session struct {
	r      *Redactor
	counts []int         // by priority
	spans  []span        // scratch, reused across calls
	cands  [][]candidate // scratch per detector, reused across calls
	st     scanState     // a detector's memory during one scan; here, so as not to escape per call
}

type span struct{ lo, hi, prio int }

// Fired is one line of a redaction record: a rule and how many
// replacements it made. It never holds what was removed.
type Fired struct {
	Rule  string `json:"rule"`
	Count int    `json:"count"`
}

// Counts returns the rules that fired so far in this session, with how
// often, sorted by rule name. Rules that did not fire are left out.
func (s *Session) Counts() []Fired {
	var out []Fired
	for prio, n := range s.counts {
		if n > 0 {
			out = append(out, Fired{Rule: s.r.names[prio], Count: n})
		}
	}
	slices.SortFunc(out, func(a, b Fired) int { return strings.Compare(a.Rule, b.Rule) })
	return out
}

// String returns in with every match of every rule replaced by
// "[REDACTED:<rule name>]", and counts each replacement under its rule. A
// string with nothing to redact is returned as it is, without allocating.
func (s *Session) String(in string) string {
	spans := s.find(in, s.spans[:0])
	s.spans = spans[:0]
	if len(spans) == 0 {
		return in
	}
	slices.SortFunc(spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.lo, b.lo), cmp.Compare(a.prio, b.prio))
	})
	var b strings.Builder
	b.Grow(len(in))
	last := 0
	flush := func(g span) {
		b.WriteString(in[last:g.lo])
		b.WriteString(s.r.markers[g.prio])
		s.counts[g.prio]++
		last = g.hi
	}
	cur := spans[0]
	for _, sp := range spans[1:] {
		if sp.lo < cur.hi { // overlapping: one marker for the union
			cur.hi = max(cur.hi, sp.hi)
			cur.prio = min(cur.prio, sp.prio)
			continue
		}
		flush(cur)
		cur = sp
	}
	flush(cur)
	b.WriteString(in[last:])
	return b.String()
}

// find appends the spans of every match in s to out.
func (s *Session) find(in string, out []span) []span {
	// Candidates per detector, each list in the order of its text
	// positions unless the detector's literals have different search bytes.
	for d := range s.cands {
		s.cands[d] = s.cands[d][:0]
	}
	for c, lits := range anchors {
		for pos := 0; pos < len(in); {
			i := strings.IndexByte(in[pos:], c)
			if i < 0 {
				break
			}
			at := pos + i
			for _, l := range lits {
				start := at - l.k
				if start < 0 || start+len(l.lit) > len(in) || in[start:start+len(l.lit)] != l.lit ||
					detectors[l.det].boundary && start > 0 && wordChars[in[start-1]] {
					continue
				}
				s.cands[l.det] = append(s.cands[l.det], candidate{at: start, lit: l.lit})
			}
			pos = at + 1
		}
	}
	for det, cands := range s.cands {
		if len(cands) == 0 {
			continue
		}
		if !slices.IsSortedFunc(cands, byPosition) {
			slices.SortFunc(cands, byPosition)
		}
		d := &detectors[det]
		s.st = scanState{pemNoEnd: -1}
		next := 0 // where this detector's search resumes
		for _, c := range cands {
			if c.at < next {
				continue
			}
			lo, hi, nx, ok := d.match(in, c.at, c.lit, &s.st)
			if ok && hi > lo {
				out = append(out, span{lo: lo, hi: hi, prio: det})
			}
			next = max(nx, c.at+1)
		}
	}
	for i := range s.r.tenant {
		out = s.r.tenant[i].find(in, len(detectors)+i, out)
	}
	return out
}

// Value returns a redacted deep copy of v, a tree as encoding/json or
// msgpack decodes it: every string in it, map keys included, goes through
// String. It handles string, []byte, []any, map[string]any, map[any]any,
// []map[string]any, map[string]string and []string; nil, booleans,
// numbers (json.Number included) and time.Time are returned as they are.
// Other strings, slices, arrays, maps and pointers are walked by reflection
// (a named string type keeps its type; slices and maps come back as []any
// and map[string]any or map[any]any). Anything else (a struct, a channel, a
// function) is replaced by a "[REDACTED:unsupported <type>]" string, so
// that nothing leaves unredacted.
//
// Where redacting two keys of one map gives the same key, the later one in
// sorted order of the original keys gets "#2", "#3", ... appended, so that
// no value is lost and the same map always gives the same copy.
func (s *Session) Value(v any) any {
	switch x := v.(type) {
	case nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64,
		uintptr, float32, float64, complex64, complex128, json.Number, time.Time:
		return x
	case string:
		return s.String(x)
	case []byte:
		return []byte(s.String(string(x)))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = s.Value(e)
		}
		return out
	case map[string]any:
		return redactMap(s, x, s.Value)
	case []map[string]any:
		out := make([]map[string]any, len(x))
		for i, m := range x {
			out[i] = redactMap(s, m, s.Value)
		}
		return out
	case map[string]string:
		return redactMap(s, x, s.String)
	case []string:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = s.String(e)
		}
		return out
	case map[any]any:
		return s.anyMap(x)
	}
	return s.reflectValue(reflect.ValueOf(v))
}

// redactMap copies m with its keys and values redacted: first the keys that
// redaction leaves alone, then the others in sorted order, numbered where
// they collide.
func redactMap[V any](s *Session, m map[string]V, val func(V) V) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	type moved struct{ from, to string }
	var changed []moved
	for k, v := range m {
		if rk := s.String(k); rk != k {
			changed = append(changed, moved{k, rk})
			continue
		}
		out[k] = val(v)
	}
	slices.SortFunc(changed, func(a, b moved) int { return strings.Compare(a.from, b.from) })
	for _, c := range changed {
		key := c.to
		for n := 2; ; n++ {
			if _, taken := out[key]; !taken {
				break
			}
			key = fmt.Sprintf("%s#%d", c.to, n)
		}
		out[key] = val(m[c.from])
	}
	return out
}

func (s *Session) anyMap(m map[any]any) map[any]any {
	if m == nil {
		return nil
	}
	str := make(map[string]any)
	out := make(map[any]any, len(m))
	for k, v := range m {
		if ks, ok := k.(string); ok {
			str[ks] = v
			continue
		}
		out[s.Value(k)] = s.Value(v) // non-string keys are scalars
	}
	for k, v := range redactMap(s, str, s.Value) {
		out[k] = v
	}
	return out
}

func (s *Session) reflectValue(rv reflect.Value) any {
	switch rv.Kind() {
	case reflect.Invalid:
		return nil
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return rv.Interface()
	case reflect.String:
		return reflect.ValueOf(s.String(rv.String())).Convert(rv.Type()).Interface()
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil
		}
		return s.reflectValue(rv.Elem())
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return []any(nil)
		}
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = s.reflectValue(rv.Index(i))
		}
		return out
	case reflect.Map:
		if rv.Type().Key().Kind() == reflect.String {
			m := make(map[string]any, rv.Len())
			for it := rv.MapRange(); it.Next(); {
				m[it.Key().String()] = it.Value().Interface()
			}
			return redactMap(s, m, func(v any) any { return s.reflectValue(reflect.ValueOf(v)) })
		}
		m := make(map[any]any, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			m[it.Key().Interface()] = it.Value().Interface()
		}
		return s.anyMap(m)
	}
	if rv.Type() == reflect.TypeFor[time.Time]() {
		return rv.Interface()
	}
	return fmt.Sprintf("[REDACTED:unsupported %s]", rv.Type())
}
