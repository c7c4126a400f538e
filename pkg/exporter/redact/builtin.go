package redact

import "strings"

// A detector is a built-in rule: a hand-written matcher run at each
// occurrence of one of its literals. Every detector's match starts at (or,
// for the labelled ones, contains) one of its literals, so text without any
// of them costs one strings.Index per literal and nothing else.
//
// Each matcher reads forward only over runs of a fixed character class from
// the literal, and says where the next candidate may start, so that the
// scan is linear in the input whatever it holds.
type detector struct {
	name string
	lits []string
	// boundary: the literal must not follow a letter, digit or '_'.
	boundary bool
	// match is called with the literal found at p. It returns the span to
	// replace, [lo, hi), and ok; next is where the search for this
	// detector resumes (> p), whether it matched or not.
	match func(s string, p int, lit string, st *scanState) (lo, hi, next int, ok bool)
}

// scanState is what a detector may remember during one scan of one string.
type scanState struct {
	// pemNoEnd is a position from which no "-----END " follows, or -1 when
	// that is not known yet.
	pemNoEnd int
}

// byteClass is a set of ASCII bytes.
type byteClass [256]bool

func class(spans ...string) *byteClass {
	var c byteClass
	for _, sp := range spans {
		if len(sp) == 3 && sp[1] == '-' {
			for b := int(sp[0]); b <= int(sp[2]); b++ {
				c[b] = true
			}
			continue
		}
		for i := 0; i < len(sp); i++ {
			c[sp[i]] = true
		}
	}
	return &c
}

// run returns the end of the run of bytes in c that starts at i.
func (c *byteClass) run(s string, i int) int {
	for i < len(s) && c[s[i]] {
		i++
	}
	return i
}

var (
	wordChars   = class("a-z", "A-Z", "0-9", "_")
	keyChars    = class("a-z", "A-Z", "0-9", "_-")     // provider keys, base64url
	alnum       = class("a-z", "A-Z", "0-9")           // GitHub classic tokens
	upperDigits = class("A-Z", "0-9")                  // AWS access key ids
	patChars    = class("a-z", "A-Z", "0-9", "_")      // GitHub fine-grained tokens
	bearerChars = class("a-z", "A-Z", "0-9", "._~+/-") // RFC 6750 b64token, '=' after
	awsSecret   = class("a-z", "A-Z", "0-9", "/+=")
	lowerAlpha  = class("a-z")
	hspace      = class(" \t")
	// userChars and passChars are the userinfo of a URL as it appears in
	// text: up to whitespace, a path, query or fragment, or a quote or
	// bracket that ends the URL in JSON, HTML or prose.
	userChars = notClass(" \t\r\n\f\v/?#@:\"'<>\\`")
	passChars = notClass(" \t\r\n\f\v/?#\"'<>\\`")
	pemLabel  = class("A-Z", "0-9", " ")
	pemBody   = class("a-z", "A-Z", "0-9", "+/=", ":,-. ", "\r\n\t")
)

func notClass(s string) *byteClass {
	var c byteClass
	for b := range c {
		c[b] = true
	}
	for i := 0; i < len(s); i++ {
		c[s[i]] = false
	}
	return &c
}

// Minimum lengths of the random parts. They keep ordinary words that share a
// prefix (sk-learn, the "eyJ" of a word) from matching.
const (
	minProviderKey = 20 // after "sk-" (OpenAI keys carry 48 and more)
	minAnthropic   = 16 // after "sk-ant-"
	googleKeyTail  = 35 // after "AIza": the keys are 39 characters
	githubTail     = 36 // after ghp_ and the like
	githubPATTail  = 22 // after github_pat_
	awsKeyIDTail   = 16 // after AKIA or ASIA: the ids are 20 characters
	minBearer      = 16
	minAWSSecret   = 16 // the keys are 40; a labelled value is taken as one from 16
	minJWTSegment  = 4
)

// detectors are the built-ins, most specific first: where the matches of
// two overlap, the marker is named for the earlier (see package doc).
var detectors = []detector{
	{name: "builtin:pem_private_key", lits: []string{"-----BEGIN "}, match: matchPEM},
	// One matcher for both sk- formats, so that an Anthropic key is never
	// reported as an OpenAI one.
	{name: "builtin:anthropic_api_key", lits: []string{"sk-ant-"}, boundary: true, match: tokenAfter(keyChars, minAnthropic)},
	{name: "builtin:openai_api_key", lits: []string{"sk-"}, boundary: true, match: matchOpenAI},
	{name: "builtin:google_api_key", lits: []string{"AIza"}, boundary: true, match: tokenAfter(keyChars, googleKeyTail)},
	{name: "builtin:github_token", lits: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}, boundary: true, match: matchGitHub},
	{name: "builtin:aws_access_key_id", lits: []string{"AKIA", "ASIA"}, boundary: true, match: matchAWSKeyID},
	{name: "builtin:aws_secret_access_key", lits: []string{"secret_access_key", "SECRET_ACCESS_KEY", "SecretAccessKey", "secretAccessKey", "secret-access-key"}, match: matchAWSSecret},
	{name: "builtin:jwt", lits: []string{"eyJ"}, boundary: true, match: matchJWT},
	{name: "builtin:bearer_token", lits: []string{"Bearer", "bearer", "BEARER"}, boundary: true, match: matchBearer},
	{name: "builtin:url_credentials", lits: []string{"://"}, match: matchURLCredentials},
}

// BuiltinNames returns the names of the built-in detectors, most specific
// first. It returns a new slice on each call.
func BuiltinNames() []string {
	names := make([]string, len(detectors))
	for i, d := range detectors {
		names[i] = d.name
	}
	return names
}

// tokenAfter matches the literal followed by a run of c of at least min
// bytes, and replaces all of it.
func tokenAfter(c *byteClass, min int) func(string, int, string, *scanState) (int, int, int, bool) {
	return func(s string, p int, lit string, _ *scanState) (int, int, int, bool) {
		end := c.run(s, p+len(lit))
		return p, end, max(end, p+1), end-p-len(lit) >= min
	}
}

// matchOpenAI matches sk-, sk-proj-, sk-svcacct-, sk-admin- keys: the
// prefix and a run of base64url characters. A key that starts sk-ant- is
// Anthropic's and is left to that detector.
func matchOpenAI(s string, p int, lit string, _ *scanState) (int, int, int, bool) {
	end := keyChars.run(s, p+len(lit))
	if strings.HasPrefix(s[p:], "sk-ant-") {
		return p, end, max(end, p+1), false
	}
	return p, end, max(end, p+1), end-p-len(lit) >= minProviderKey
}

// matchGitHub matches classic tokens (gh[pousr]_ and 36 base62 characters)
// and fine-grained personal access tokens (github_pat_...).
func matchGitHub(s string, p int, lit string, _ *scanState) (int, int, int, bool) {
	if lit == "github_pat_" {
		end := patChars.run(s, p+len(lit))
		return p, end, end, end-p-len(lit) >= githubPATTail
	}
	end := alnum.run(s, p+len(lit))
	return p, end, end, end-p-len(lit) >= githubTail
}

// matchAWSKeyID matches AKIA or ASIA and exactly 16 upper-case letters or
// digits: a longer run is an ordinary upper-case word, not a key id.
func matchAWSKeyID(s string, p int, lit string, _ *scanState) (int, int, int, bool) {
	end := upperDigits.run(s, p+len(lit))
	return p, end, end, end-p-len(lit) == awsKeyIDTail
}

// matchAWSSecret matches a labelled secret access key
// (aws_secret_access_key = ..., AWS_SECRET_ACCESS_KEY=...,
// "SecretAccessKey": "..."), and replaces the value, keeping the label.
func matchAWSSecret(s string, p int, lit string, _ *scanState) (int, int, int, bool) {
	i := p + len(lit)
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		i++
	}
	i = hspace.run(s, i)
	if i >= len(s) || (s[i] != ':' && s[i] != '=') {
		return 0, 0, p + len(lit), false
	}
	i = hspace.run(s, i+1)
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		i++
	}
	end := awsSecret.run(s, i)
	return i, end, max(end, p+len(lit)), end-i >= minAWSSecret
}

// matchJWT matches three base64url segments separated by dots, the first
// starting eyJ (the encoding of `{"`); the third (signature) may be empty,
// as in an unsigned token.
func matchJWT(s string, p int, _ string, _ *scanState) (int, int, int, bool) {
	e1 := keyChars.run(s, p)
	if e1-p < minJWTSegment || e1 >= len(s) || s[e1] != '.' {
		return 0, 0, e1, false
	}
	e2 := keyChars.run(s, e1+1)
	if e2-e1-1 < minJWTSegment || e2 >= len(s) || s[e2] != '.' {
		return 0, 0, e1, false
	}
	e3 := keyChars.run(s, e2+1)
	return p, e3, e3, true
}

// matchBearer matches "Bearer <token>", as in an Authorization header, and
// replaces the token. The token must be at least minBearer characters and
// not all lower-case letters, so that prose ("bearer authentication") is
// left alone.
func matchBearer(s string, p int, lit string, _ *scanState) (int, int, int, bool) {
	i := p + len(lit)
	j := hspace.run(s, i)
	if j == i {
		return 0, 0, i, false
	}
	end := bearerChars.run(s, j)
	for end < len(s) && s[end] == '=' {
		end++
	}
	if end-j < minBearer || lowerAlpha.run(s, j) == end {
		// Resume right after the literal: the run may hold the real
		// "Bearer <token>" ("Bearer Bearer eyJ..."). A run that holds a
		// candidate after a non-word byte is not all lower-case, so it
		// is either short or a match: the rescans stay bounded.
		return 0, 0, i, false
	}
	return j, end, end, true
}

// matchURLCredentials matches scheme://user:password@ and replaces
// user:password, keeping the scheme and the host. The user may be empty
// (redis://:password@host); the password runs to the last '@' before the
// host, so that an unescaped '@' in it is not left behind.
func matchURLCredentials(s string, p int, lit string, _ *scanState) (int, int, int, bool) {
	next := p + len(lit)
	if p == 0 || !alnum[s[p-1]] { // a scheme ends in a letter or digit
		return 0, 0, next, false
	}
	lo := next
	colon := userChars.run(s, lo)
	if colon >= len(s) || s[colon] != ':' {
		return 0, 0, next, false
	}
	end := passChars.run(s, colon+1)
	at := strings.LastIndexByte(s[colon+1:end], '@')
	if at <= 0 { // no host, or an empty password
		return 0, 0, next, false
	}
	hi := colon + 1 + at
	return lo, hi, hi, true
}

// matchPEM matches a PEM private-key block (RSA, EC, DSA, OPENSSH, PGP,
// ENCRYPTED, PKCS#8 ...) from its BEGIN line through its END line. A block
// without an END line (a truncated stderr tail) is replaced through the end
// of its base64 body and headers.
func matchPEM(s string, p int, lit string, st *scanState) (int, int, int, bool) {
	i := p + len(lit)
	le := pemLabel.run(s, i)
	label := strings.TrimRight(s[i:le], " ")
	if le-i > 64 || !strings.HasPrefix(s[le:], "-----") ||
		!(strings.HasSuffix(label, "PRIVATE KEY") || strings.HasSuffix(label, "PRIVATE KEY BLOCK")) {
		return 0, 0, i, false
	}
	body := le + len("-----")
	k := -1
	if st.pemNoEnd < 0 || body < st.pemNoEnd {
		k = strings.Index(s[body:], "-----END ")
	}
	if k >= 0 {
		e := body + k + len("-----END ")
		fe := pemLabel.run(s, e)
		if strings.HasPrefix(s[fe:], "-----") {
			return p, fe + len("-----"), fe + len("-----"), true
		}
		// "-----END " without a well-formed footer: the body is what
		// runs up to it.
		return p, e, e, true
	}
	// No END line anywhere after this: nor for any later BEGIN, so the
	// search is not repeated (the scan stays linear).
	if st.pemNoEnd < 0 || body < st.pemNoEnd {
		st.pemNoEnd = body
	}
	end := pemBody.run(s, body)
	return p, end, end, true
}
