package pi

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// ResumeField is the request field that takes a Pi session id to continue.
const ResumeField = "resume"

// ThinkingLevels are the values of the request's thinking field, as
// `pi --thinking` accepts them.
var ThinkingLevels = []string{"off", "minimal", "low", "medium", "high", "xhigh"}

// Request is the Pi adapter's typed request, as Decode returns it. Each
// field with a cli tag becomes its flag (pkg/argv); the prompt is always the
// last argv element, on its own.
type Request struct {
	// Prompt is the user message. Required, non-empty. It must not begin
	// with "-" or "@": pi's argument parser would read it as an option or
	// as a file to attach, and it has no "--" to stop that.
	Prompt string `msgpack:"prompt"`
	// Provider selects a provider Pi knows (models.json or built in).
	Provider string `msgpack:"provider,omitempty" cli:"--provider"`
	// Model is the model id or "provider/id"; empty means the run's pinned
	// model (adapter.Call.Model), and no flag at all when that is empty too.
	Model string `msgpack:"model,omitempty" cli:"--model"`
	// Thinking is one of ThinkingLevels.
	Thinking string `msgpack:"thinking,omitempty" cli:"--thinking"`
	// Tools restricts the enabled tools (for example read,grep,find,ls for
	// a read-only run). Pi has no permission or sandbox mode; this is its
	// only switch over what the agent may do.
	Tools []string `msgpack:"tools,omitempty" cli:"--tools,join=,"`
	// NoTools disables every tool.
	NoTools bool `msgpack:"no_tools,omitempty" cli:"--no-tools"`
	// SystemPrompt replaces Pi's system prompt; AppendSystemPrompt is added
	// to it. Pi reads either as a file when the value names an existing
	// path (relative to the workspace); such a path must stay inside the
	// workspace.
	SystemPrompt       string `msgpack:"system_prompt,omitempty" cli:"--system-prompt"`
	AppendSystemPrompt string `msgpack:"append_system_prompt,omitempty" cli:"--append-system-prompt"`
	// Resume is the id of the session to continue (pi --session). It must
	// be a full session id (a UUID, as Pi prints on its first line): pi
	// treats a value with a slash or a .jsonl suffix as a file path and a
	// shorter value as a prefix of any session's id.
	Resume string `msgpack:"resume,omitempty" cli:"--session"`
}

// sessionIDPattern is a Pi session id: a UUID (Pi 0.73 writes UUIDv7).
var sessionIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// validSessionID reports whether s is a session id the adapter publishes
// and accepts.
func validSessionID(s string) bool { return sessionIDPattern.MatchString(s) }

// namePattern is a provider or tool name: one token, no comma (tools are
// joined with commas), no leading dash.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$`)

// Decode strictly decodes a msgpack request. Any problem (not a map, an
// unknown field, a wrong type, a missing or unusable prompt, a bad enum, a
// malformed session id) is one *wire.Error of class
// AgenticRequestValidationError naming every bad field. It starts nothing
// and is safe for concurrent use.
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
		case "provider":
			req.Provider = stringField(k, v, bad)
		case "model":
			req.Model = stringField(k, v, bad)
		case "thinking":
			req.Thinking = stringField(k, v, bad)
		case "tools":
			req.Tools = stringsField(k, v, bad)
		case "no_tools":
			req.NoTools = boolField(k, v, bad)
		case "system_prompt":
			req.SystemPrompt = stringField(k, v, bad)
		case "append_system_prompt":
			req.AppendSystemPrompt = stringField(k, v, bad)
		case ResumeField:
			req.Resume = stringField(k, v, bad)
		default:
			bad("unknown field %q", k)
		}
	}
	switch v, ok := m["prompt"]; {
	case req.Prompt != "":
		if strings.HasPrefix(req.Prompt, "-") || strings.HasPrefix(req.Prompt, "@") {
			bad(`field "prompt": must not begin with "-" or "@" (pi would read it as an option or a file to attach); begin it with a space instead`)
		}
	case !ok || v == nil || v == "":
		bad(`field "prompt": required, a non-empty string`)
	}
	if req.Provider != "" && !namePattern.MatchString(req.Provider) {
		bad(`field "provider": %q is not a provider name`, req.Provider)
	}
	if req.Thinking != "" && !slices.Contains(ThinkingLevels, req.Thinking) {
		bad(`field "thinking": %q is not one of %s`, req.Thinking, strings.Join(ThinkingLevels, ", "))
	}
	for i, t := range req.Tools {
		if !namePattern.MatchString(t) {
			bad(`field "tools": element %d, %q, is not a tool name`, i, t)
		}
	}
	if req.NoTools && len(req.Tools) > 0 {
		bad(`fields "tools" and "no_tools": give one or the other`)
	}
	if req.Resume != "" && !validSessionID(req.Resume) {
		bad(`field %q: %q is not a pi session id (a UUID)`, ResumeField, req.Resume)
	}
	for _, f := range []struct{ name, v string }{
		{"prompt", req.Prompt}, {"provider", req.Provider}, {"model", req.Model},
		{"system_prompt", req.SystemPrompt}, {"append_system_prompt", req.AppendSystemPrompt},
	} {
		if strings.ContainsRune(f.v, 0) {
			bad("field %q: contains a NUL byte, which no argv element can carry", f.name)
		}
	}
	if len(problems) > 0 {
		return Request{}, wire.Errorf(wire.AgenticRequestValidationError, "%s request: %s", Name, strings.Join(problems, "; "))
	}
	return req, nil
}

// stringField returns v as a string; nil is the zero value.
func stringField(k string, v any, bad func(string, ...any)) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	bad("field %q: want a string, got %s", k, typeName(v))
	return ""
}

// stringsField returns v as a list of strings; nil is the zero value.
func stringsField(k string, v any, bad func(string, ...any)) []string {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		out := make([]string, 0, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				bad("field %q: element %d: want a string, got %s", k, i, typeName(e))
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	bad("field %q: want a list of strings, got %s", k, typeName(v))
	return nil
}

// boolField returns v as a bool; nil is false.
func boolField(k string, v any, bad func(string, ...any)) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	}
	bad("field %q: want a boolean, got %s", k, typeName(v))
	return false
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64, int, uint:
		return "an integer"
	case float32, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	case []byte:
		return "binary data"
	}
	return fmt.Sprintf("%T", v)
}
