package wire

import "regexp"

// secretPatterns match credential-looking text that must never leave a
// process in an error message or stderr tail: provider API keys, bearer
// tokens and key=value assignments of variables whose names say secret.
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}`),
	regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_\-]{8,}`),
	regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{20,}`),
	regexp.MustCompile(`(?i)\b(bearer)\s+[A-Za-z0-9._~+/=\-]{8,}`),
	regexp.MustCompile(`(?i)\b([A-Z0-9_]*(API_KEY|TOKEN|SECRET|PASSWORD)[A-Z0-9_]*)=\S+`),
	// An optional auth scheme is consumed with the credential, so that
	// "Authorization: Basic <creds>" does not keep <creds>.
	regexp.MustCompile(`(?i)((?:^|[^A-Za-z0-9_])"?(?:x-api-key|authorization|api[_-]?key)"?\s*[:=]\s*)"?(?:(?:bearer|basic|digest|token|negotiate)\s+)?[^\s",}]{4,}"?`),
}

// Redact replaces credential-looking substrings of s with [REDACTED].
// It is safe for concurrent use.
func Redact(s string) string {
	if s == "" {
		return s
	}
	for i, re := range secretPatterns {
		switch i {
		case 3:
			s = re.ReplaceAllString(s, "$1 [REDACTED]")
		case 4:
			s = re.ReplaceAllString(s, "$1=[REDACTED]")
		case 5:
			s = re.ReplaceAllString(s, "$1[REDACTED]")
		default:
			s = re.ReplaceAllString(s, "[REDACTED]")
		}
	}
	return s
}
