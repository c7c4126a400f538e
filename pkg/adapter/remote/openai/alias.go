package openai

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxFunctionName is the longest function name OpenAI accepts; a name
// must match ^[a-zA-Z0-9_-]{1,64}$.
const MaxFunctionName = 64

// alias is the provider-safe function name a canonical platform tool name
// is sent as (docs/contract.md §10.13: the wire constraint does not rewrite the tool's
// identity). It is a pure function of the name, so the same tool has the
// same alias in every request of a conversation:
//
//   - every character outside [A-Za-z0-9_-] becomes "_" ("fs.read" → "fs_read");
//   - a result longer than 64 bytes keeps its first 55 bytes and ends in "_"
//     and the first 8 hex digits of the SHA-256 of the canonical name.
//
// Two names of one request with the same alias ("fs.read" and "fs_read")
// are refused when the request is validated, so the reverse mapping of a
// request's tools is always one to one.
func alias(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		if r < 0x80 && safeByte(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > MaxFunctionName {
		sum := sha256.Sum256([]byte(name))
		s = s[:MaxFunctionName-9] + "_" + hex.EncodeToString(sum[:4])
	}
	return s
}

func safeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// aliases maps each alias of names back to its canonical name. The names
// must have distinct aliases (Decode guarantees it for a request's tools).
func aliases(names []string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[alias(n)] = n
	}
	return m
}
