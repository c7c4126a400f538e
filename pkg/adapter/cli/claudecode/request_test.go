package claudecode_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestDecode(t *testing.T) {
	const id = "9fb97433-4d57-4a95-a009-78c8b500afd5"
	tests := []struct {
		name    string
		in      map[string]any
		want    claudecode.Request
		wantErr []string // each must appear in the one validation error
	}{
		{name: "prompt only", in: map[string]any{"prompt": "hi"}, want: claudecode.Request{Prompt: "hi"}},
		{
			name: "every field",
			in: map[string]any{"prompt": "hi", "model": "m", "system_prompt": "s", "append_system_prompt": "a",
				"permission_mode": "plan", "allowed_tools": []any{"Bash"}, "disallowed_tools": []any{"Write", "Edit"},
				"include_partial_messages": true, "resume": id},
			want: claudecode.Request{Prompt: "hi", Model: "m", SystemPrompt: "s", AppendSystemPrompt: "a",
				PermissionMode: "plan", AllowedTools: []string{"Bash"}, DisallowedTools: []string{"Write", "Edit"},
				IncludePartialMessages: true, Resume: id},
		},
		{name: "nil values are absent", in: map[string]any{"prompt": "hi", "model": nil, "resume": nil, "allowed_tools": nil},
			want: claudecode.Request{Prompt: "hi"}},
		{name: "empty resume is a fresh session", in: map[string]any{"prompt": "hi", "resume": ""}, want: claudecode.Request{Prompt: "hi"}},
		{name: "unknown field", in: map[string]any{"prompt": "hi", "max_turns": 3}, wantErr: []string{`unknown field "max_turns"`}},
		{name: "missing prompt", in: map[string]any{"model": "m"}, wantErr: []string{`"prompt": required`}},
		{name: "empty prompt", in: map[string]any{"prompt": ""}, wantErr: []string{`"prompt": required`}},
		{name: "prompt not a string", in: map[string]any{"prompt": 42}, wantErr: []string{`"prompt": want a string, got an integer`}},
		{name: "prompt with NUL", in: map[string]any{"prompt": "a\x00b"}, wantErr: []string{`"prompt": contains a NUL byte`}},
		{name: "prompt is a subcommand", in: map[string]any{"prompt": "update"}, wantErr: []string{`"update" is a claude subcommand`}},
		{name: "bad permission mode", in: map[string]any{"prompt": "hi", "permission_mode": "yolo"}, wantErr: []string{`"permission_mode": "yolo" is not one of`}},
		{name: "permission mode wrong type", in: map[string]any{"prompt": "hi", "permission_mode": true}, wantErr: []string{`"permission_mode": want a string, got a bool`}},
		{name: "tools not an array", in: map[string]any{"prompt": "hi", "allowed_tools": "Bash"}, wantErr: []string{`"allowed_tools": want an array of strings, got a string`}},
		{name: "tool not a string", in: map[string]any{"prompt": "hi", "disallowed_tools": []any{"Bash", 1}}, wantErr: []string{`"disallowed_tools"[1]: want a string`}},
		{name: "empty tool", in: map[string]any{"prompt": "hi", "allowed_tools": []any{""}}, wantErr: []string{`"allowed_tools"[0]: empty`}},
		{name: "partial not a bool", in: map[string]any{"prompt": "hi", "include_partial_messages": "yes"}, wantErr: []string{`"include_partial_messages": want a bool`}},
		{name: "resume not a uuid", in: map[string]any{"prompt": "hi", "resume": "latest"}, wantErr: []string{`"resume": "latest" is not a session id`}},
		{name: "resume not a string", in: map[string]any{"prompt": "hi", "resume": 7}, wantErr: []string{`"resume": want a string`}},
		{
			name:    "every problem named at once",
			in:      map[string]any{"prompt": 1.5, "permission_mode": "x", "bogus": 1, "resume": "-rf"},
			wantErr: []string{`"prompt": want a string, got a float`, `"permission_mode"`, `unknown field "bogus"`, `"resume": "-rf"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := wire.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := claudecode.Decode(b)
			if len(tt.wantErr) > 0 {
				if !errors.Is(err, wire.AgenticRequestValidationError) {
					t.Fatalf("err = %v, want AgenticRequestValidationError", err)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("err = %v, want it to name %s", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeMalformed(t *testing.T) {
	for _, in := range [][]byte{nil, {0xc0}, {0x93, 1, 2, 3}, []byte("not msgpack")} {
		if _, err := claudecode.Decode(in); !errors.Is(err, wire.AgenticRequestValidationError) {
			t.Errorf("Decode(%x) = %v, want AgenticRequestValidationError", in, err)
		}
	}
}
