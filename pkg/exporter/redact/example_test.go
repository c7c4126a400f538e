package redact_test

import (
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/exporter/redact"
)

func Example() {
	rules, err := redact.ParseRules([]byte(`
- name: acme_ticket
  pattern: 'ACME-[0-9]{6}'
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	rd, err := redact.New(rules)
	if err != nil {
		fmt.Println(err)
		return
	}
	s := rd.Session() // one per trajectory
	fmt.Println(s.String("ticket ACME-123456, key sk-ant-api03-Qw3rTyUi0pAsDfGh1jKlZxCvBn"))
	fmt.Println(s.Value(map[string]any{"url": "postgres://app:hunter2@db:5432/app"}))
	fmt.Println(s.Counts())
	// Output:
	// ticket [REDACTED:acme_ticket], key [REDACTED:builtin:anthropic_api_key]
	// map[url:postgres://[REDACTED:builtin:url_credentials]@db:5432/app]
	// [{acme_ticket 1} {builtin:anthropic_api_key 1} {builtin:url_credentials 1}]
}

func ExampleParseRules() {
	_, err := redact.ParseRules([]byte(`
- name: greedy
  pattern: 'password=.*'
- name: ""
  pattern: '(ab)+'
`))
	fmt.Println(errors.Is(err, redact.ErrInvalidRule))
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		fmt.Println(e)
	}
	// Output:
	// true
	// invalid redaction rule "greedy": wildcard repetition `(?-s:.*)`: repeat a narrower character class instead
	// invalid redaction rule at index 1 (no name): name is empty
}

func ExampleValidate() {
	fmt.Println(redact.Validate(redact.Rule{Name: "look", Pattern: `secret(?=:)`}))
	fmt.Println(redact.Validate(redact.Rule{Name: "pin", Pattern: `PIN [0-9]{4}`}))
	// Output:
	// invalid redaction rule "look": lookahead is not supported: `(?=`
	// <nil>
}
