package geminicli

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// ResumeField is the request field that takes a session id.
const ResumeField = "resume"

// ApprovalMode is the CLI's --approval-mode.
type ApprovalMode string

// The approval modes of Gemini CLI 0.61.0.
const (
	ApprovalDefault  ApprovalMode = "default"
	ApprovalAutoEdit ApprovalMode = "auto_edit"
	ApprovalYolo     ApprovalMode = "yolo"
	ApprovalPlan     ApprovalMode = "plan"
)

var approvalModes = []ApprovalMode{ApprovalDefault, ApprovalAutoEdit, ApprovalYolo, ApprovalPlan}

// Request is the Gemini CLI adapter's typed request, as Validate returns it.
// The package doc maps each field to its flag.
type Request struct {
	Prompt string `msgpack:"prompt"`
	// Model overrides the pinned model; empty uses adapter.Call.Model.
	Model string `msgpack:"model,omitempty"`
	// ApprovalMode empty passes no flag: the CLI's configured default.
	ApprovalMode ApprovalMode `msgpack:"approval_mode,omitempty"`
	// Resume is a session id (a UUID) from an earlier run's system chunk.
	Resume string `msgpack:"resume,omitempty"`
	// IncludeDirectories are extra workspace roots, relative to the run's
	// workspace and contained in it.
	IncludeDirectories []string `msgpack:"include_directories,omitempty"`
	// SystemMD is a file, relative to the run's workspace, whose content
	// replaces the CLI's system prompt.
	SystemMD string `msgpack:"system_md,omitempty"`
}

// maxModelLen bounds a model name; longer is a validation error.
const maxModelLen = 128

var (
	uuidRE  = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	modelRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@-]*$`)
)

// isUUID reports whether s is a session id the CLI's --resume takes as an
// id (it also takes "latest" and an index, which the adapter never passes:
// they would resume whatever session is newest, not the conversation's).
func isUUID(s string) bool { return uuidRE.MatchString(s) }

// Decode strictly decodes a msgpack request. Every problem (unknown field,
// wrong type, missing prompt, bad enum or value) is named in one
// AgenticRequestValidationError. It starts nothing and is safe for
// concurrent use.
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
			if strings.ContainsRune(req.Prompt, 0) {
				bad(`field "prompt": NUL byte (an argv element cannot hold one)`)
			}
		case "model":
			req.Model = stringField(k, v, bad)
			if req.Model != "" && (len(req.Model) > maxModelLen || !modelRE.MatchString(req.Model)) {
				bad(`field "model": %.64q is not a model name (letters, digits and ._:/@-, at most %d, not starting with "-")`, req.Model, maxModelLen)
			}
		case "approval_mode":
			s := stringField(k, v, bad)
			if s != "" && !slices.Contains(approvalModes, ApprovalMode(s)) {
				bad(`field "approval_mode": %.64q is not one of default, auto_edit, yolo, plan`, s)
			}
			req.ApprovalMode = ApprovalMode(s)
		case ResumeField:
			req.Resume = stringField(k, v, bad)
			if req.Resume != "" && !isUUID(req.Resume) {
				bad(`field %q: %.64q is not a session id (a UUID)`, k, req.Resume)
			}
		case "include_directories":
			req.IncludeDirectories = stringsField(k, v, bad)
			for i, d := range req.IncludeDirectories {
				if msg := pathProblem(d); msg != "" {
					bad("field %q[%d]: %s", k, i, msg)
				}
				// The CLI splits each value on commas, so a comma would let
				// one checked path become several unchecked ones.
				if strings.Contains(d, ",") {
					bad("field %q[%d]: a comma is not allowed (the CLI splits on it)", k, i)
				}
			}
		case "system_md":
			req.SystemMD = stringField(k, v, bad)
			if _, ok := v.(string); ok {
				if msg := pathProblem(req.SystemMD); msg != "" {
					bad("field %q: %s", k, msg)
				}
			}
		default:
			bad("unknown field %.64q", k)
		}
	}
	if _, present := m["prompt"]; !present || (req.Prompt == "" && isNilOrString(m["prompt"])) {
		bad(`field "prompt": required, a non-empty string`)
	}
	if len(problems) > 0 {
		return Request{}, wire.Errorf(wire.AgenticRequestValidationError, "%s request: %s", Name, strings.Join(problems, "; "))
	}
	return req, nil
}

// pathProblem says what is wrong with a workspace-relative path, or "".
// Containment (no "..", no absolute path, no symlink out) is checked again
// against the real workspace before launch.
func pathProblem(p string) string {
	switch {
	case p == "":
		return "must not be empty"
	case strings.HasPrefix(p, "-"):
		return `must not start with "-"`
	case strings.ContainsRune(p, 0):
		return "NUL byte"
	}
	return ""
}

func isNilOrString(v any) bool {
	switch v.(type) {
	case nil, string:
		return true
	}
	return false
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

// stringsField returns v as a list of strings; nil is an empty list.
func stringsField(k string, v any, bad func(string, ...any)) []string {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		out := make([]string, 0, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				bad("field %q[%d]: want a string, got %s", k, i, typeName(e))
				continue
			}
			out = append(out, s)
		}
		return out
	case []string:
		return v
	}
	bad("field %q: want a list of strings, got %s", k, typeName(v))
	return nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []byte:
		return "binary"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	case float32, float64:
		return "a float"
	case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, uint:
		return "an integer"
	}
	return fmt.Sprintf("%T", v)
}
