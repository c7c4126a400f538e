// Package toolschema validates tool arguments against the tool's JSON
// Schema centrally, so a provider's lenient (non-strict) tool mode can
// never let malformed arguments reach a tool.
//
// A tool schema is JSON Schema draft 2020-12 unless its $schema names
// another draft the library knows (4, 6, 7, 2019-09: tool schemas made
// with zod and sent by MCP servers often name draft-07), compiled and enforced by
// github.com/santhosh-tekuri/jsonschema/v6: every keyword of the draft
// is enforced, and format is an assertion, not just an annotation. A
// schema the library cannot compile is refused when the request is read
// (CheckSchema), never silently half-enforced. Two rules on top of the
// draft:
//   - a $ref may point only within the schema (such as "#/$defs/name"):
//     nothing is loaded from a file or the network;
//   - pattern and format "regex" use Go's regexp syntax (RE2), so a
//     pattern with lookaround or backreferences does not compile.
//
// A format the library does not know is not enforced.
//
// It also reads the tools and tool_results fields that every remote
// adapter's request shares (Tools, Results), so they are checked, and their
// problems worded, in one place.
package toolschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// ErrInvalid is matched by every validation failure (an *ArgumentsError).
var ErrInvalid = errors.New("tool arguments do not match the schema")

// ErrSchema is matched by every schema that cannot be compiled (a
// *SchemaError).
var ErrSchema = errors.New("not a usable JSON Schema (draft 2020-12)")

// Tool is a tool as a request declares it.
type Tool struct {
	Name        string         `msgpack:"name" json:"name"`
	Description string         `msgpack:"description,omitempty" json:"description,omitempty"`
	Schema      map[string]any `msgpack:"input_schema" json:"input_schema"`
}

// Problem is one thing wrong with a schema or with the arguments checked
// against one.
type Problem struct {
	// Location is a JSON Pointer, in its URI fragment form, into the
	// schema (for a SchemaError) or the arguments (for an ArgumentsError):
	// "#" is the whole document, "#/properties/path" a member of it.
	Location string
	// Reason says what is wrong there, in the validator's words.
	Reason string
}

func (p Problem) String() string { return p.Location + ": " + p.Reason }

// SchemaError is a tool schema that cannot be compiled, so no arguments
// could be checked against it. It matches ErrSchema.
type SchemaError struct {
	// Problems lists what is wrong, ordered by location; never empty.
	Problems []Problem
}

func (e *SchemaError) Error() string { return ErrSchema.Error() + ": " + joinProblems(e.Problems) }

// Is reports whether target is ErrSchema.
func (e *SchemaError) Is(target error) bool { return target == ErrSchema }

// ArgumentsError is tool arguments that do not satisfy the tool's schema.
// It matches ErrInvalid.
type ArgumentsError struct {
	// Problems lists every violation, ordered by location; never empty.
	Problems []Problem
}

func (e *ArgumentsError) Error() string { return ErrInvalid.Error() + ": " + joinProblems(e.Problems) }

// Is reports whether target is ErrInvalid.
func (e *ArgumentsError) Is(target error) bool { return target == ErrInvalid }

// maxProblems bounds the problems an error message lists, and maxReason
// the length of one reason (a reason may quote the value at fault), so an
// error sent back to a caller stays small.
const (
	maxProblems = 16
	maxReason   = 256
)

func joinProblems(ps []Problem) string {
	var b strings.Builder
	for i, p := range ps {
		if i == maxProblems {
			fmt.Fprintf(&b, "; and %d more", len(ps)-maxProblems)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Schema is a compiled tool schema. It is safe for concurrent use.
type Schema struct{ s *jsonschema.Schema }

// base is the URL the compiler knows a tool schema by. Its scheme is
// fetched by nothing, and every reference resolves against it, so one
// that is not to a place within the schema names a URL of its own, which
// the loader refuses.
const base = "agentmesh:///schema.json"

// refuseLoads is the compiler's loader: it loads nothing, so a $ref or
// $schema outside the schema fails the compilation. The compiler serves
// the meta-schemas of the drafts it knows from its own embedded copies
// before it asks a loader.
type refuseLoads struct{}

func (refuseLoads) Load(url string) (any, error) { return nil, errOutside }

var errOutside = errors.New("outside the schema")

// Compile compiles schema, checking it against the draft 2020-12
// meta-schema and resolving its references. A schema that cannot be
// compiled gives a *SchemaError naming every problem. It does no I/O,
// and the schema map is not retained (Compile works on a copy).
func Compile(schema map[string]any) (*Schema, error) {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, &SchemaError{Problems: []Problem{{Location: "#", Reason: "not expressible as JSON: " + err.Error()}}}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b)) // numbers as json.Number, as the compiler wants
	if err != nil {
		return nil, &SchemaError{Problems: []Problem{{Location: "#", Reason: err.Error()}}}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refuseLoads{})
	if err := c.AddResource(base, doc); err != nil {
		return nil, compileError(err)
	}
	s, err := c.Compile(base)
	if err != nil {
		return nil, compileError(err)
	}
	return &Schema{s: s}, nil
}

// Validate checks args against s and returns every violation, each naming
// its location in args, as an *ArgumentsError; nil if there is none.
// Numbers may be any Go integer or float type, or json.Number.
func (s *Schema) Validate(args map[string]any) error {
	err := s.s.Validate(any(args))
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ArgumentsError{Problems: []Problem{{Location: "#", Reason: err.Error()}}}
	}
	return &ArgumentsError{Problems: sorted(problems(ve, nil))}
}

// Validate compiles schema and checks args against it: a *SchemaError if
// schema does not compile, else what (*Schema).Validate gives. To check
// several calls of one tool, Compile once and call (*Schema).Validate.
func Validate(schema map[string]any, args map[string]any) error {
	s, err := Compile(schema)
	if err != nil {
		return err
	}
	return s.Validate(args)
}

// CheckSchema reports, as a *SchemaError, a schema Compile refuses, so a
// bad tool definition fails when the request is validated, not when the
// tool is called. It does no I/O.
func CheckSchema(schema map[string]any) error {
	_, err := Compile(schema)
	return err
}

// compileError words an error of the compiler as a *SchemaError.
func compileError(err error) *SchemaError {
	var (
		sve  *jsonschema.SchemaValidationError
		ve   *jsonschema.ValidationError
		load *jsonschema.LoadURLError
	)
	switch {
	case errors.As(err, &sve) && errors.As(sve.Err, &ve):
		return &SchemaError{Problems: sorted(problems(ve, nil))}
	case errors.As(err, &load) && errors.Is(load.Err, errOutside):
		return &SchemaError{Problems: []Problem{{Location: "#",
			Reason: fmt.Sprintf("%.128q is outside the schema: a $ref may point only within it (such as \"#/$defs/name\"), and nothing is loaded from a file or the network",
				strings.TrimPrefix(load.URL, "agentmesh://"))}}}
	}
	// Other errors (a $ref to a pointer or anchor the schema lacks, a
	// duplicate $id) name the place as a URL: the base stripped, what is
	// left is a pointer into the schema.
	return &SchemaError{Problems: []Problem{{Location: "#", Reason: strings.ReplaceAll(err.Error(), base, "")}}}
}

// printer words the validator's messages in English; its POSIX variant
// writes numbers as JSON does, without grouping (4096, not 4,096).
var printer = message.NewPrinter(language.MustParse("en-US-POSIX"))

// problems appends the violations e records, leaf by leaf. A failure that
// only groups others (the whole schema, a $ref, allOf) gives its causes;
// one whose causes are alternatives that each failed (anyOf, oneOf, not,
// contains) gives itself, with its causes in brackets.
func problems(e *jsonschema.ValidationError, out []Problem) []Problem {
	switch e.ErrorKind.(type) {
	case *kind.Schema, *kind.Reference, *kind.Group, *kind.AllOf:
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				out = problems(c, out)
			}
			return out
		}
	}
	p := Problem{Location: pointer(e.InstanceLocation), Reason: e.ErrorKind.LocalizedString(printer)}
	if len(e.Causes) > 0 {
		var alts []string
		for _, c := range sorted(problems(&jsonschema.ValidationError{ErrorKind: &kind.Group{}, Causes: e.Causes}, nil)) {
			if c.Location == p.Location {
				alts = append(alts, c.Reason)
			} else {
				alts = append(alts, c.String())
			}
		}
		p.Reason += " [" + strings.Join(alts, "; ") + "]"
	}
	p.Reason = truncate(p.Reason)
	return append(out, p)
}

// pointer is the JSON Pointer of tokens in its URI fragment form.
func pointer(tokens []string) string {
	var b strings.Builder
	b.WriteByte('#')
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

func truncate(s string) string {
	if len(s) <= maxReason {
		return s
	}
	cut := maxReason
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// sorted orders ps by location, stably: the validator visits an object's
// properties in map order.
func sorted(ps []Problem) []Problem {
	slices.SortStableFunc(ps, func(a, b Problem) int { return strings.Compare(a.Location, b.Location) })
	return ps
}
