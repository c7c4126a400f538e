package fakemodel

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// API is a wire API the fake serves.
type API string

// The APIs.
const (
	Anthropic API = "anthropic-messages"
	Responses API = "openai-responses"
	Gemini    API = "gemini"
)

// Request is one request as the fake saw it, with its conversation
// normalized across the APIs.
type Request struct {
	API    API
	Method string
	// Path is the request URI, with its query.
	Path   string
	Model  string
	Stream bool
	// Key is the credential the request carried: its x-api-key,
	// x-goog-api-key or Authorization bearer token, else its ?key=.
	Key string
	// System is the system prompt (Anthropic system, Responses
	// instructions, Gemini systemInstruction), texts joined by "\n".
	System string
	// Tools are the names of the tools the request offered.
	Tools    []string
	Messages []Message
	// Scenario is the scenario answered; Reply says what was sent: "text",
	// "thinking", "tool_call <tool>", "tool_done" or "error <status>";
	// "probe" for a HEAD or GET of "/", "no such route" for a 404.
	Scenario Scenario
	Reply    string
	Status   int
}

// Message is one conversation item. Role is the API's own word: "user",
// "assistant", "model" (Gemini), "developer" (Responses) or "tool" (a
// Responses function_call_output).
type Message struct {
	Role  string
	Parts []Part
}

// The part kinds.
const (
	PartText       = "text"
	PartThinking   = "thinking"
	PartToolCall   = "tool_call"
	PartToolResult = "tool_result"
	PartOther      = "other"
)

// Part is one piece of a message. Text is the text, the thinking, a tool
// call's name and JSON arguments ("name {...}"), a tool result's output,
// or for PartOther the part's type.
type Part struct {
	Kind string
	Text string
}

// Text returns every text part of the request's messages, joined by "\n".
func (r Request) Text() string {
	var b []string
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			if p.Kind == PartText {
				b = append(b, p.Text)
			}
		}
	}
	return strings.Join(b, "\n")
}

// LatestUserText is the text of the last user message that carries no
// tool result: the prompt of the current turn.
func (r Request) LatestUserText() string {
	return parsed{messages: r.Messages}.latestUserText()
}

// parsed is a request body reduced to what the fake answers from.
type parsed struct {
	model    string
	stream   bool
	system   string
	messages []Message
	tools    []tool
}

// tool is an offered function tool and its parameter schema's properties.
type tool struct {
	name  string
	props map[string]any
}

func (p parsed) toolNames() []string {
	out := make([]string, 0, len(p.tools))
	for _, t := range p.tools {
		out = append(out, t.name)
	}
	return out
}

func (p parsed) latestUserText() string {
	for i := len(p.messages) - 1; i >= 0; i-- {
		m := p.messages[i]
		if m.Role != "user" || m.has(PartToolResult) || !m.has(PartText) {
			continue
		}
		var texts []string
		for _, pt := range m.Parts {
			if pt.Kind == PartText {
				texts = append(texts, pt.Text)
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

// followsToolResult reports whether a tool result comes after the latest
// user text: the request continues a tool call of this turn.
func (p parsed) followsToolResult() bool {
	for i := len(p.messages) - 1; i >= 0; i-- {
		m := p.messages[i]
		if m.has(PartToolResult) {
			return true
		}
		if m.Role == "user" && m.has(PartText) {
			return false
		}
	}
	return false
}

// lastToolResult is the output of the last tool result.
func (p parsed) lastToolResult() string {
	for i := len(p.messages) - 1; i >= 0; i-- {
		for _, pt := range slices.Backward(p.messages[i].Parts) {
			if pt.Kind == PartToolResult {
				return pt.Text
			}
		}
	}
	return ""
}

func (m Message) has(kind string) bool {
	return slices.ContainsFunc(m.Parts, func(p Part) bool { return p.Kind == kind })
}

// shellNames are the shell tools of the CLIs, in order of preference:
// Claude Code, Pi, Codex (0.171 and older), Gemini CLI.
var shellNames = []string{"Bash", "bash", "exec_command", "shell", "run_shell_command"}

// shellCall is the tool call of the ToolCall scenario.
type shellCall struct {
	name string
	args map[string]any
}

func (c shellCall) argsJSON() string {
	b, _ := json.Marshal(c.args)
	return string(b)
}

// shellCall builds a call of the offered shell tool running ToolCommand,
// with the argument names its schema declares: "command" (a string, or an
// argv array for Codex's old shell tool) or "cmd", and "description" when
// the tool has one.
func (p parsed) shellCall() (shellCall, bool) {
	for _, name := range shellNames {
		i := slices.IndexFunc(p.tools, func(t tool) bool { return t.name == name })
		if i < 0 {
			continue
		}
		t := p.tools[i]
		args := map[string]any{}
		switch {
		case t.props["cmd"] != nil:
			args["cmd"] = ToolCommand
		case propType(t.props["command"]) == "array":
			args["command"] = []string{"bash", "-lc", ToolCommand}
		default:
			args["command"] = ToolCommand
		}
		if t.props["description"] != nil {
			args["description"] = "Print a greeting"
		}
		return shellCall{name: name, args: args}, true
	}
	return shellCall{}, false
}

func propType(v any) string {
	m, _ := v.(map[string]any)
	s, _ := m["type"].(string)
	return strings.ToLower(s)
}

func parse(api API, raw map[string]any) parsed {
	switch api {
	case Anthropic:
		return parseAnthropic(raw)
	case Responses:
		return parseResponses(raw)
	case Gemini:
		return parseGemini(raw)
	}
	return parsed{}
}

func parseAnthropic(raw map[string]any) parsed {
	p := parsed{model: str(raw["model"]), stream: raw["stream"] == true}
	p.system = joinTexts(raw["system"], "text")
	for _, t := range list(raw["tools"]) {
		t := obj(t)
		schema := obj(t["input_schema"])
		p.tools = append(p.tools, tool{name: str(t["name"]), props: obj(schema["properties"])})
	}
	for _, m := range list(raw["messages"]) {
		m := obj(m)
		msg := Message{Role: str(m["role"])}
		if s, ok := m["content"].(string); ok {
			msg.Parts = append(msg.Parts, Part{PartText, s})
		}
		for _, b := range list(m["content"]) {
			b := obj(b)
			switch typ := str(b["type"]); typ {
			case "text":
				msg.Parts = append(msg.Parts, Part{PartText, str(b["text"])})
			case "thinking":
				msg.Parts = append(msg.Parts, Part{PartThinking, str(b["thinking"])})
			case "tool_use":
				in, _ := json.Marshal(b["input"])
				msg.Parts = append(msg.Parts, Part{PartToolCall, str(b["name"]) + " " + string(in)})
			case "tool_result":
				out := str(b["content"])
				if out == "" {
					out = joinTexts(b["content"], "text")
				}
				msg.Parts = append(msg.Parts, Part{PartToolResult, out})
			default:
				msg.Parts = append(msg.Parts, Part{PartOther, typ})
			}
		}
		p.messages = append(p.messages, msg)
	}
	return p
}

func parseResponses(raw map[string]any) parsed {
	p := parsed{model: str(raw["model"]), stream: raw["stream"] == true, system: str(raw["instructions"])}
	for _, t := range list(raw["tools"]) {
		t := obj(t)
		name := str(t["name"])
		if name == "" {
			name = str(t["type"]) // web_search, local_shell, ...
		}
		p.tools = append(p.tools, tool{name: name, props: obj(obj(t["parameters"])["properties"])})
	}
	if s, ok := raw["input"].(string); ok {
		p.messages = append(p.messages, Message{Role: "user", Parts: []Part{{PartText, s}}})
	}
	for _, it := range list(raw["input"]) {
		it := obj(it)
		switch typ := str(it["type"]); typ {
		case "message", "":
			msg := Message{Role: str(it["role"])}
			if s, ok := it["content"].(string); ok {
				msg.Parts = append(msg.Parts, Part{PartText, s})
			}
			for _, c := range list(it["content"]) {
				c := obj(c)
				switch ct := str(c["type"]); ct {
				case "input_text", "output_text":
					msg.Parts = append(msg.Parts, Part{PartText, str(c["text"])})
				default:
					msg.Parts = append(msg.Parts, Part{PartOther, ct})
				}
			}
			p.messages = append(p.messages, msg)
		case "function_call", "custom_tool_call", "local_shell_call":
			args := str(it["arguments"])
			if args == "" {
				args = str(it["input"])
			}
			p.messages = append(p.messages, Message{Role: "assistant", Parts: []Part{{PartToolCall, str(it["name"]) + " " + args}}})
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
			out := str(it["output"])
			if out == "" {
				out = joinTexts(it["output"], "input_text", "output_text")
			}
			p.messages = append(p.messages, Message{Role: "tool", Parts: []Part{{PartToolResult, out}}})
		case "reasoning":
			p.messages = append(p.messages, Message{Role: "assistant", Parts: []Part{{PartThinking, joinTexts(it["summary"], "summary_text")}}})
		default:
			p.messages = append(p.messages, Message{Role: str(it["role"]), Parts: []Part{{PartOther, typ}}})
		}
	}
	return p
}

func parseGemini(raw map[string]any) parsed {
	p := parsed{stream: true}
	p.system = joinTexts(obj(raw["systemInstruction"])["parts"], "")
	for _, t := range list(raw["tools"]) {
		for _, fd := range list(obj(t)["functionDeclarations"]) {
			fd := obj(fd)
			schema := obj(fd["parametersJsonSchema"])
			if schema == nil {
				schema = obj(fd["parameters"])
			}
			p.tools = append(p.tools, tool{name: str(fd["name"]), props: obj(schema["properties"])})
		}
	}
	for _, c := range list(raw["contents"]) {
		c := obj(c)
		msg := Message{Role: str(c["role"])}
		for _, pt := range list(c["parts"]) {
			pt := obj(pt)
			switch {
			case pt["functionCall"] != nil:
				fc := obj(pt["functionCall"])
				args, _ := json.Marshal(fc["args"])
				msg.Parts = append(msg.Parts, Part{PartToolCall, str(fc["name"]) + " " + string(args)})
			case pt["functionResponse"] != nil:
				resp, _ := json.Marshal(obj(pt["functionResponse"])["response"])
				msg.Parts = append(msg.Parts, Part{PartToolResult, string(resp)})
			case pt["thought"] == true:
				msg.Parts = append(msg.Parts, Part{PartThinking, str(pt["text"])})
			case pt["text"] != nil:
				msg.Parts = append(msg.Parts, Part{PartText, str(pt["text"])})
			default:
				msg.Parts = append(msg.Parts, Part{PartOther, firstKey(pt)})
			}
		}
		p.messages = append(p.messages, msg)
	}
	return p
}

// joinTexts joins the "text" of the blocks of v whose type is one of
// types ("" matches a block without a type), or v itself if it is a string.
func joinTexts(v any, types ...string) string {
	if s, ok := v.(string); ok {
		return s
	}
	var out []string
	for _, b := range list(v) {
		b := obj(b)
		if slices.Contains(types, str(b["type"])) {
			out = append(out, str(b["text"]))
		}
	}
	return strings.Join(out, "\n")
}

func firstKey(m map[string]any) string {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k != "thoughtSignature" {
			return k
		}
	}
	return ""
}

func str(v any) string         { s, _ := v.(string); return s }
func list(v any) []any         { l, _ := v.([]any); return l }
func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
