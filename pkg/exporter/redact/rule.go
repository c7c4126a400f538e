package redact

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Limits of a tenant rule.
const (
	// MaxPatternLen is the longest expression a tenant rule may have, in
	// bytes of its pattern string.
	MaxPatternLen = 256
	// MaxNameLen is the longest name a tenant rule may have, in bytes.
	MaxNameLen = 64
	// MaxRepeat is the largest count a bounded repeat ({n}, {n,m}) may
	// give. regexp/syntax itself stops at 1000; a larger count only inflates
	// the compiled program without making a rule more useful.
	MaxRepeat = 256
	// BuiltinPrefix starts the name of every built-in detector and is
	// refused at the start of a tenant rule's name.
	BuiltinPrefix = "builtin:"
)

// Rule is a tenant redaction rule, as written in a rules file: a YAML list of
// {name, pattern}. Pattern is a Go (RE2) regular expression in the subset
// that Validate accepts; every match of it is replaced by
// "[REDACTED:<name>]".
type Rule struct {
	Name    string `yaml:"name" json:"name"`
	Pattern string `yaml:"pattern" json:"pattern"`
}

// ErrInvalidRule is matched (errors.Is) by every refusal of a rule or of a
// rules document.
var ErrInvalidRule = errors.New("invalid redaction rule")

// RuleError says which rule was refused and why.
type RuleError struct {
	// Index is the rule's position in its list (from 0), or -1 when the
	// rule was validated on its own.
	Index int
	// Name is the rule's name as given (possibly empty).
	Name string
	// Reason says what is wrong, in words meant for the rule's author.
	Reason string
}

// Error names the rule by its name or, when the name is empty, by its
// position, and gives the reason.
func (e *RuleError) Error() string {
	switch {
	case strings.TrimSpace(e.Name) != "":
		return fmt.Sprintf("%v %q: %s", ErrInvalidRule, e.Name, e.Reason)
	case e.Index >= 0:
		return fmt.Sprintf("%v at index %d (no name): %s", ErrInvalidRule, e.Index, e.Reason)
	default:
		return fmt.Sprintf("%v (no name): %s", ErrInvalidRule, e.Reason)
	}
}

// Is reports whether target is ErrInvalidRule.
func (e *RuleError) Is(target error) bool { return target == ErrInvalidRule }

// Validate checks one tenant rule and returns a *RuleError (Index -1) or nil.
//
// The name must be non-empty, at most MaxNameLen bytes of letters, digits,
// '_', '-', '.' and ':', and must not start with BuiltinPrefix.
//
// The pattern must be at most MaxPatternLen bytes and parse as a Go regular
// expression (Perl flags, as regexp.Compile). The parsed expression is then
// walked, and refused if it has:
//   - a quantified group: a repeat (*, +, ?, {n,m}) of anything but a single
//     character or character class, e.g. (ab)*, (?:ab)+, (a|b){2,3};
//   - wildcard repetition: a repeat of any character, e.g. .*, .+?, (?s).*,
//     .{3,}, [\s\S]*, [^\n]+;
//   - a repeat count over MaxRepeat;
//   - a way to match the empty string (a?, x{0}, ^, \b): such a rule would
//     match everywhere;
//   - no way to match at all.
//
// Lookaround, backreferences, conditionals, atomic groups and possessive
// repeats are not RE2 syntax; the parser's refusal is reported as what the
// construct is ("lookahead is not supported", ...). Unbounded repeats of a
// single character or class ([a-z]+, \d*) are accepted: RE2 matches them in
// linear time and they are what rules for identifiers need. A
// non-capturing group that the parser reduces to one character or class,
// such as (?:a|b)* (parsed as [ab]*), is accepted as that class.
func Validate(r Rule) error {
	if reason := checkName(r.Name); reason != "" {
		return &RuleError{Index: -1, Name: r.Name, Reason: reason}
	}
	if _, reason := parsePattern(r.Pattern); reason != "" {
		return &RuleError{Index: -1, Name: r.Name, Reason: reason}
	}
	return nil
}

// validateAll validates every rule of a list, duplicates included, and
// returns every refusal joined.
func validateAll(rules []Rule) error {
	var errs []error
	seen := make(map[string]int, len(rules))
	for i, r := range rules {
		if err := Validate(r); err != nil {
			var re *RuleError
			errors.As(err, &re)
			re.Index = i
			errs = append(errs, re)
			continue
		}
		if j, dup := seen[r.Name]; dup {
			errs = append(errs, &RuleError{Index: i, Name: r.Name,
				Reason: fmt.Sprintf("duplicate name (also the rule at index %d)", j)})
			continue
		}
		seen[r.Name] = i
	}
	return errors.Join(errs...)
}

// ParseRules decodes a rules document, a YAML list of {name, pattern},
// strictly (an unknown key is refused), and validates every rule. It returns
// every refusal: each *RuleError joined with errors.Join, so that a caller
// can list each refused rule and its reason (unwrap with
// interface{ Unwrap() []error }). A document that is not such a list gives
// one error wrapping ErrInvalidRule. An empty document is an empty list.
func ParseRules(doc []byte) ([]Rule, error) {
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	var rules []Rule
	if err := dec.Decode(&rules); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: rules document: %w", ErrInvalidRule, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: rules document: one YAML document expected, found more", ErrInvalidRule)
	}
	if err := validateAll(rules); err != nil {
		return nil, err
	}
	return rules, nil
}

func checkName(name string) string {
	switch {
	case strings.TrimSpace(name) == "":
		return "name is empty"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("name is longer than %d characters (%d)", MaxNameLen, len(name))
	case strings.HasPrefix(name, BuiltinPrefix):
		return fmt.Sprintf("name starts with %q, which is reserved for built-in detectors", BuiltinPrefix)
	}
	for _, c := range name {
		if c > unicode.MaxASCII || !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_-.:", c)) {
			return fmt.Sprintf("name has %q; only letters, digits, '_', '-', '.' and ':' are allowed", c)
		}
	}
	return ""
}

// parsePattern parses and walks a tenant expression. It returns the parsed
// tree, or the reason it is refused.
func parsePattern(p string) (*syntax.Regexp, string) {
	if p == "" {
		return nil, "expression is empty"
	}
	if len(p) > MaxPatternLen {
		return nil, fmt.Sprintf("expression is longer than %d characters (%d)", MaxPatternLen, len(p))
	}
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return nil, parseReason(err)
	}
	if reason := walk(re); reason != "" {
		return nil, reason
	}
	switch {
	case nullable(re):
		return nil, fmt.Sprintf("expression matches the empty string (`%s`), so it would match everywhere", re)
	case re.Op == syntax.OpNoMatch:
		return nil, "expression can never match"
	}
	if _, err := regexp.Compile(p); err != nil { // same parser: a guard, not a second policy
		return nil, "expression does not compile: " + err.Error()
	}
	return re, ""
}

// parseReason turns the parser's refusal into what the construct is, for
// the constructs RE2 leaves out on purpose.
func parseReason(err error) string {
	var se *syntax.Error
	if !errors.As(err, &se) {
		return "expression does not parse: " + err.Error()
	}
	e := se.Expr
	switch se.Code {
	case syntax.ErrInvalidPerlOp:
		switch {
		case strings.HasPrefix(e, "(?="), strings.HasPrefix(e, "(?!"):
			return fmt.Sprintf("lookahead is not supported: `%s`", e)
		case strings.HasPrefix(e, "(?("):
			return fmt.Sprintf("conditionals are not supported: `%s`", e)
		case strings.HasPrefix(e, "(?>"):
			return fmt.Sprintf("atomic groups are not supported: `%s`", e)
		case strings.HasPrefix(e, "(?P=") || e == "(?P":
			return fmt.Sprintf("backreferences are not supported: `%s`", e)
		}
	case syntax.ErrInvalidNamedCapture:
		if strings.HasPrefix(e, "(?<=") || strings.HasPrefix(e, "(?<!") {
			return fmt.Sprintf("lookbehind is not supported: `%s`", truncate(e, 16))
		}
	case syntax.ErrInvalidEscape:
		if len(e) == 2 && (e[1] >= '1' && e[1] <= '9' || e[1] == 'k' || e[1] == 'g') {
			return fmt.Sprintf("backreferences are not supported: `%s`", e)
		}
	case syntax.ErrInvalidRepeatOp:
		return fmt.Sprintf("possessive or nested repetition is not supported: `%s`", e)
	case syntax.ErrInvalidRepeatSize:
		return fmt.Sprintf("repeat count is over %d: `%s`", MaxRepeat, e)
	}
	return fmt.Sprintf("expression does not parse: %s: `%s`", se.Code, truncate(e, 32))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// walk refuses the constructs of the parsed tree outside the subset.
func walk(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		if re.Op == syntax.OpRepeat && (re.Min > MaxRepeat || re.Max > MaxRepeat) {
			return fmt.Sprintf("repeat count is over %d: `%s`", MaxRepeat, re)
		}
		sub := re.Sub[0]
		switch {
		case wildcard(sub):
			return fmt.Sprintf("wildcard repetition `%s`: repeat a narrower character class instead", re)
		case sub.Op == syntax.OpLiteral && len(sub.Rune) == 1, sub.Op == syntax.OpCharClass:
			return ""
		default:
			return fmt.Sprintf("quantified group `%s`: only a single character or character class may be repeated", re)
		}
	}
	for _, sub := range re.Sub {
		if reason := walk(sub); reason != "" {
			return reason
		}
	}
	return ""
}

// wildcard reports whether re is any character, with or without newline,
// however it was spelled (., (?s:.), [\s\S], [^\n]).
func wildcard(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return true
	case syntax.OpCharClass:
		r := re.Rune
		all := len(r) == 2 && r[0] == 0 && r[1] == unicode.MaxRune
		allButNL := len(r) == 4 && r[0] == 0 && r[1] == '\n'-1 && r[2] == '\n'+1 && r[3] == unicode.MaxRune
		return all || allButNL
	}
	return false
}

// nullable reports whether re can match the empty string.
func nullable(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary,
		syntax.OpStar, syntax.OpQuest:
		return true
	case syntax.OpRepeat:
		return re.Min == 0 || nullable(re.Sub[0])
	case syntax.OpPlus, syntax.OpCapture:
		return nullable(re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !nullable(sub) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			if nullable(sub) {
				return true
			}
		}
		return false
	case syntax.OpLiteral:
		return len(re.Rune) == 0
	}
	return false // char classes, any-char, no-match
}
