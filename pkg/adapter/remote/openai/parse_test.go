package openai_test

import (
	"os"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestParseShapes covers valid shapes the recorded streams do not have:
// events without an event line, comments, keepalive, a refusal, and a
// summary, a text and a function call that arrive only complete (no
// deltas) and become complete (is_delta=false) chunks; and malformed
// streams, each a protocol or transport error after what came before.
func TestParseShapes(t *testing.T) {
	odd, err := os.ReadFile(conformance.Testdata(t, "fuzz", openai.Name, "odd-events.sse"))
	if err != nil {
		t.Fatal(err)
	}
	created := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-5.5\"}}\n\n"
	added := "data: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}}\n\n"
	delta := func(s string) string {
		return "data: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"delta\":\"" + s + "\"}\n\n"
	}
	call := func(name string) string {
		return "data: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"" + name + "\",\"arguments\":\"\"}}\n\n"
	}
	tests := []struct {
		name  string
		body  string
		want  string // chunk types and contents
		class wire.Class
		msg   string
	}{
		{name: "odd_events", body: string(odd),
			want: "system|thinking:No deltas for this summary.|text+:I can't help with that.|text:Whole text, no deltas.|tool_use:fs.read|result"},
		{name: "empty_body", body: "", class: wire.ProviderTransportError, msg: "ended before the response completed"},
		{name: "no_terminal_event", body: created + added + delta("Hi"), want: "system|text+:Hi", class: wire.ProviderTransportError},
		{name: "not_json", body: created + "data: {oops\n\n", want: "system", class: wire.ProviderProtocolError, msg: "malformed data"},
		{name: "no_type", body: "data: {}\n\n", class: wire.ProviderProtocolError, msg: "data has no type"},
		{name: "event_name_mismatch", body: "event: response.completed\ndata: {\"type\":\"response.created\",\"response\":{}}\n\n", class: wire.ProviderProtocolError},
		{name: "content_before_created", body: added, class: wire.ProviderProtocolError, msg: "before response.created"},
		{name: "delta_unknown_item", body: created + delta("x"), want: "system", class: wire.ProviderProtocolError, msg: "unknown item"},
		{name: "undeclared_function", body: created + call("shell"), want: "system", class: wire.ProviderProtocolError, msg: `called function "shell"`},
		{name: "alias_of_declared_only", body: created + call("fs.read"), want: "system", class: wire.ProviderProtocolError},
		{name: "hosted_tool_item", body: created + "data: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"ws_1\",\"type\":\"web_search_call\"}}\n\n",
			want: "system", class: wire.ProviderProtocolError, msg: "web_search_call"},
		{name: "arguments_not_object", body: created + call("fs_read") +
			"data: {\"type\":\"response.output_item.done\",\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"fs_read\",\"arguments\":\"[1]\"}}\n\n",
			want: "system", class: wire.ProviderProtocolError, msg: "not a JSON object"},
		{name: "text_differs_from_deltas", body: created + added + delta("Hi") +
			"data: {\"type\":\"response.output_item.done\",\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"Ho\"}]}}\n\n",
			want: "system|text+:Hi", class: wire.ProviderProtocolError, msg: "differs from its streamed deltas"},
		{name: "unfinished_item_at_completion", body: created + added + delta("Hi") + "data: {\"type\":\"response.completed\",\"response\":{}}\n\n",
			want: "system|text+:Hi", class: wire.ProviderProtocolError, msg: "never did"},
		{name: "inconsistent_usage", body: created + "data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":1,\"input_tokens_details\":{\"cached_tokens\":2},\"output_tokens\":0}}}\n\n",
			want: "system", class: wire.ProviderProtocolError, msg: "cached tokens"},
		{name: "nested_error_event", body: "data: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model.\"}}\n\n",
			want: "error:openai: Your input exceeds the context window of this model. (context_length_exceeded)(ProviderContextError)"},
		{name: "failed_without_error", body: created + "data: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\"}}\n\n",
			want: "system|error:openai: the response failed(ProviderError)"},
		{name: "auth_error_event", body: "data: {\"type\":\"error\",\"code\":\"invalid_api_key\",\"message\":\"Incorrect API key provided.\"}\n\n",
			want: "error:openai: Incorrect API key provided. (invalid_api_key)(ProviderAuthError)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, err := openai.ParseStream(strings.NewReader(tt.body), "gpt-5.5", []string{"fs.read"})
			var got []string
			for _, c := range chunks {
				s := string(c.Type)
				if c.IsDelta {
					s += "+"
				}
				switch c.Type {
				case wire.ChunkToolUse:
					s += ":" + c.ToolName
				case wire.ChunkError:
					s += ":" + c.Content + "(" + string(c.Metadata.ErrorClass) + ")"
				case wire.ChunkThinking, wire.ChunkText:
					s += ":" + c.Content
				}
				got = append(got, s)
			}
			if g := strings.Join(got, "|"); g != tt.want {
				t.Errorf("chunks = %s\nwant     %s", g, tt.want)
			}
			if c, _ := class(err); c != tt.class || !strings.Contains(errText(err), tt.msg) {
				t.Errorf("err = %v, want %s containing %q", err, tt.class, tt.msg)
			}
		})
	}
}
