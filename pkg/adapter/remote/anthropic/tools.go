package anthropic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
)

// maxToolName bounds a platform tool name.
const maxToolName = 256

// maxProviderName is the provider's tool name limit: names match
// ^[a-zA-Z0-9_-]{1,64}$.
const maxProviderName = 64

// webSearchName is the name of the provider's web search server tool, and
// webSearchType its versioned type.
const (
	webSearchName = "web_search"
	webSearchType = "web_search_20250305"
)

// alias returns the name a tool is sent under. A name the provider accepts
// is sent unchanged. Any other (a dotted platform name such as "fs.read")
// becomes its provider-safe spelling, each byte outside [A-Za-z0-9_-]
// replaced by "_", cut to leave room for "_" and the first 8 hex digits
// of the SHA-256 of the full name: deterministic, so a checkpoint's
// history keeps meaning the same tool, and distinct for distinct names
// unless 32 bits of SHA-256 collide or a declared name equals another's
// alias, both of which Decode rejects.
func alias(name string) string {
	if providerSafe(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "_" + hex.EncodeToString(sum[:4])
	b := make([]byte, 0, maxProviderName)
	for i := 0; i < len(name) && len(b) < maxProviderName-len(suffix); i++ {
		c := name[i]
		if !safeByte(c) {
			c = '_'
		}
		b = append(b, c)
	}
	return string(b) + suffix
}

func providerSafe(name string) bool {
	if name == "" || len(name) > maxProviderName {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !safeByte(name[i]) {
			return false
		}
	}
	return true
}

func safeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// toolSet is the tools of one turn by provider name.
type toolSet map[string]toolschema.Tool

func newToolSet(tools []toolschema.Tool) toolSet {
	s := make(toolSet, len(tools))
	for _, t := range tools {
		s[alias(t.Name)] = t
	}
	return s
}

// wireTools is the request's tools array: the client tools under their
// provider names, then the web search server tool when enabled.
func wireTools(tools []toolschema.Tool, webSearchMaxUses int) []any {
	var out []any
	for _, t := range tools {
		def := map[string]any{"name": alias(t.Name), "input_schema": t.Schema}
		if t.Description != "" {
			def["description"] = t.Description
		}
		out = append(out, def)
	}
	if webSearchMaxUses > 0 {
		out = append(out, map[string]any{"type": webSearchType, "name": webSearchName, "max_uses": webSearchMaxUses})
	}
	return out
}

// toolResultContent is a tool result's content as the provider takes it:
// a string as is, any other value as its JSON text.
func toolResultContent(output any) (string, error) {
	if s, ok := output.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(output)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
