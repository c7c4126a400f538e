package claudecode

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// ResumeField is the request field that takes a session id to resume; the
// router injects a conversation's confirmed id into it.
const ResumeField = "resume"

// PermissionModes are the values the CLI's --permission-mode accepts.
var PermissionModes = []string{"default", "acceptEdits", "auto", "bypassPermissions", "dontAsk", "plan"}

// subcommands are the CLI's subcommand names. The CLI's argument parser
// dispatches on the first operand even after "--", so a prompt that is
// exactly one of these would run the subcommand (`update` would update the
// CLI, "help" would print the usage) instead of asking the model; such a
// prompt is refused.
var subcommands = []string{"agents", "auth", "config", "doctor", "help", "install", "mcp", "migrate-installer", "plugin", "setup-token", "update"}

// Request is the typed request of the claude-code adapter, decoded strictly
// from msgpack (snake_case keys). Every field maps to one CLI flag:
//
//	prompt                    the prompt: its own argv element, after "--" (required, non-empty)
//	model                     --model; empty means the pinned model (adapter.Call.Model);
//	                          a value that differs from a non-empty pinned model is refused
//	system_prompt             --system-prompt (replaces the CLI's own prompt text)
//	append_system_prompt      --append-system-prompt
//	permission_mode           --permission-mode, one of PermissionModes; empty leaves the
//	                          CLI's default ("default": read-only tools are auto-allowed)
//	allowed_tools             --allowedTools, repeated once per tool rule (e.g. "Bash")
//	disallowed_tools          --disallowedTools, repeated once per tool rule
//	include_partial_messages  --include-partial-messages: text and thinking also arrive
//	                          as deltas (is_delta=true) before each complete block
//	resume                    --resume <session id> (a UUID, as published in
//	                          metadata.session_id); the resume field of the capabilities
type Request struct {
	Prompt                 string   `msgpack:"prompt"`
	Model                  string   `msgpack:"model,omitempty"`
	SystemPrompt           string   `msgpack:"system_prompt,omitempty"`
	AppendSystemPrompt     string   `msgpack:"append_system_prompt,omitempty"`
	PermissionMode         string   `msgpack:"permission_mode,omitempty"`
	AllowedTools           []string `msgpack:"allowed_tools,omitempty"`
	DisallowedTools        []string `msgpack:"disallowed_tools,omitempty"`
	IncludePartialMessages bool     `msgpack:"include_partial_messages,omitempty"`
	Resume                 string   `msgpack:"resume,omitempty"`
}

// Decode validates a msgpack request strictly. Every problem (an unknown
// field, a wrong type, a missing prompt, a bad enum value or session id) is
// named in one AgenticRequestValidationError. It starts nothing and is safe
// for concurrent use.
func Decode(b []byte) (Request, error) {
	var m map[string]any
	if err := wire.DecodeStrict(b, &m); err != nil {
		return Request{}, wire.Errorf(wire.AgenticRequestValidationError, "%s request: %v", Name, err)
	}
	var req Request
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case "prompt":
			req.Prompt = stringField(k, v, bad)
		case "model":
			req.Model = stringField(k, v, bad)
		case "system_prompt":
			req.SystemPrompt = stringField(k, v, bad)
		case "append_system_prompt":
			req.AppendSystemPrompt = stringField(k, v, bad)
		case "permission_mode":
			req.PermissionMode = stringField(k, v, bad)
			if req.PermissionMode != "" && !slices.Contains(PermissionModes, req.PermissionMode) {
				bad("field %q: %q is not one of %s", k, req.PermissionMode, strings.Join(PermissionModes, ", "))
			}
		case "allowed_tools":
			req.AllowedTools = stringsField(k, v, bad)
		case "disallowed_tools":
			req.DisallowedTools = stringsField(k, v, bad)
		case "include_partial_messages":
			req.IncludePartialMessages = boolField(k, v, bad)
		case ResumeField:
			req.Resume = stringField(k, v, bad)
			if req.Resume != "" && !isUUID(req.Resume) {
				bad("field %q: %q is not a session id (a UUID)", k, req.Resume)
			}
		default:
			bad("unknown field %q", k)
		}
	}
	switch {
	case req.Prompt == "" && !isWrongType(m["prompt"]):
		bad(`field "prompt": required, a non-empty string`)
	case slices.Contains(subcommands, req.Prompt):
		bad(`field "prompt": %q is a claude subcommand name; the CLI would run the subcommand`, req.Prompt)
	}
	if len(problems) > 0 {
		return Request{}, wire.Errorf(wire.AgenticRequestValidationError, "%s request: %s", Name, strings.Join(problems, "; "))
	}
	return req, nil
}

// isWrongType reports whether a prompt value was present but not a string,
// which stringField already reported.
func isWrongType(v any) bool {
	_, isString := v.(string)
	return v != nil && !isString
}

// stringField returns v as a string; nil is the zero value. A NUL byte
// cannot be passed in an argv element and is refused.
func stringField(k string, v any, bad func(string, ...any)) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		if strings.ContainsRune(v, 0) {
			bad("field %q: contains a NUL byte", k)
			return ""
		}
		return v
	}
	bad("field %q: want a string, got %s", k, typeName(v))
	return ""
}

// stringsField returns v as a list of non-empty strings; nil is empty.
func stringsField(k string, v any, bad func(string, ...any)) []string {
	if v == nil {
		return nil
	}
	items, ok := v.([]any)
	if !ok {
		bad("field %q: want an array of strings, got %s", k, typeName(v))
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		s, ok := it.(string)
		switch {
		case !ok:
			bad("field %q[%d]: want a string, got %s", k, i, typeName(it))
		case s == "":
			bad("field %q[%d]: empty", k, i)
		case strings.ContainsRune(s, 0):
			bad("field %q[%d]: contains a NUL byte", k, i)
		default:
			out = append(out, s)
		}
	}
	return out
}

func boolField(k string, v any, bad func(string, ...any)) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	}
	bad("field %q: want a bool, got %s", k, typeName(v))
	return false
}

func typeName(v any) string {
	switch v.(type) {
	case bool:
		return "a bool"
	case string:
		return "a string"
	case float32, float64:
		return "a float"
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64, int, uint:
		return "an integer"
	case []byte:
		return "binary"
	case []any:
		return "an array"
	case map[string]any:
		return "a map"
	}
	return fmt.Sprintf("%T", v)
}

// isUUID reports whether s is a UUID in its canonical 8-4-4-4-12 hex form,
// the form of the CLI's session ids (and the only one its print mode
// accepts for --resume).
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
