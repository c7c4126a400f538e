package pi

import (
	"regexp"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
)

// ResumeField is the request field that takes a Pi session id to continue.
const ResumeField = "resume"

// ThinkingLevels are the values of the request's thinking field, as
// `pi --thinking` accepts them.
var ThinkingLevels = []string{"off", "minimal", "low", "medium", "high", "xhigh"}

// Request is the Pi adapter's typed request, as Decode returns it. Each
// field with a cli tag becomes its flag (pkg/adapter/cli/argv); the prompt is always the
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

// namePattern is a provider or tool name: one token, no comma (tools are
// joined with commas), no leading dash.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$`)

// Decode strictly decodes a msgpack request. Any problem (not a map, an
// unknown field, a wrong type, a missing or unusable prompt, a bad enum, a
// malformed session id) is one *wire.Error of class
// AgenticRequestValidationError naming every bad field. It starts nothing
// and is safe for concurrent use.
func Decode(b []byte) (Request, error) { return cli.DecodeRequest(Name, b, read) }

// read takes the request's fields from d and checks them (cli.DecodeRequest).
func read(d *reqfield.Decoder) Request {
	// Every string becomes (part of) an argv element: Arg and Args refuse a
	// NUL byte.
	req := Request{
		Prompt:             d.Arg("prompt"),
		Provider:           d.Arg("provider"),
		Model:              d.Arg("model"),
		Thinking:           d.Arg("thinking"),
		Tools:              d.Args("tools"),
		NoTools:            d.Bool("no_tools"),
		SystemPrompt:       d.Arg("system_prompt"),
		AppendSystemPrompt: d.Arg("append_system_prompt"),
		Resume:             d.Arg(ResumeField),
	}
	if strings.HasPrefix(req.Prompt, "-") || strings.HasPrefix(req.Prompt, "@") {
		d.Bad("prompt", `must not begin with "-" or "@" (pi would read it as an option or a file to attach); begin it with a space instead`)
	}
	if req.Provider != "" && !namePattern.MatchString(req.Provider) {
		d.Bad("provider", "%q is not a provider name", req.Provider)
	}
	if req.Thinking != "" && !slices.Contains(ThinkingLevels, req.Thinking) {
		d.Bad("thinking", "%q is not one of %s", req.Thinking, strings.Join(ThinkingLevels, ", "))
	}
	for i, t := range req.Tools {
		if !namePattern.MatchString(t) {
			d.BadElem("tools", i, "%q is not a tool name", t)
		}
	}
	if req.NoTools && len(req.Tools) > 0 {
		d.Bad("no_tools", `true while "tools" is set: give one or the other`)
	}
	// A session id the adapter publishes is a UUID (Pi 0.73 writes UUIDv7).
	if req.Resume != "" && !reqfield.IsUUID(req.Resume) {
		d.Bad(ResumeField, "%q is not a pi session id (a UUID)", req.Resume)
	}
	return req
}
