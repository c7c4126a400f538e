package pi

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

func TestDecode(t *testing.T) {
	const id = "01a22a8d-7f7d-7689-a314-843817dab2e1"
	tests := []conformance.DecodeCase[Request]{
		{Name: "minimal", In: map[string]any{"prompt": "hi"}, Want: Request{Prompt: "hi"}},
		{Name: "every field", In: map[string]any{"prompt": " @not-a-file", "model": "fake/fake-model", "provider": "fake",
			"thinking": "xhigh", "tools": []any{"read", "grep", "my_ext-tool"}, "system_prompt": "S", "append_system_prompt": "A", "resume": id},
			Want: Request{Prompt: " @not-a-file", Model: "fake/fake-model", Provider: "fake", Thinking: "xhigh",
				Tools: []string{"read", "grep", "my_ext-tool"}, SystemPrompt: "S", AppendSystemPrompt: "A", Resume: id}},
		{Name: "nil values are zero", In: map[string]any{"prompt": "hi", "model": nil, "tools": nil, "no_tools": nil},
			Want: Request{Prompt: "hi"}},
		{Name: "no tools", In: map[string]any{"prompt": "hi", "no_tools": true}, Want: Request{Prompt: "hi", NoTools: true}},
		{Name: "unknown field", In: map[string]any{"prompt": "hi", "permission_mode": "yolo"}, WantErr: []string{`unknown field "permission_mode"`}},
		{Name: "missing prompt", In: map[string]any{"model": "m"}, WantErr: []string{`"prompt": required`}},
		{Name: "empty prompt", In: map[string]any{"prompt": ""}, WantErr: []string{`"prompt": required`}},
		{Name: "prompt is an option", In: map[string]any{"prompt": "--help"}, WantErr: []string{`"prompt": must not begin with "-"`}},
		{Name: "prompt attaches a file", In: map[string]any{"prompt": "@/etc/passwd"}, WantErr: []string{`"prompt": must not begin`}},
		{Name: "NUL in prompt", In: map[string]any{"prompt": "a\x00b"}, WantErr: []string{`"prompt": contains a NUL byte`}},
		{Name: "wrong types", In: map[string]any{"prompt": 7, "model": true, "tools": "read", "no_tools": "yes", "resume": 1.5},
			WantErr: []string{`"prompt": want a string, got an integer`, `"model": want a string, got a boolean`,
				`"tools": want an array of strings, got a string`, `"no_tools": want a boolean, got a string`, `"resume": want a string, got a float`}},
		{Name: "wrong element type", In: map[string]any{"prompt": "hi", "tools": []any{"read", 3}}, WantErr: []string{`"tools"[1]: want a string`}},
		{Name: "bad thinking", In: map[string]any{"prompt": "hi", "thinking": "max"}, WantErr: []string{`"thinking": "max" is not one of off, minimal, low, medium, high, xhigh`}},
		{Name: "bad tool name", In: map[string]any{"prompt": "hi", "tools": []any{"read,bash"}}, WantErr: []string{`"tools"[0]: "read,bash" is not a tool name`}},
		{Name: "tools and no_tools", In: map[string]any{"prompt": "hi", "tools": []any{"read"}, "no_tools": true}, WantErr: []string{`give one or the other`}},
		{Name: "bad provider", In: map[string]any{"prompt": "hi", "provider": "-x"}, WantErr: []string{`"provider": "-x" is not a provider name`}},
		{Name: "resume is a path", In: map[string]any{"prompt": "hi", "resume": "../sessions/x.jsonl"}, WantErr: []string{`"resume": "../sessions/x.jsonl" is not a pi session id`}},
		{Name: "resume is a prefix", In: map[string]any{"prompt": "hi", "resume": "01a2"}, WantErr: []string{`"resume": "01a2" is not a pi session id`}},
		{Name: "every problem at once", In: map[string]any{"extra": 1, "thinking": "max"},
			WantErr: []string{`unknown field "extra"`, `"prompt": required`, `"thinking": "max"`}},
	}
	conformance.Decoding(t, Decode, tests)
}

func TestDecodeNotAMap(t *testing.T) {
	conformance.DecodeRefuses(t, Decode, [][]byte{nil, {0x93, 1, 2, 3}, {0xa2, 'h', 'i'}, {0x81, 0xa6}})
}
