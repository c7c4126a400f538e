package claudecode_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

func TestDecode(t *testing.T) {
	const id = "9fb97433-4d57-4a95-a009-78c8b500afd5"
	tests := []conformance.DecodeCase[claudecode.Request]{
		{Name: "prompt only", In: map[string]any{"prompt": "hi"}, Want: claudecode.Request{Prompt: "hi"}},
		{
			Name: "every field",
			In: map[string]any{"prompt": "hi", "model": "m", "system_prompt": "s", "append_system_prompt": "a",
				"permission_mode": "plan", "allowed_tools": []any{"Bash"}, "disallowed_tools": []any{"Write", "Edit"},
				"include_partial_messages": true, "resume": id},
			Want: claudecode.Request{Prompt: "hi", Model: "m", SystemPrompt: "s", AppendSystemPrompt: "a",
				PermissionMode: "plan", AllowedTools: []string{"Bash"}, DisallowedTools: []string{"Write", "Edit"},
				IncludePartialMessages: true, Resume: id},
		},
		{Name: "nil values are absent", In: map[string]any{"prompt": "hi", "model": nil, "resume": nil, "allowed_tools": nil},
			Want: claudecode.Request{Prompt: "hi"}},
		{Name: "empty resume is a fresh session", In: map[string]any{"prompt": "hi", "resume": ""}, Want: claudecode.Request{Prompt: "hi"}},
		{Name: "unknown field", In: map[string]any{"prompt": "hi", "max_turns": 3}, WantErr: []string{`unknown field "max_turns"`}},
		{Name: "missing prompt", In: map[string]any{"model": "m"}, WantErr: []string{`"prompt": required`}},
		{Name: "empty prompt", In: map[string]any{"prompt": ""}, WantErr: []string{`"prompt": required`}},
		{Name: "prompt not a string", In: map[string]any{"prompt": 42}, WantErr: []string{`"prompt": want a string, got an integer`}},
		{Name: "prompt with NUL", In: map[string]any{"prompt": "a\x00b"}, WantErr: []string{`"prompt": contains a NUL byte`}},
		{Name: "prompt is a subcommand", In: map[string]any{"prompt": "update"}, WantErr: []string{`"update" is a claude subcommand`}},
		{Name: "bad permission mode", In: map[string]any{"prompt": "hi", "permission_mode": "yolo"}, WantErr: []string{`"permission_mode": "yolo" is not one of`}},
		{Name: "permission mode wrong type", In: map[string]any{"prompt": "hi", "permission_mode": true}, WantErr: []string{`"permission_mode": want a string, got a bool`}},
		{Name: "tools not an array", In: map[string]any{"prompt": "hi", "allowed_tools": "Bash"}, WantErr: []string{`"allowed_tools": want an array of strings, got a string`}},
		{Name: "tool not a string", In: map[string]any{"prompt": "hi", "disallowed_tools": []any{"Bash", 1}}, WantErr: []string{`"disallowed_tools"[1]: want a string`}},
		{Name: "empty tool", In: map[string]any{"prompt": "hi", "allowed_tools": []any{""}}, WantErr: []string{`"allowed_tools"[0]: empty`}},
		{Name: "partial not a bool", In: map[string]any{"prompt": "hi", "include_partial_messages": "yes"}, WantErr: []string{`"include_partial_messages": want a bool`}},
		{Name: "resume not a uuid", In: map[string]any{"prompt": "hi", "resume": "latest"}, WantErr: []string{`"resume": "latest" is not a session id`}},
		{Name: "resume not a string", In: map[string]any{"prompt": "hi", "resume": 7}, WantErr: []string{`"resume": want a string`}},
		{
			Name:    "every problem named at once",
			In:      map[string]any{"prompt": 1.5, "permission_mode": "x", "bogus": 1, "resume": "-rf"},
			WantErr: []string{`"prompt": want a string, got a float`, `"permission_mode"`, `unknown field "bogus"`, `"resume": "-rf"`},
		},
	}
	conformance.Decoding(t, claudecode.Decode, tests)
}

func TestDecodeMalformed(t *testing.T) {
	conformance.DecodeRefuses(t, claudecode.Decode, [][]byte{nil, {0xc0}, {0x93, 1, 2, 3}, []byte("not msgpack")})
}
