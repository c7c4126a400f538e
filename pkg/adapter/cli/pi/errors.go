package pi

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// failure is a provider-declared failure Pi reported in-band: the
// errorMessage of an assistant message with stopReason "error" (or
// "aborted"), or the finalError of auto_retry_end.
type failure struct {
	class wire.Class
	msg   string
}

// statusPrefix matches the "<status> <body>" form Pi gives an HTTP error
// (for example `401 {"type":"error","error":{...}}`).
var statusPrefix = regexp.MustCompile(`(?s)^([1-5][0-9]{2})(?:\s+(.*))?$`)

// describe turns Pi's raw error text into a failure with a safe message: the
// HTTP status, the vendor's error type and its message, never the raw body
// (request ids and other fields are dropped), redacted and bounded.
func describe(raw string) failure {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return failure{class: wire.ProviderError, msg: "pi reported an error without a message"}
	}
	status, detail := 0, raw
	if m := statusPrefix.FindStringSubmatch(raw); m != nil {
		status, _ = strconv.Atoi(m[1])
		detail = strings.TrimSpace(m[2])
	}
	kind, text := bodyError(detail)
	var b strings.Builder
	if status != 0 {
		b.WriteString("HTTP " + strconv.Itoa(status))
	}
	if kind != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(kind)
	}
	switch {
	case text != "":
	case kind == "" && detail != "":
		text = detail
	}
	if text != "" {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(text)
	}
	class := classifyMessage(status, strings.ToLower(raw))
	// wire.Errorf redacts credential-looking text and bounds the length.
	return failure{class: class, msg: wire.Errorf(class, "%s", b.String()).Message}
}

// bodyError reads the vendor error shape from a JSON body: Anthropic
// {"type":"error","error":{"type","message"}}, OpenAI
// {"error":{"message","type","code"}} and Google
// {"error":{"code","message","status"}}. Anything else yields nothing.
func bodyError(detail string) (kind, text string) {
	if !strings.HasPrefix(detail, "{") {
		return "", ""
	}
	var body map[string]any
	if json.Unmarshal([]byte(detail), &body) != nil {
		return "", ""
	}
	switch e := body["error"].(type) {
	case map[string]any:
		for _, k := range []string{"type", "status", "code"} {
			if s, ok := e[k].(string); ok && s != "" {
				kind = s
				break
			}
		}
		text, _ = e["message"].(string)
	case string:
		text = e
	}
	if text == "" {
		text, _ = body["message"].(string)
	}
	return kind, strings.TrimSpace(text)
}

// classifyMessage maps an HTTP status and the lower-cased error text to an
// error class: a 5xx other than 529 is the model API's server failure,
// ProviderError, whatever its text says (docs/contract.md §1.5 and docs/contract-notes.md); then
// context overflow (providers answer it with 400 or 413), 401/403 auth,
// 429, 529 and overload quota, other statuses ProviderError, and for
// errors without a status the text (network failures are
// ProviderTransportError).
func classifyMessage(status int, s string) wire.Class {
	switch {
	case status >= 500 && status != 529:
		return wire.ProviderError
	case containsAny(s, "prompt is too long", "context length", "context_length", "context window",
		"maximum context", "too many tokens", "exceeds the context", "input is too long"):
		return wire.ProviderContextError
	case status == 401 || status == 403:
		return wire.ProviderAuthError
	case status == 429 || status == 529 || containsAny(s, "overloaded"):
		return wire.ProviderQuotaError
	case status == 413:
		return wire.ProviderContextError
	case status != 0:
		return wire.ProviderError
	case containsAny(s, "rate limit", "rate_limit", "too many requests", "quota", "resource_exhausted"):
		return wire.ProviderQuotaError
	case containsAny(s, "unauthorized", "authentication", "invalid api key", "no api key", "api key not", "forbidden", "permission denied"):
		return wire.ProviderAuthError
	case containsAny(s, "fetch failed", "connection", "econnrefused", "econnreset", "enotfound", "network",
		"socket hang up", "timed out", "timeout", "terminated", "other side closed"):
		return wire.ProviderTransportError
	}
	return wire.ProviderError
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
