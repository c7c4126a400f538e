package nlip

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Message is an NLIP message (ECMA-430) as JSON: a format, its subformat
// and content, an optional label and messagetype, and submessages of the
// same shape. The request the adapter sends is one; so is the response.
type Message struct {
	MessageType string       `json:"messagetype,omitempty"`
	Format      string       `json:"format"`
	Subformat   string       `json:"subformat"`
	Content     any          `json:"content"`
	Label       string       `json:"label,omitempty"`
	Submessages []Submessage `json:"submessages,omitempty"`
}

// Submessage is one submessage of a Message.
type Submessage struct {
	Format    string `json:"format"`
	Subformat string `json:"subformat"`
	Content   any    `json:"content"`
	Label     string `json:"label,omitempty"`
}

// The NLIP formats, and the reserved token subformat and label this
// adapter reads.
const (
	FormatText       = "text"
	FormatToken      = "token"
	FormatStructured = "structured"
	FormatBinary     = "binary"
	FormatLocation   = "location"
	FormatError      = "error"
	FormatGeneric    = "generic"

	// SubformatConversation marks the token that carries the
	// conversation's identity between requests.
	SubformatConversation = "conversation"
	// LabelInputRequired marks the text part in which the agent asks the
	// user something before it can go on (this adapter's convention; see
	// doc.go).
	LabelInputRequired = "input_required"
)

// Result is the one mapping of an agent's answer, the same on every path:
// Content is the text for the user, Context the conversation token the
// next request carries (checkpoint only), InputRequired the agent's
// question when it needs the user's input.
type Result struct {
	Content       string
	Context       string
	InputRequired string
}

// Failure is a provider-declared failure: the agent answered with error
// parts.
type Failure struct{ Message string }

// RequestMessage builds the NLIP message for prompt, with the conversation's
// token when the conversation goes on.
func RequestMessage(prompt, language, conversation string) Message {
	m := Message{Format: FormatText, Subformat: language, Content: prompt}
	if conversation != "" {
		m.Submessages = []Submessage{{Format: FormatToken, Subformat: SubformatConversation, Content: conversation}}
	}
	return m
}

var messageKeys = []string{"messagetype", "control", "format", "subformat", "content", "label", "submessages"}
var submessageKeys = []string{"format", "subformat", "content", "label"}

// Parse reads an agent's response body: one JSON object, an NLIP message.
// Field names are matched without regard to case (the schema spells them
// Format, the SDK format). It returns the Result, or a Failure when the
// message carries error parts, or a ProviderProtocolError for a body that
// is not such a message or holds a part this adapter cannot map: an
// unknown field, an unknown format, or a structured, binary, location or
// generic part, which has no text form and is refused rather than dropped.
// Tokens other than the conversation token (authorization, …) are
// protocol data for the agent's own use and are neither kept nor emitted.
func Parse(body []byte) (Result, *Failure, error) {
	var top map[string]any
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return Result{}, nil, protocolErr("the response is not a JSON object: %v", describe(err))
	}
	parts, err := flatten(top)
	if err != nil {
		return Result{}, nil, err
	}
	var res Result
	var texts, questions, errs []string
	for i, p := range parts {
		where := "the message"
		if i > 0 {
			where = fmt.Sprintf("submessage %d", i-1)
		}
		switch strings.ToLower(p.format) {
		case FormatText:
			s, ok := p.content.(string)
			if !ok {
				return Result{}, nil, protocolErr("%s: text content is %s, not a string", where, ndjson.TypeName(p.content))
			}
			if s == "" {
				continue
			}
			if strings.EqualFold(p.label, LabelInputRequired) {
				questions = append(questions, s)
			} else {
				texts = append(texts, s)
			}
		case FormatToken:
			s, ok := p.content.(string)
			if !ok {
				return Result{}, nil, protocolErr("%s: token content is %s, not a string", where, ndjson.TypeName(p.content))
			}
			if strings.HasPrefix(strings.ToLower(p.subformat), SubformatConversation) && res.Context == "" {
				res.Context = s
			}
		case FormatError:
			switch c := p.content.(type) {
			case string:
				if c != "" {
					errs = append(errs, c)
				}
			case float64:
				errs = append(errs, fmt.Sprintf("code %v", c))
			default:
				return Result{}, nil, protocolErr("%s: error content is %s", where, ndjson.TypeName(p.content))
			}
		case FormatStructured, FormatBinary, FormatLocation, FormatGeneric:
			return Result{}, nil, protocolErr("%s: a %s part (subformat %.64q) has no text form; this adapter maps text, conversation tokens and errors only",
				where, strings.ToLower(p.format), p.subformat)
		default:
			return Result{}, nil, protocolErr("%s: format %.64q is not an NLIP format", where, p.format)
		}
	}
	if len(errs) > 0 {
		return Result{}, &Failure{Message: strings.Join(errs, "; ")}, nil
	}
	res.Content = strings.Join(texts, "\n")
	res.InputRequired = strings.Join(questions, "\n")
	return res, nil, nil
}

type part struct {
	format, subformat, label string
	content                  any
}

// flatten checks the message's shape and lists it and its submessages.
func flatten(top map[string]any) ([]part, error) {
	m, err := fold(top, messageKeys, "the message")
	if err != nil {
		return nil, err
	}
	if v, ok := m["messagetype"]; ok && v != nil {
		if _, ok := v.(string); !ok {
			return nil, protocolErr("messagetype is %s, not a string", ndjson.TypeName(v))
		}
	}
	if v, ok := m["control"]; ok && v != nil {
		if _, ok := v.(bool); !ok {
			return nil, protocolErr("control is %s, not a boolean", ndjson.TypeName(v))
		}
	}
	first, err := readPart(m, "the message")
	if err != nil {
		return nil, err
	}
	parts := []part{first}
	subs, ok := m["submessages"]
	if !ok || subs == nil {
		return parts, nil
	}
	list, ok := subs.([]any)
	if !ok {
		return nil, protocolErr("submessages is %s, not an array", ndjson.TypeName(subs))
	}
	for i, s := range list {
		where := fmt.Sprintf("submessage %d", i)
		sm, ok := s.(map[string]any)
		if !ok {
			return nil, protocolErr("%s is %s, not an object", where, ndjson.TypeName(s))
		}
		sm, err := fold(sm, submessageKeys, where)
		if err != nil {
			return nil, err
		}
		p, err := readPart(sm, where)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// fold lower-cases m's keys and refuses an unknown or repeated one.
func fold(m map[string]any, known []string, where string) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		lk := strings.ToLower(k)
		if !slices.Contains(known, lk) {
			return nil, protocolErr("%s: field %.64q is unknown", where, k)
		}
		if _, dup := out[lk]; dup {
			return nil, protocolErr("%s: field %.64q is repeated", where, k)
		}
		out[lk] = v
	}
	return out, nil
}

func readPart(m map[string]any, where string) (part, error) {
	format, ok := m["format"].(string)
	if !ok || format == "" {
		return part{}, protocolErr("%s: format is missing", where)
	}
	sub, ok := m["subformat"].(string)
	if !ok {
		return part{}, protocolErr("%s: subformat is missing", where)
	}
	content, ok := m["content"]
	if !ok {
		return part{}, protocolErr("%s: content is missing", where)
	}
	label := ""
	if l, ok := m["label"]; ok && l != nil {
		if label, ok = l.(string); !ok {
			return part{}, protocolErr("%s: label is %s, not a string", where, ndjson.TypeName(l))
		}
	}
	return part{format: format, subformat: sub, label: label, content: content}, nil
}

// SystemChunk is the first chunk of every attempt whose agent answered:
// provider, the pinned agent id as the model, and the capabilities.
func SystemChunk(model string) wire.Chunk {
	caps := Capabilities
	return wire.Chunk{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: Name, Model: model, Capabilities: &caps}}
}

// Chunks is the one projection of a Result into the stream, after the
// system chunk: one complete text chunk holding the content and, when the
// agent asks something, its question after a blank line (no text chunk
// when both are empty), then the result chunk, whose stop_reason is
// "input_required" when the agent asks something and "end_turn" otherwise.
// The context never enters a chunk.
func Chunks(res Result) []wire.Chunk {
	var out []wire.Chunk
	var text []string
	for _, s := range []string{res.Content, res.InputRequired} {
		if s != "" {
			text = append(text, s)
		}
	}
	if len(text) > 0 {
		out = append(out, wire.Chunk{Type: wire.ChunkText, Content: strings.Join(text, "\n\n")})
	}
	stop := "end_turn"
	if res.InputRequired != "" {
		stop = "input_required"
	}
	return append(out, wire.Chunk{Type: wire.ChunkResult, Metadata: wire.Metadata{StopReason: stop}})
}

// FailureChunk is the projection of a provider-declared failure: exactly
// one error chunk, after the system chunk and with nothing after it.
func FailureChunk(f *Failure) wire.Chunk {
	e := wire.Errorf(ClassifyMessage(f.Message), "nlip: %s", f.Message)
	return wire.Chunk{Type: wire.ChunkError, Content: e.Message, IsError: true, Metadata: wire.Metadata{ErrorClass: e.Class}}
}

// ClassifyMessage types an agent's error text: rate limits and overload
// are ProviderQuotaError, authorization ProviderAuthError, an over-long
// input ProviderContextError, anything else ProviderError.
func ClassifyMessage(msg string) wire.Class {
	low := strings.ToLower(msg)
	has := func(subs ...string) bool {
		return slices.ContainsFunc(subs, func(s string) bool { return strings.Contains(low, s) })
	}
	switch {
	case has("unauthorized", "forbidden", "authentication", "not authorized", "invalid token"):
		return wire.ProviderAuthError
	case has("rate limit", "too many requests", "overloaded", "quota", "try again later"):
		return wire.ProviderQuotaError
	case has("context length", "context window", "too long"):
		return wire.ProviderContextError
	}
	return wire.ProviderError
}

func protocolErr(format string, args ...any) *wire.Error {
	return wire.Errorf(wire.ProviderProtocolError, "nlip: "+format, args...)
}

func describe(err error) string {
	if err == nil {
		return "null"
	}
	return err.Error()
}
