package redact

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	long := "a" + strings.Repeat("b", MaxPatternLen) // 257 bytes
	tests := []struct {
		name    string
		in      Rule
		wantErr string // a part of the reason; "" for accepted
	}{
		// Refused: quantified groups.
		{"capture star", Rule{"r", `(ab)*`}, "quantified group"},
		{"group plus", Rule{"r", `(?:ab)+`}, "quantified group"},
		{"alternation repeat", Rule{"r", `(a|b){2,3}`}, "quantified group"},
		{"group quest", Rule{"r", `x(?:yz)?`}, "quantified group"},
		{"nested group", Rule{"r", `id-([0-9]{2}-)+`}, "quantified group"},
		{"capture of one char", Rule{"r", `(a)+`}, "quantified group"},
		{"repeated boundary", Rule{"r", `a\b*`}, "quantified group"},
		// Refused: wildcard repetition.
		{"dot star", Rule{"r", `.*`}, "wildcard repetition"},
		{"dot plus lazy", Rule{"r", `.+?`}, "wildcard repetition"},
		{"dotall star", Rule{"r", `(?s).*`}, "wildcard repetition"},
		{"dot bounded below", Rule{"r", `.{3,}`}, "wildcard repetition"},
		{"dot after literal", Rule{"r", `password=.+`}, "wildcard repetition"},
		{"dotall group", Rule{"r", `k(?s:.)*`}, "wildcard repetition"},
		{"all-class", Rule{"r", `a[\s\S]*`}, "wildcard repetition"},
		{"all-but-newline class", Rule{"r", `a[^\n]+`}, "wildcard repetition"},
		{"dot bounded", Rule{"r", `key.{1,40}`}, "wildcard repetition"},
		// Refused: lookaround.
		{"lookahead", Rule{"r", `(?=x)`}, "lookahead is not supported"},
		{"negative lookahead", Rule{"r", `a(?!x)`}, "lookahead is not supported"},
		{"lookbehind", Rule{"r", `(?<=x)a`}, "lookbehind is not supported"},
		{"negative lookbehind", Rule{"r", `(?<!x)a`}, "lookbehind is not supported"},
		// Refused: backreferences and conditionals.
		{"numbered backreference", Rule{"r", `(a)\1`}, "backreferences are not supported"},
		{"named backreference", Rule{"r", `(?P<n>a)\k<n>`}, "backreferences are not supported"},
		{"python backreference", Rule{"r", `(?P<n>a)(?P=n)`}, "backreferences are not supported"},
		{"g backreference", Rule{"r", `(a)\g1`}, "backreferences are not supported"},
		{"conditional", Rule{"r", `(?(1)a|b)`}, "conditionals are not supported"},
		{"atomic group", Rule{"r", `(?>ab)`}, "atomic groups are not supported"},
		{"possessive", Rule{"r", `a*+`}, "possessive or nested repetition"},
		// Refused: size, emptiness, syntax.
		{"257 characters", Rule{"r", long}, "longer than 256 characters (257)"},
		{"empty expression", Rule{"r", ``}, "expression is empty"},
		{"repeat over cap", Rule{"r", `a{300}`}, "repeat count is over 256"},
		{"repeat over parser cap", Rule{"r", `a{1001}`}, "repeat count is over 256"},
		{"optional only", Rule{"r", `a?`}, "matches the empty string"},
		{"zero repeat", Rule{"r", `x{0}`}, "matches the empty string"},
		{"anchor only", Rule{"r", `^`}, "matches the empty string"},
		{"boundary and star", Rule{"r", `\b[a-z]*\b`}, "matches the empty string"},
		{"empty alternative", Rule{"r", `a|`}, "matches the empty string"},
		{"bad syntax", Rule{"r", `[a-`}, "does not parse: missing closing ]"},
		{"unbalanced", Rule{"r", `(abc`}, "does not parse: missing closing )"},
		// Refused: names.
		{"empty name", Rule{"", `abc`}, "name is empty"},
		{"whitespace name", Rule{"  \t", `abc`}, "name is empty"},
		{"builtin name", Rule{"builtin:jwt", `abc`}, `reserved for built-in detectors`},
		{"long name", Rule{strings.Repeat("n", MaxNameLen+1), `abc`}, "name is longer than 64 characters"},
		{"name with space", Rule{"my rule", `abc`}, "only letters, digits"},
		{"name with bracket", Rule{"x]", `abc`}, "only letters, digits"},

		// Accepted.
		{"literal", Rule{"acme", `ACME-INTERNAL`}, ""},
		{"escaped literal", Rule{"host", `db\.corp\.example\.com`}, ""},
		{"class repeat", Rule{"ticket", `TICKET-[0-9]{4}`}, ""},
		{"bounded range", Rule{"emp", `emp[a-z]{2,8}`}, ""},
		{"perl class", Rule{"ssn", `\b\d{3}-\d{2}-\d{4}\b`}, ""},
		{"optional char", Rule{"colour", `colou?r`}, ""},
		{"anchors", Rule{"line", `(?m)^SECRET:[A-Z]{4}$`}, ""},
		{"literal alternation", Rule{"codename", `falcon|eagle|osprey`}, ""},
		{"case folded", Rule{"project", `(?i)project-x`}, ""},
		{"unbounded class", Rule{"email", `[a-z0-9._]+@example\.com`}, ""},
		{"capture without repeat", Rule{"grp", `id=([0-9]{6})`}, ""},
		{"single dot", Rule{"dot", `v1.2`}, ""},
		{"single-char group", Rule{"ab", `(?:a|b){3}`}, ""}, // parsed as [ab]{3}
		{"negated class", Rule{"quoted", `token="[^"]{8,64}"`}, ""},
		{"repeat at cap", Rule{"hex", `[0-9a-f]{256}`}, ""},
		{"name chars", Rule{"acme:ticket_id-2.v", `T-[0-9]{3}`}, ""},
		{"exactly 256", Rule{"full", long[:MaxPatternLen]}, ""},
	}
	var refused, accepted int
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.in)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate(%q) = %v, want accepted", tt.in.Pattern, err)
				}
				if _, err := New([]Rule{tt.in}); err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidRule) {
				t.Fatalf("Validate(%q) = %v, want ErrInvalidRule", tt.in.Pattern, err)
			}
			var re *RuleError
			if !errors.As(err, &re) {
				t.Fatalf("err %T is not a *RuleError", err)
			}
			if !strings.Contains(re.Reason, tt.wantErr) {
				t.Errorf("reason %q, want it to contain %q", re.Reason, tt.wantErr)
			}
			if re.Name != tt.in.Name || re.Index != -1 {
				t.Errorf("RuleError{Index: %d, Name: %q}, want {-1, %q}", re.Index, re.Name, tt.in.Name)
			}
			if _, err := New([]Rule{tt.in}); !errors.Is(err, ErrInvalidRule) {
				t.Errorf("New accepted a refused rule: %v", err)
			}
		})
		if tt.wantErr == "" {
			accepted++
		} else {
			refused++
		}
	}
	if refused < 20 || accepted < 10 {
		t.Errorf("table has %d refused and %d accepted rules, want >= 20 and >= 10", refused, accepted)
	}
}

func TestRuleErrorNamesTheRule(t *testing.T) {
	tests := []struct {
		name string
		in   *RuleError
		want string
	}{
		{"by name", &RuleError{Index: 3, Name: "acme", Reason: "expression is empty"}, `invalid redaction rule "acme": expression is empty`},
		{"by index", &RuleError{Index: 3, Reason: "name is empty"}, `invalid redaction rule at index 3 (no name): name is empty`},
		{"alone", &RuleError{Index: -1, Name: " ", Reason: "name is empty"}, `invalid redaction rule (no name): name is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.Error(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseRules(t *testing.T) {
	doc := []byte(`
- name: acme
  pattern: 'ACME-[0-9]{6}'
- name: codename
  pattern: falcon|eagle
`)
	rules, err := ParseRules(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{{"acme", "ACME-[0-9]{6}"}, {"codename", "falcon|eagle"}}
	if len(rules) != len(want) || rules[0] != want[0] || rules[1] != want[1] {
		t.Errorf("got %+v, want %+v", rules, want)
	}

	empty, err := ParseRules(nil)
	if err != nil || len(empty) != 0 {
		t.Errorf("empty document: %v, %v; want no rules, no error", empty, err)
	}
}

func TestParseRulesListsEveryRefusal(t *testing.T) {
	doc := []byte(`
- name: good
  pattern: 'ok-[0-9]{3}'
- name: star
  pattern: '(ab)*'
- name: ""
  pattern: 'abc'
- name: good
  pattern: 'other'
- name: look
  pattern: 'a(?=b)'
`)
	_, err := ParseRules(doc)
	if !errors.Is(err, ErrInvalidRule) {
		t.Fatalf("err = %v, want ErrInvalidRule", err)
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("err %T does not join its refusals", err)
	}
	type refusal struct {
		index  int
		name   string
		reason string
	}
	want := []refusal{
		{1, "star", "quantified group"},
		{2, "", "name is empty"},
		{3, "good", "duplicate name (also the rule at index 0)"},
		{4, "look", "lookahead is not supported"},
	}
	errs := joined.Unwrap()
	if len(errs) != len(want) {
		t.Fatalf("got %d refusals (%v), want %d", len(errs), err, len(want))
	}
	for i, e := range errs {
		var re *RuleError
		if !errors.As(e, &re) {
			t.Fatalf("refusal %d is %T, want *RuleError", i, e)
		}
		if re.Index != want[i].index || re.Name != want[i].name || !strings.Contains(re.Reason, want[i].reason) {
			t.Errorf("refusal %d = %+v, want %+v", i, *re, want[i])
		}
	}
	if !strings.Contains(err.Error(), `invalid redaction rule at index 2 (no name): name is empty`) {
		t.Errorf("message %q does not name the unnamed rule by index", err)
	}
}

func TestParseRulesRefusesDocuments(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"unknown key", "- name: a\n  pattern: b\n  regex: c\n", "field regex not found"},
		{"not a list", "name: a\npattern: b\n", "cannot unmarshal"},
		{"bad yaml", "- name: [\n", "rules document"},
		{"two documents", "- name: a\n  pattern: b\n---\n- name: c\n  pattern: d\n", "one YAML document expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRules([]byte(tt.in))
			if !errors.Is(err, ErrInvalidRule) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want ErrInvalidRule containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewRefusesDuplicates(t *testing.T) {
	_, err := New([]Rule{{"a", "x1"}, {"a", "x2"}})
	var re *RuleError
	if !errors.As(err, &re) || re.Index != 1 || !strings.Contains(re.Reason, "duplicate name") {
		t.Errorf("err = %v, want a duplicate-name *RuleError at index 1", err)
	}
}
