package codex

import (
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

func TestDecode(t *testing.T) {
	const id = "01a22a8b-564f-7be0-9f56-beadbebf0082"
	tests := []conformance.DecodeCase[Request]{
		{Name: "prompt only", In: map[string]any{"prompt": "hi"}, Want: Request{Prompt: "hi"}},
		{Name: "every field", In: map[string]any{"prompt": "hi", "model": "gpt-5.5", "sandbox": "read-only",
			"developer_instructions": "be brief", "model_instructions_file": "docs/base.md", "resume_thread_id": id},
			Want: Request{Prompt: "hi", Model: "gpt-5.5", Sandbox: "read-only", DeveloperInstructions: "be brief",
				ModelInstructionsFile: "docs/base.md", ResumeThreadID: id}},
		{Name: "nil optional fields", In: map[string]any{"prompt": "hi", "model": nil, "resume_thread_id": nil}, Want: Request{Prompt: "hi"}},
		{Name: "unknown field", In: map[string]any{"prompt": "hi", "max_turns": 3}, WantErr: []string{`unknown field "max_turns"`}},
		{Name: "missing prompt", In: map[string]any{}, WantErr: []string{`"prompt": required`}},
		{Name: "empty prompt", In: map[string]any{"prompt": ""}, WantErr: []string{`"prompt": required`}},
		{Name: "nil prompt", In: map[string]any{"prompt": nil}, WantErr: []string{`"prompt": required`}},
		{Name: "prompt wrong type", In: map[string]any{"prompt": 42}, WantErr: []string{`"prompt": want a string, got an integer`}},
		{Name: "stdin prompt", In: map[string]any{"prompt": "-"}, WantErr: []string{`read the prompt from stdin`}},
		{Name: "huge prompt", In: map[string]any{"prompt": strings.Repeat("x", MaxArg+1)}, WantErr: []string{`"prompt": 131072 bytes`}},
		{Name: "NUL in prompt", In: map[string]any{"prompt": "a\x00b"}, WantErr: []string{`"prompt": contains a NUL byte`}},
		{Name: "invalid UTF-8", In: map[string]any{"prompt": "a\xffb"}, WantErr: []string{`"prompt": not valid UTF-8`}},
		{Name: "bad sandbox", In: map[string]any{"prompt": "hi", "sandbox": "yolo"}, WantErr: []string{`"sandbox": "yolo" is not one of`}},
		{Name: "full access refused", In: map[string]any{"prompt": "hi", "sandbox": "danger-full-access"}, WantErr: []string{`"danger-full-access" is not allowed`}},
		{Name: "sandbox wrong type", In: map[string]any{"prompt": "hi", "sandbox": true}, WantErr: []string{`"sandbox": want a string, got a boolean`}},
		{Name: "model flag", In: map[string]any{"prompt": "hi", "model": "--oss"}, WantErr: []string{`"model": "--oss" is not a model name`}},
		{Name: "resume not a uuid", In: map[string]any{"prompt": "hi", "resume_thread_id": "--last"}, WantErr: []string{`"resume_thread_id": "--last" is not a thread id`}},
		{Name: "resume wrong type", In: map[string]any{"prompt": "hi", "resume_thread_id": []any{"x"}}, WantErr: []string{`"resume_thread_id": want a string, got an array`}},
		{Name: "absolute instructions file", In: map[string]any{"prompt": "hi", "model_instructions_file": "/etc/passwd"}, WantErr: []string{`must be relative to the workspace`}},
		{Name: "traversing instructions file", In: map[string]any{"prompt": "hi", "model_instructions_file": "a/../../b"}, WantErr: []string{`must be relative to the workspace`}},
		{Name: "every problem at once", In: map[string]any{"prompt": 1, "sandbox": "x", "extra": 1, "model": map[string]any{}},
			WantErr: []string{`unknown field "extra"`, `"prompt": want a string`, `"sandbox": "x"`, `"model": want a string, got a map`}},
	}
	conformance.Decoding(t, Decode, tests)
}

func TestDecodeNotAMap(t *testing.T) {
	conformance.DecodeRefuses(t, Decode, [][]byte{nil, {0xc0}, {0x92, 0x01, 0x02}, {0x81}})
}

func TestConfigArg(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", `k="plain"`},
		{`q"b\s`, `k="q\"b\\s"`},
		{"nl\ntab\tcr\r", `k="nl\ntab\tcr\r"`},
		{"bell\x07del\x7f", `k="bell\u0007del\u007F"`},
		{"é ünïcode", `k="é ünïcode"`},
	}
	for _, tt := range tests {
		if got := configArg("k", tt.in); got != tt.want {
			t.Errorf("configArg(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
