package pi

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestDecode(t *testing.T) {
	const id = "01a22a8d-7f7d-7689-a314-843817dab2e1"
	tests := []struct {
		name    string
		in      map[string]any
		want    Request
		wantErr []string // each must appear in the one error's message
	}{
		{name: "minimal", in: map[string]any{"prompt": "hi"}, want: Request{Prompt: "hi"}},
		{name: "every field", in: map[string]any{"prompt": " @not-a-file", "model": "fake/fake-model", "provider": "fake",
			"thinking": "xhigh", "tools": []any{"read", "grep", "my_ext-tool"}, "system_prompt": "S", "append_system_prompt": "A", "resume": id},
			want: Request{Prompt: " @not-a-file", Model: "fake/fake-model", Provider: "fake", Thinking: "xhigh",
				Tools: []string{"read", "grep", "my_ext-tool"}, SystemPrompt: "S", AppendSystemPrompt: "A", Resume: id}},
		{name: "nil values are zero", in: map[string]any{"prompt": "hi", "model": nil, "tools": nil, "no_tools": nil},
			want: Request{Prompt: "hi"}},
		{name: "no tools", in: map[string]any{"prompt": "hi", "no_tools": true}, want: Request{Prompt: "hi", NoTools: true}},
		{name: "unknown field", in: map[string]any{"prompt": "hi", "permission_mode": "yolo"}, wantErr: []string{`unknown field "permission_mode"`}},
		{name: "missing prompt", in: map[string]any{"model": "m"}, wantErr: []string{`"prompt": required`}},
		{name: "empty prompt", in: map[string]any{"prompt": ""}, wantErr: []string{`"prompt": required`}},
		{name: "prompt is an option", in: map[string]any{"prompt": "--help"}, wantErr: []string{`"prompt": must not begin with "-"`}},
		{name: "prompt attaches a file", in: map[string]any{"prompt": "@/etc/passwd"}, wantErr: []string{`"prompt": must not begin`}},
		{name: "NUL in prompt", in: map[string]any{"prompt": "a\x00b"}, wantErr: []string{`"prompt": contains a NUL byte`}},
		{name: "wrong types", in: map[string]any{"prompt": 7, "model": true, "tools": "read", "no_tools": "yes", "resume": 1.5},
			wantErr: []string{`"prompt": want a string, got an integer`, `"model": want a string, got a boolean`,
				`"tools": want an array of strings, got a string`, `"no_tools": want a boolean, got a string`, `"resume": want a string, got a float`}},
		{name: "wrong element type", in: map[string]any{"prompt": "hi", "tools": []any{"read", 3}}, wantErr: []string{`"tools"[1]: want a string`}},
		{name: "bad thinking", in: map[string]any{"prompt": "hi", "thinking": "max"}, wantErr: []string{`"thinking": "max" is not one of off, minimal, low, medium, high, xhigh`}},
		{name: "bad tool name", in: map[string]any{"prompt": "hi", "tools": []any{"read,bash"}}, wantErr: []string{`"tools"[0]: "read,bash" is not a tool name`}},
		{name: "tools and no_tools", in: map[string]any{"prompt": "hi", "tools": []any{"read"}, "no_tools": true}, wantErr: []string{`give one or the other`}},
		{name: "bad provider", in: map[string]any{"prompt": "hi", "provider": "-x"}, wantErr: []string{`"provider": "-x" is not a provider name`}},
		{name: "resume is a path", in: map[string]any{"prompt": "hi", "resume": "../sessions/x.jsonl"}, wantErr: []string{`"resume": "../sessions/x.jsonl" is not a pi session id`}},
		{name: "resume is a prefix", in: map[string]any{"prompt": "hi", "resume": "01a2"}, wantErr: []string{`"resume": "01a2" is not a pi session id`}},
		{name: "every problem at once", in: map[string]any{"extra": 1, "thinking": "max"},
			wantErr: []string{`unknown field "extra"`, `"prompt": required`, `"thinking": "max"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(conformance.Encode(t, tt.in))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("Decode = %+v, want %+v", got, tt.want)
				}
				return
			}
			if !errors.Is(err, wire.AgenticRequestValidationError) {
				t.Fatalf("Decode error = %v, want AgenticRequestValidationError", err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestDecodeNotAMap(t *testing.T) {
	for _, b := range [][]byte{nil, {0x93, 1, 2, 3}, {0xa2, 'h', 'i'}, {0x81, 0xa6}} {
		if _, err := Decode(b); !errors.Is(err, wire.AgenticRequestValidationError) {
			t.Errorf("Decode(% x) = %v, want AgenticRequestValidationError", b, err)
		}
	}
}
