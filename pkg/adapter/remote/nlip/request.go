package nlip

import (
	"strings"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
)

// DefaultLanguage is the subformat of the text message when the request
// names none (the NLIP SDK's default).
const DefaultLanguage = "english"

// Request is the typed request of the nlip adapter, decoded strictly from
// msgpack (snake_case keys):
//
//	prompt    the user's text, sent as the NLIP text message (required, non-empty);
//	          after an input_required result it is the user's answer
//	model     optional; when set it must equal the pinned model (the agent's id in
//	          the profile; NLIP itself has no model field, so nothing is sent)
//	language  the text message's subformat (default "english")
//
// An NLIP agent runs its own tools: tools and tool_results are not fields of
// this request, and like any other unknown field they are refused.
type Request struct {
	Prompt   string
	Model    string
	Language string
}

// Decode validates a msgpack request strictly. Every problem is named in
// one AgenticRequestValidationError. It starts nothing and is safe for
// concurrent use.
func Decode(b []byte) (Request, error) { return reqfield.Read(Name, b, read) }

// read takes the request's fields from d and checks them (reqfield.Read).
func read(d *reqfield.Decoder) Request {
	d.Require("prompt")
	req := Request{Prompt: d.String("prompt"), Model: d.String("model"), Language: d.String("language")}
	if l := req.Language; l != "" && (len(l) > 64 || !utf8.ValidString(l) || strings.ContainsFunc(l, func(r rune) bool { return r <= ' ' || r == 0x7f })) {
		d.Bad("language", "%.80q is not a language name (at most 64 characters, no spaces or control characters)", l)
	}
	if req.Language == "" {
		req.Language = DefaultLanguage
	}
	return req
}
