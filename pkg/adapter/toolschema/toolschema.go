// Package toolschema validates tool arguments against the tool's JSON
// schema centrally, so a provider's lenient (non-strict) tool mode can
// never let malformed arguments reach a tool. It implements the subset of
// JSON Schema that tool definitions use: type (one or a list), properties,
// required, additionalProperties (bool), items, enum, const, minimum,
// maximum, minLength, maxLength, minItems, maxItems, anyOf, oneOf.
//
// It also reads the tools and tool_results fields that every remote
// adapter's request shares (Tools, Results), so they are checked, and their
// problems worded, in one place.
package toolschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// ErrInvalid is matched by every validation failure.
var ErrInvalid = errors.New("tool arguments do not match the schema")

// Tool is a tool as a request declares it.
type Tool struct {
	Name        string         `msgpack:"name" json:"name"`
	Description string         `msgpack:"description,omitempty" json:"description,omitempty"`
	Schema      map[string]any `msgpack:"input_schema" json:"input_schema"`
}

// Validate checks args against schema and returns every problem, each
// naming its path, joined into one error matching ErrInvalid.
func Validate(schema map[string]any, args map[string]any) error {
	v := validator{}
	v.check("$", schema, any(args))
	if len(v.problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(v.problems, "; "))
}

// CheckSchema reports a schema this package cannot enforce (an unknown
// type name, a malformed keyword), so a bad tool definition fails when the
// request is validated, not when the tool is called.
func CheckSchema(schema map[string]any) error {
	var problems []string
	var walk func(path string, s map[string]any)
	walk = func(path string, s map[string]any) {
		for _, t := range typeNames(s["type"]) {
			if !knownTypes[t] {
				problems = append(problems, fmt.Sprintf("%s: unknown type %q", path, t))
			}
		}
		if p, ok := s["properties"]; ok {
			props, ok := p.(map[string]any)
			if !ok {
				problems = append(problems, path+": properties is not an object")
			}
			for k, sub := range props {
				if m, ok := sub.(map[string]any); ok {
					walk(path+"."+k, m)
				} else {
					problems = append(problems, fmt.Sprintf("%s.%s: schema is not an object", path, k))
				}
			}
		}
		if it, ok := s["items"].(map[string]any); ok {
			walk(path+"[]", it)
		}
	}
	walk("$", schema)
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("%w: schema: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return nil
}

var knownTypes = map[string]bool{"object": true, "array": true, "string": true, "number": true, "integer": true, "boolean": true, "null": true}

type validator struct{ problems []string }

func (v *validator) bad(path, format string, args ...any) {
	v.problems = append(v.problems, path+": "+fmt.Sprintf(format, args...))
}

func typeNames(t any) []string {
	switch t := t.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func number(x any) (float64, bool) {
	switch n := x.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func isType(t string, x any) bool {
	switch t {
	case "object":
		_, ok := x.(map[string]any)
		return ok
	case "array":
		_, ok := x.([]any)
		return ok
	case "string":
		_, ok := x.(string)
		return ok
	case "boolean":
		_, ok := x.(bool)
		return ok
	case "null":
		return x == nil
	case "number":
		_, ok := number(x)
		return ok
	case "integer":
		f, ok := number(x)
		return ok && f == math.Trunc(f)
	}
	return false
}

func (v *validator) check(path string, s map[string]any, x any) {
	if types := typeNames(s["type"]); len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return isType(t, x) }) {
		v.bad(path, "want %s, got %T", strings.Join(types, " or "), x)
		return
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return equal(e, x) }) {
		v.bad(path, "%v is not one of %v", x, enum)
	}
	if c, ok := s["const"]; ok && !equal(c, x) {
		v.bad(path, "%v is not %v", x, c)
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		alts, ok := s[kw].([]any)
		if !ok {
			continue
		}
		matches := 0
		for _, a := range alts {
			if m, ok := a.(map[string]any); ok {
				sub := validator{}
				sub.check(path, m, x)
				if len(sub.problems) == 0 {
					matches++
				}
			}
		}
		if matches == 0 || (kw == "oneOf" && matches > 1) {
			v.bad(path, "matches %d of the %s alternatives", matches, kw)
		}
	}
	if f, ok := number(x); ok {
		if lo, ok := number(s["minimum"]); ok && f < lo {
			v.bad(path, "%v is below the minimum %v", f, lo)
		}
		if hi, ok := number(s["maximum"]); ok && f > hi {
			v.bad(path, "%v is above the maximum %v", f, hi)
		}
	}
	switch x := x.(type) {
	case string:
		n := float64(utf8.RuneCountInString(x))
		if lo, ok := number(s["minLength"]); ok && n < lo {
			v.bad(path, "shorter than %v characters", lo)
		}
		if hi, ok := number(s["maxLength"]); ok && n > hi {
			v.bad(path, "longer than %v characters", hi)
		}
	case []any:
		if lo, ok := number(s["minItems"]); ok && float64(len(x)) < lo {
			v.bad(path, "fewer than %v items", lo)
		}
		if hi, ok := number(s["maxItems"]); ok && float64(len(x)) > hi {
			v.bad(path, "more than %v items", hi)
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range x {
				v.check(fmt.Sprintf("%s[%d]", path, i), items, e)
			}
		}
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for _, r := range typeNames(s["required"]) {
			if _, ok := x[r]; !ok {
				v.bad(path, "missing required property %q", r)
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub, ok := props[k].(map[string]any)
			if !ok {
				if ap, set := s["additionalProperties"].(bool); set && !ap {
					v.bad(path, "unknown property %q", k)
				}
				continue
			}
			v.check(path+"."+k, sub, x[k])
		}
	}
}

func equal(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}
