// Package redact provides the redaction engine of trajectory export: it
// removes secrets from every string of a trajectory before a byte of it is
// stored, and records which rules fired and how often, never what they
// removed.
//
// A Redactor holds the built-in detectors (provider API keys, bearer tokens,
// JWTs, PEM private-key blocks, credentials in URLs, AWS and GitHub tokens;
// see BuiltinNames) and a tenant's own rules. Tenant rules are regular
// expressions restricted to a conservative linear subset, checked by walking
// the parsed expression (regexp/syntax) when a rule is loaded: see Validate.
// A Redactor is immutable and safe for concurrent use; each trajectory gets
// its own Session, which counts what fired:
//
//	rd, err := redact.New(rules)
//	s := rd.Session()
//	req := s.Value(decodedRequest)
//	msg := s.String(errorMessage)
//	record := s.Counts()
//
// Every match is replaced by "[REDACTED:<rule name>]". Where matches of
// several rules overlap, the union of their spans is replaced by one marker
// named for the most specific rule (built-ins in the order of BuiltinNames,
// then tenant rules in their order), and only that rule is counted. So no
// byte that any rule matched survives.
package redact
