package gemini

import (
	"regexp"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
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

var modelRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@-]*$`)

// Decode strictly decodes a msgpack request. Every problem (unknown field,
// wrong type, missing prompt, bad enum or value) is named in one
// AgenticRequestValidationError. It starts nothing and is safe for
// concurrent use.
func Decode(b []byte) (Request, error) { return cli.DecodeRequest(Name, b, read) }

// read takes the request's fields from d and checks them (cli.DecodeRequest).
func read(d *reqfield.Decoder) Request {
	// Every string becomes an argv element: Arg and Args refuse a NUL byte.
	req := Request{
		Prompt:             d.Arg("prompt"),
		Model:              d.Arg("model"),
		ApprovalMode:       ApprovalMode(d.Arg("approval_mode")),
		Resume:             d.Arg(ResumeField),
		IncludeDirectories: d.Args("include_directories"),
		SystemMD:           d.Arg("system_md"),
	}
	if req.Model != "" && (len(req.Model) > maxModelLen || !modelRE.MatchString(req.Model)) {
		d.Bad("model", `%.64q is not a model name (letters, digits and ._:/@-, at most %d, not starting with "-")`, req.Model, maxModelLen)
	}
	if req.ApprovalMode != "" && !slices.Contains(approvalModes, req.ApprovalMode) {
		d.Bad("approval_mode", "%.64q is not one of default, auto_edit, yolo, plan", req.ApprovalMode)
	}
	// --resume also takes "latest" and an index, which the adapter never
	// passes: they would resume whatever session is newest, not the
	// conversation's.
	if req.Resume != "" && !reqfield.IsUUID(req.Resume) {
		d.Bad(ResumeField, "%.64q is not a session id (a UUID)", req.Resume)
	}
	for i, dir := range req.IncludeDirectories {
		if msg := pathProblem(dir); msg != "" {
			d.BadElem("include_directories", i, "%s", msg)
		}
		// The CLI splits each value on commas, so a comma would let one
		// checked path become several unchecked ones.
		if strings.Contains(dir, ",") {
			d.BadElem("include_directories", i, "a comma is not allowed (the CLI splits on it)")
		}
	}
	if d.Has("system_md") { // even "": an empty path is a problem too
		if msg := pathProblem(req.SystemMD); msg != "" {
			d.Bad("system_md", "%s", msg)
		}
	}
	return req
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
	}
	return ""
}
