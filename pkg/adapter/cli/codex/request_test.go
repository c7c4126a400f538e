package codex

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestDecode(t *testing.T) {
	const id = "01a22a8b-564f-7be0-9f56-beadbebf0082"
	tests := []struct {
		name    string
		in      map[string]any
		want    Request
		wantErr []string // each must appear in the one error's message
	}{
		{name: "prompt only", in: map[string]any{"prompt": "hi"}, want: Request{Prompt: "hi"}},
		{name: "every field", in: map[string]any{"prompt": "hi", "model": "gpt-5.5", "sandbox": "read-only",
			"developer_instructions": "be brief", "model_instructions_file": "docs/base.md", "resume_thread_id": id},
			want: Request{Prompt: "hi", Model: "gpt-5.5", Sandbox: "read-only", DeveloperInstructions: "be brief",
				ModelInstructionsFile: "docs/base.md", ResumeThreadID: id}},
		{name: "nil optional fields", in: map[string]any{"prompt": "hi", "model": nil, "resume_thread_id": nil}, want: Request{Prompt: "hi"}},
		{name: "unknown field", in: map[string]any{"prompt": "hi", "max_turns": 3}, wantErr: []string{`unknown field "max_turns"`}},
		{name: "missing prompt", in: map[string]any{}, wantErr: []string{`"prompt": required`}},
		{name: "empty prompt", in: map[string]any{"prompt": ""}, wantErr: []string{`"prompt": required`}},
		{name: "nil prompt", in: map[string]any{"prompt": nil}, wantErr: []string{`"prompt": required`}},
		{name: "prompt wrong type", in: map[string]any{"prompt": 42}, wantErr: []string{`"prompt": want a string, got an integer`}},
		{name: "stdin prompt", in: map[string]any{"prompt": "-"}, wantErr: []string{`read the prompt from stdin`}},
		{name: "huge prompt", in: map[string]any{"prompt": strings.Repeat("x", MaxArg+1)}, wantErr: []string{`"prompt": 131072 bytes`}},
		{name: "NUL in prompt", in: map[string]any{"prompt": "a\x00b"}, wantErr: []string{`"prompt": contains a NUL byte`}},
		{name: "invalid UTF-8", in: map[string]any{"prompt": "a\xffb"}, wantErr: []string{`"prompt": not valid UTF-8`}},
		{name: "bad sandbox", in: map[string]any{"prompt": "hi", "sandbox": "yolo"}, wantErr: []string{`"sandbox": "yolo" is not one of`}},
		{name: "full access refused", in: map[string]any{"prompt": "hi", "sandbox": "danger-full-access"}, wantErr: []string{`"danger-full-access" is not allowed`}},
		{name: "sandbox wrong type", in: map[string]any{"prompt": "hi", "sandbox": true}, wantErr: []string{`"sandbox": want a string, got a boolean`}},
		{name: "model flag", in: map[string]any{"prompt": "hi", "model": "--oss"}, wantErr: []string{`"model": "--oss" is not a model name`}},
		{name: "resume not a uuid", in: map[string]any{"prompt": "hi", "resume_thread_id": "--last"}, wantErr: []string{`"resume_thread_id": "--last" is not a thread id`}},
		{name: "resume wrong type", in: map[string]any{"prompt": "hi", "resume_thread_id": []any{"x"}}, wantErr: []string{`"resume_thread_id": want a string, got an array`}},
		{name: "absolute instructions file", in: map[string]any{"prompt": "hi", "model_instructions_file": "/etc/passwd"}, wantErr: []string{`must be relative to the workspace`}},
		{name: "traversing instructions file", in: map[string]any{"prompt": "hi", "model_instructions_file": "a/../../b"}, wantErr: []string{`must be relative to the workspace`}},
		{name: "every problem at once", in: map[string]any{"prompt": 1, "sandbox": "x", "extra": 1, "model": map[string]any{}},
			wantErr: []string{`unknown field "extra"`, `"prompt": want a string`, `"sandbox": "x"`, `"model": want a string, got a map`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := wire.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(b)
			if len(tt.wantErr) > 0 {
				if !errors.Is(err, wire.AgenticRequestValidationError) {
					t.Fatalf("err = %v, want an AgenticRequestValidationError", err)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("err %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Decode = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeNotAMap(t *testing.T) {
	for _, in := range [][]byte{nil, {0xc0}, {0x92, 0x01, 0x02}, {0x81}} {
		if _, err := Decode(in); !errors.Is(err, wire.AgenticRequestValidationError) {
			t.Errorf("Decode(% x) = %v, want an AgenticRequestValidationError", in, err)
		}
	}
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
