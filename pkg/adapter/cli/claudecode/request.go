package claudecode

import (
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
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
func Decode(b []byte) (Request, error) { return cli.DecodeRequest(Name, b, read) }

// read takes the request's fields from d and checks them (cli.DecodeRequest).
func read(d *reqfield.Decoder) Request {
	// Every string becomes an argv element: Arg and Args refuse a NUL byte.
	req := Request{
		Prompt:                 d.Arg("prompt"),
		Model:                  d.Arg("model"),
		SystemPrompt:           d.Arg("system_prompt"),
		AppendSystemPrompt:     d.Arg("append_system_prompt"),
		PermissionMode:         d.Arg("permission_mode"),
		AllowedTools:           d.Args("allowed_tools"),
		DisallowedTools:        d.Args("disallowed_tools"),
		IncludePartialMessages: d.Bool("include_partial_messages"),
		Resume:                 d.Arg(ResumeField),
	}
	if slices.Contains(subcommands, req.Prompt) {
		d.Bad("prompt", "%q is a claude subcommand name; the CLI would run the subcommand", req.Prompt)
	}
	if req.PermissionMode != "" && !slices.Contains(PermissionModes, req.PermissionMode) {
		d.Bad("permission_mode", "%q is not one of %s", req.PermissionMode, strings.Join(PermissionModes, ", "))
	}
	noneEmpty := func(k string, tools []string) {
		for i, t := range tools {
			if t == "" {
				d.BadElem(k, i, "empty")
			}
		}
	}
	noneEmpty("allowed_tools", req.AllowedTools)
	noneEmpty("disallowed_tools", req.DisallowedTools)
	// A UUID is the form of the CLI's session ids, and the only one its
	// print mode accepts for --resume.
	if req.Resume != "" && !reqfield.IsUUID(req.Resume) {
		d.Bad(ResumeField, "%q is not a session id (a UUID)", req.Resume)
	}
	return req
}
