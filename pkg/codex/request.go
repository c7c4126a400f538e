package codex

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// ResumeField is the request field that takes a thread id to resume.
const ResumeField = "resume_thread_id"

// Sandbox modes a request may ask for.
const (
	SandboxWorkspaceWrite = "workspace-write"
	SandboxReadOnly       = "read-only"
)

// DefaultSandbox is the sandbox of a request that names none: the model
// may write inside the run's workspace and nowhere else.
const DefaultSandbox = SandboxWorkspaceWrite

// MaxArg bounds one argv element (Linux MAX_ARG_STRLEN less its NUL): a
// longer prompt or instruction could not be passed to the CLI at all.
const MaxArg = 128<<10 - 1

// Request is the Codex adapter's typed request, as Decode returns it.
type Request struct {
	// Prompt is the user turn; required.
	Prompt string `msgpack:"prompt"`
	// Model overrides the pinned model for -m.
	Model string `msgpack:"model,omitempty"`
	// Sandbox is "workspace-write" or "read-only"; empty is DefaultSandbox.
	Sandbox string `msgpack:"sandbox,omitempty"`
	// DeveloperInstructions adds a developer message (new threads only).
	DeveloperInstructions string `msgpack:"developer_instructions,omitempty"`
	// ModelInstructionsFile replaces Codex's base prompt with a file
	// relative to the workspace (new threads only).
	ModelInstructionsFile string `msgpack:"model_instructions_file,omitempty"`
	// ResumeThreadID continues that thread (a UUID from a system chunk's
	// metadata.session_id).
	ResumeThreadID string `msgpack:"resume_thread_id,omitempty"`
}

var (
	uuidRE  = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	modelRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)
)

// Decode validates a msgpack request strictly. Every problem (an unknown
// field, a wrong type, a missing prompt, a bad enum or path) is named in
// one *wire.Error of class AgenticRequestValidationError. It starts
// nothing and is safe for concurrent use.
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
		case "sandbox":
			req.Sandbox = stringField(k, v, bad)
		case "developer_instructions":
			req.DeveloperInstructions = stringField(k, v, bad)
		case "model_instructions_file":
			req.ModelInstructionsFile = stringField(k, v, bad)
		case ResumeField:
			req.ResumeThreadID = stringField(k, v, bad)
		default:
			bad("unknown field %q", k)
		}
	}
	if v := m["prompt"]; req.Prompt == "" && (v == nil || v == "") { // a wrong type is already named
		bad(`field "prompt": required, a non-empty string`)
	}
	switch {
	case req.Prompt == "-":
		bad(`field "prompt": "-" would make codex read the prompt from stdin`)
	case len(req.Prompt) > MaxArg:
		bad(`field "prompt": %d bytes, at most %d`, len(req.Prompt), MaxArg)
	}
	if req.Model != "" && !modelRE.MatchString(req.Model) {
		bad(`field "model": %q is not a model name %s`, req.Model, modelRE)
	}
	switch req.Sandbox {
	case "", SandboxWorkspaceWrite, SandboxReadOnly:
	case "danger-full-access":
		bad(`field "sandbox": "danger-full-access" is not allowed: the model's tools would escape the workspace`)
	default:
		bad(`field "sandbox": %q is not one of "workspace-write", "read-only"`, req.Sandbox)
	}
	if n := len(configArg("developer_instructions", req.DeveloperInstructions)); req.DeveloperInstructions != "" && n > MaxArg {
		bad(`field "developer_instructions": %d bytes once quoted, at most %d`, n, MaxArg)
	}
	if f := req.ModelInstructionsFile; f != "" {
		if filepath.IsAbs(f) || slices.Contains(strings.FieldsFunc(f, func(r rune) bool { return r == '/' }), "..") {
			bad(`field "model_instructions_file": %q must be relative to the workspace, without ".."`, f)
		}
	}
	if id := req.ResumeThreadID; id != "" && !uuidRE.MatchString(id) {
		bad(`field %q: %q is not a thread id (a UUID)`, ResumeField, id)
	}
	for _, f := range []struct{ name, v string }{
		{"prompt", req.Prompt}, {"model", req.Model}, {"developer_instructions", req.DeveloperInstructions},
		{"model_instructions_file", req.ModelInstructionsFile},
	} {
		if strings.ContainsRune(f.v, 0) {
			bad("field %q: contains a NUL byte", f.name)
		} else if !utf8.ValidString(f.v) {
			bad("field %q: not valid UTF-8", f.name)
		}
	}
	if len(problems) > 0 {
		return Request{}, wire.Errorf(wire.AgenticRequestValidationError, "%s request: %s", Name, strings.Join(problems, "; "))
	}
	return req, nil
}

// stringField returns v as a string; nil is the zero value, as in a struct
// decode.
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

func typeName(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64, int, uint:
		return "an integer"
	case float32, float64:
		return "a number"
	case []byte:
		return "binary"
	case []any:
		return "an array"
	case map[string]any:
		return "a map"
	}
	return fmt.Sprintf("%T", v)
}
