package nlip_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/nlip"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestDecode(t *testing.T) {
	tests := []conformance.DecodeCase[nlip.Request]{
		{Name: "minimal", In: map[string]any{"prompt": "hi"}, Want: nlip.Request{Prompt: "hi", Language: "english"}},
		{Name: "all", In: map[string]any{"prompt": "hi", "model": "travel-agent", "language": "french"},
			Want: nlip.Request{Prompt: "hi", Model: "travel-agent", Language: "french"}},
		{Name: "no prompt", In: map[string]any{}, WantErr: []string{`field "prompt": required, a non-empty string`}},
		{Name: "empty prompt", In: map[string]any{"prompt": ""}, WantErr: []string{`field "prompt": required`}},
		{Name: "tools are not NLIP's", In: map[string]any{"prompt": "hi", "tools": []any{}, "tool_results": []any{}},
			WantErr: []string{`unknown field "tool_results"`, `unknown field "tools"`}},
		{Name: "wrong types", In: map[string]any{"prompt": 1, "model": true, "language": "two words"},
			WantErr: []string{`field "prompt": want a string`, `field "model": want a string`, `field "language": "two words" is not a language name`}},
		{Name: "system", In: map[string]any{"prompt": "hi", "system": "x"}, WantErr: []string{`unknown field "system"`}},
	}
	conformance.Decoding(t, nlip.Decode, tests)
}

// TestParse covers the answer shapes the fixtures do not.
func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    nlip.Result
		failure string
		wantErr string
	}{
		{name: "capitalized fields", in: `{"Format":"text","Subformat":"english","Content":"hi","Submessages":[{"Format":"Token","Subformat":"Conversation","Content":"c1"}]}`,
			want: nlip.Result{Content: "hi", Context: "c1"}},
		{name: "question in the message itself", in: `{"format":"text","subformat":"english","content":"Which date?","label":"Input_Required"}`,
			want: nlip.Result{InputRequired: "Which date?"}},
		{name: "older SDK control flag", in: `{"control":false,"format":"text","subformat":"english","content":"hi"}`,
			want: nlip.Result{Content: "hi"}},
		{name: "first conversation token wins", in: `{"format":"token","subformat":"conversation","content":"c1","submessages":[{"format":"token","subformat":"conversation","content":"c2"}]}`,
			want: nlip.Result{Context: "c1"}},
		{name: "error code", in: `{"format":"error","subformat":"code","content":503}`, failure: "code 503"},
		{name: "error wins over text", in: `{"format":"text","subformat":"english","content":"partial","submessages":[{"format":"error","subformat":"text","content":"agent crashed"}]}`,
			failure: "agent crashed"},
		{name: "text not a string", in: `{"format":"text","subformat":"english","content":{"a":1}}`, wantErr: "text content is an object"},
		{name: "no format", in: `{"subformat":"english","content":"x"}`, wantErr: "format is missing"},
		{name: "no content", in: `{"format":"text","subformat":"english"}`, wantErr: "content is missing"},
		{name: "unknown format", in: `{"format":"video","subformat":"mp4","content":"x"}`, wantErr: `format "video" is not an NLIP format`},
		{name: "binary", in: `{"format":"text","subformat":"english","content":"x","submessages":[{"format":"binary","subformat":"image/png","content":"iVBOR"}]}`,
			wantErr: "a binary part"},
		{name: "repeated key", in: `{"format":"text","Format":"text","subformat":"english","content":"x"}`, wantErr: "repeated"},
		{name: "submessages not a list", in: `{"format":"text","subformat":"english","content":"x","submessages":{}}`, wantErr: "submessages is an object"},
		{name: "array", in: `[]`, wantErr: "not a JSON object"},
		{name: "null", in: `null`, wantErr: "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, failure, err := nlip.Parse([]byte(tt.in))
			switch {
			case tt.wantErr != "":
				if !errors.Is(err, wire.ProviderProtocolError) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want a ProviderProtocolError containing %q", err, tt.wantErr)
				}
			case tt.failure != "":
				if err != nil || failure == nil || failure.Message != tt.failure {
					t.Errorf("failure %+v, err %v; want failure %q", failure, err, tt.failure)
				}
			default:
				if err != nil || failure != nil || got != tt.want {
					t.Errorf("got %+v, %+v, %v; want %+v", got, failure, err, tt.want)
				}
			}
		})
	}
}
