package toolschema

import (
	"maps"
	"slices"

	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
)

// Result answers one pending tool call of a conversation: an element of a
// remote adapter's tool_results field.
type Result struct {
	// ToolID is the call's id, as the tool_use chunk's tool_id carried it.
	ToolID string `msgpack:"tool_id"`
	// Output is the tool's output: by convention a string, sent as is, or
	// any JSON value, sent as its JSON text.
	Output any `msgpack:"output,omitempty"`
	// IsError says the tool failed; Output then describes the failure.
	IsError bool `msgpack:"is_error,omitempty"`
}

// Rules are an adapter's own rules for the tools field, on top of those
// Tools always applies. A nil rule is no rule.
type Rules struct {
	// Name checks a tool's name; an error is recorded as
	// `name "<name>": <error>`.
	Name func(name string) error
	// Schema checks a tool's input schema; an error is recorded as
	// `input_schema: <error>`.
	Schema func(schema map[string]any) error
	// Alias is the name a tool reaches the provider under: two tools of one
	// alias are refused. Nil means the name itself.
	Alias func(name string) string
}

var toolKeys = []string{"name", "description", "input_schema"}

// Tools reads field k of d, the tools of a remote adapter's request: a list
// of maps {name, description, input_schema}, each with a non-empty name
// that r.Name accepts, an optional string description, and an input schema
// that r.Schema and CheckSchema accept; no two tools share a name, or an
// alias under r.Alias. Every problem is recorded on d, naming the element;
// then the result is nil. Absent or nil it returns nil, an empty list an
// empty, non-nil slice. It does no I/O.
func Tools(d *reqfield.Decoder, k string, r Rules) []Tool {
	items := d.Maps(k)
	if items == nil {
		return nil
	}
	out := make([]Tool, 0, len(items))
	named := map[string]string{} // a valid tool's alias → its name
	ok := eachMap(d, k, items, toolKeys, func(m map[string]any, problem func(format string, args ...any)) {
		name, nameOK := m["name"].(string)
		switch {
		case !nameOK && m["name"] != nil:
			problem("name: want a string, got %s", reqfield.TypeName(m["name"]))
		case name == "":
			problem("name: required, a non-empty string")
		case r.Name != nil:
			if err := r.Name(name); err != nil {
				problem("name %.64q: %v", name, err)
				nameOK = false
			}
		}
		desc, ok := m["description"].(string)
		if !ok && m["description"] != nil {
			problem("description: want a string, got %s", reqfield.TypeName(m["description"]))
		}
		schema, ok := m["input_schema"].(map[string]any)
		switch {
		case m["input_schema"] == nil:
			problem("input_schema: required, a JSON schema map")
		case !ok:
			problem("input_schema: want a map (a JSON schema), got %s", reqfield.TypeName(m["input_schema"]))
		default:
			if r.Schema != nil {
				if err := r.Schema(schema); err != nil {
					problem("input_schema: %v", err)
				}
			}
			if err := CheckSchema(schema); err != nil {
				problem("input_schema: %v", err)
			}
		}
		if nameOK && name != "" {
			a := name
			if r.Alias != nil {
				a = r.Alias(name)
			}
			switch other, dup := named[a]; {
			case dup && other == name:
				problem("name %.64q: declared twice", name)
			case dup:
				problem("name %.64q: collides with tool %.64q, both would reach the provider as %q", name, other, a)
			default:
				named[a] = name
			}
		}
		out = append(out, Tool{Name: name, Description: desc, Schema: schema})
	})
	if !ok {
		return nil
	}
	return out
}

// ResultRules are an adapter's own rules for the tool_results field, on
// top of those Results always applies.
type ResultRules struct {
	// OptionalID accepts a result without a tool_id (for calls that came
	// without one); the ids given must still be unique.
	OptionalID bool
	// Output checks a result's output (nil when absent); an error is
	// recorded as `output: <error>`. Nil accepts any output.
	Output func(v any) error
}

var resultKeys = []string{"tool_id", "output", "is_error"}

// Results reads field k of d, the tool results of a remote adapter's
// request: a non-empty list of maps {tool_id, output, is_error}, each with
// a non-empty tool_id (unless r.OptionalID) unique in the list, an output
// r.Output accepts and an optional boolean is_error. Whether they answer the
// conversation's pending calls is the adapter's business. Every problem is
// recorded on d, naming the element; then the result is nil. Absent or nil
// it returns nil. It does no I/O.
func Results(d *reqfield.Decoder, k string, r ResultRules) []Result {
	items := d.Maps(k)
	if items == nil {
		return nil
	}
	if len(items) == 0 {
		d.Bad(k, "empty; omit the field, or answer every pending tool call")
		return nil
	}
	out := make([]Result, 0, len(items))
	seen := map[string]bool{}
	ok := eachMap(d, k, items, resultKeys, func(m map[string]any, problem func(format string, args ...any)) {
		id, ok := m["tool_id"].(string)
		switch {
		case m["tool_id"] != nil && !ok:
			problem("tool_id: want a string, got %s", reqfield.TypeName(m["tool_id"]))
		case id == "" && !r.OptionalID:
			problem("tool_id: required, a non-empty string")
		case id != "" && seen[id]:
			problem("tool_id %.64q: answered twice", id)
		case id != "":
			seen[id] = true
		}
		isErr, ok := m["is_error"].(bool)
		if !ok && m["is_error"] != nil {
			problem("is_error: want a boolean, got %s", reqfield.TypeName(m["is_error"]))
		}
		if r.Output != nil {
			if err := r.Output(m["output"]); err != nil {
				problem("output: %v", err)
			}
		}
		out = append(out, Result{ToolID: id, Output: m["output"], IsError: isErr})
	})
	if !ok {
		return nil
	}
	return out
}

// eachMap calls read with each element of the list field k that Maps gave
// as items, in order, after recording each of its keys outside known; a
// problem read records is named after the element. It reports whether no
// element had a problem (Maps names those that are not maps).
func eachMap(d *reqfield.Decoder, k string, items []map[string]any, known []string,
	read func(m map[string]any, problem func(format string, args ...any))) bool {
	clean := true
	for i, m := range items {
		if m == nil { // not a map: Maps named it
			clean = false
			continue
		}
		problem := func(format string, args ...any) { d.BadElem(k, i, format, args...); clean = false }
		for _, key := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(known, key) {
				problem("unknown field %.64q", key)
			}
		}
		read(m, problem)
	}
	return clean
}
