package codex

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
)

// ResumeField is the request field that takes a thread id to resume.
const ResumeField = "resume_thread_id"

// Sandbox modes a request may ask for.
const (
	SandboxWorkspaceWrite = "workspace-write"
	SandboxReadOnly       = "read-only"
)

// sandboxFullAccess is Codex's mode without its own sandbox, which a
// request may not ask for: the adapter passes it only for a run the
// runner's sandbox confines (sandboxMode).
const sandboxFullAccess = "danger-full-access"

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
	modelRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)
)

// Decode validates a msgpack request strictly. Every problem (an unknown
// field, a wrong type, a missing prompt, a bad enum or path) is named in
// one *wire.Error of class AgenticRequestValidationError. It starts
// nothing and is safe for concurrent use.
func Decode(b []byte) (Request, error) { return cli.DecodeRequest(Name, b, read) }

// read takes the request's fields from d and checks them (cli.DecodeRequest).
func read(d *reqfield.Decoder) Request {
	// Every string reaches the CLI's argv: Arg refuses a NUL byte.
	req := Request{
		Prompt:                d.Arg("prompt"),
		Model:                 d.Arg("model"),
		Sandbox:               d.Arg("sandbox"),
		DeveloperInstructions: d.Arg("developer_instructions"),
		ModelInstructionsFile: d.Arg("model_instructions_file"),
		ResumeThreadID:        d.Arg(ResumeField),
	}
	switch {
	case req.Prompt == "-":
		d.Bad("prompt", `"-" would make codex read the prompt from stdin`)
	case len(req.Prompt) > MaxArg:
		d.Bad("prompt", "%d bytes, at most %d", len(req.Prompt), MaxArg)
	}
	if req.Model != "" && !modelRE.MatchString(req.Model) {
		d.Bad("model", "%q is not a model name %s", req.Model, modelRE)
	}
	switch req.Sandbox {
	case "", SandboxWorkspaceWrite, SandboxReadOnly:
	case sandboxFullAccess:
		d.Bad("sandbox", `"danger-full-access" is not allowed: the model's tools would escape the workspace`)
	default:
		d.Bad("sandbox", `%q is not one of "workspace-write", "read-only"`, req.Sandbox)
	}
	if n := len(configArg("developer_instructions", req.DeveloperInstructions)); req.DeveloperInstructions != "" && n > MaxArg {
		d.Bad("developer_instructions", "%d bytes once quoted, at most %d", n, MaxArg)
	}
	if f := req.ModelInstructionsFile; f != "" {
		if filepath.IsAbs(f) || slices.Contains(strings.FieldsFunc(f, func(r rune) bool { return r == '/' }), "..") {
			d.Bad("model_instructions_file", `%q must be relative to the workspace, without ".."`, f)
		}
	}
	if id := req.ResumeThreadID; id != "" && !reqfield.IsUUID(id) {
		d.Bad(ResumeField, "%q is not a thread id (a UUID)", id)
	}
	for _, f := range []struct{ name, v string }{
		{"prompt", req.Prompt}, {"model", req.Model}, {"developer_instructions", req.DeveloperInstructions},
		{"model_instructions_file", req.ModelInstructionsFile},
	} {
		if !utf8.ValidString(f.v) {
			d.Bad(f.name, "not valid UTF-8")
		}
	}
	return req
}
