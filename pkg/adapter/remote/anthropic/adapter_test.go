package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/anthropic"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// testKey is the credential of every test; it must never leave the
// request header.
const testKey = "sk-ant-api03-TESTKEY-must-never-appear-anywhere-0123456789"

const model = "claude-sonnet-4-5"

func newAdapter(t *testing.T, baseURL string) adapter.Adapter {
	t.Helper()
	a, err := anthropic.New(remote.Config{BaseURL: baseURL, AllowLoopback: true, Credential: secret.New(testKey)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// validate validates fields with a, as the router does.
func validate(t *testing.T, a adapter.Adapter, fields map[string]any) any {
	t.Helper()
	return conformance.Call(t, a, model, fields).Request
}

// run ranges over one stream and returns its chunks and final error
// (conformance.Collect).
func run(t *testing.T, a adapter.Adapter, call adapter.Call) ([]wire.Chunk, error) {
	t.Helper()
	o := conformance.Collect(t, a, call)
	return o.Chunks, o.Err
}

func jsonLines(t *testing.T, chunks []wire.Chunk) []string {
	t.Helper()
	out := make([]string, len(chunks))
	for i, c := range chunks {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

// tools are the client tools the fixtures' requests declare; both names
// are dotted, so they travel as aliases.
var (
	readFile = map[string]any{
		"name": "fs.read_file", "description": "Read a file of the workspace.",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{
			"path": map[string]any{"type": "string"}, "max_bytes": map[string]any{"type": "integer", "minimum": 1},
		}, "required": []any{"path"}},
	}
	getWeather = map[string]any{
		"name": "weather.get", "description": "The current weather at a place.",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{
			"location": map[string]any{"type": "string"},
			"unit":     map[string]any{"type": "string", "enum": []any{"celsius", "fahrenheit"}},
		}, "required": []any{"location"}, "additionalProperties": false},
	}
)

const system = `{"type":"system","is_error":false,"is_delta":false,"metadata":{"provider":"anthropic","model":"claude-sonnet-4-5-20250929","capabilities":{"transport":"remote","resumable":false,"emits_tool_events":true,"reports_usage":true}}}`

// TestFixtures replays every recorded stream and checks the exact chunk
// stream and the typed terminal error.
func TestFixtures(t *testing.T) {
	srv := conformance.ReplayServer(t, anthropic.Name)
	tests := []struct {
		name    string
		request map[string]any // nil: a plain prompt
		want    []string
		wantErr wire.Class // "" for a clean end
		errText string     // a substring of the error message
	}{
		{
			name: "text",
			want: []string{system,
				`{"type":"text","content":"The answer","is_error":false,"is_delta":true,"metadata":{}}`,
				`{"type":"text","content":" is 42.","is_error":false,"is_delta":true,"metadata":{}}`,
				`{"type":"result","is_error":false,"is_delta":false,"metadata":{"usage":{"input_tokens":25,"output_tokens":9},"stop_reason":"end_turn"}}`,
			},
		},
		{
			name:    "thinking",
			request: map[string]any{"prompt": "What is the answer?", "thinking_budget": 2048},
			want: []string{system,
				`{"type":"thinking","content":"The user asks for the answer. ","is_error":false,"is_delta":true,"metadata":{}}`,
				`{"type":"thinking","content":"I recall it is 42, from the guide.","is_error":false,"is_delta":true,"metadata":{}}`,
				`{"type":"text","content":"The answer is 42.","is_error":false,"is_delta":true,"metadata":{}}`,
				`{"type":"result","is_error":false,"is_delta":false,"metadata":{"usage":{"input_tokens":41,"output_tokens":96},"stop_reason":"end_turn"}}`,
			},
		},
		{
			name:    "tool-call",
			request: map[string]any{"prompt": "Summarize the README.", "tools": []any{readFile}},
			want: []string{system,
				`{"type":"text","content":"I'll read the README","is_error":false,"is_delta":true,"metadata":{}}`,
				`{"type":"text","content":" first.","is_error":false,"is_delta":true,"metadata":{}}`,
				`{"type":"tool_use","tool_name":"fs.read_file","tool_id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","tool_input":{"max_bytes":4096,"path":"README.md"},"is_error":false,"is_delta":false,"metadata":{}}`,
				`{"type":"result","is_error":false,"is_delta":false,"metadata":{"usage":{"input_tokens":472,"output_tokens":89},"stop_reason":"tool_use"}}`,
			},
		},
		{
			name:    "usage",
			request: map[string]any{"prompt": "Summarize the cached document.", "thinking_budget": 1024},
			want: []string{system,
				`{"type":"thinking","content":"The cached document already holds the summary.","is_error":false,"is_delta":true,"metadata":{}}`,
				`{"type":"text","content":"The document argues for a mesh.","is_error":false,"is_delta":true,"metadata":{}}`,
				`{"type":"result","is_error":false,"is_delta":false,"metadata":{"usage":{"input_tokens":12,"output_tokens":132,"cache_read_tokens":14336,"cache_write_tokens":2048,"reasoning_tokens":380},"stop_reason":"end_turn"}}`,
			},
		},
		{
			name:    "web-search",
			request: map[string]any{"prompt": "When was Go 1.26 released?", "web_search_max_uses": 3},
			want: []string{system,
				`{"type":"text","content":"I'll search for the release date.","is_error":false,"is_delta":true,"metadata":{}}`,
				`{"type":"tool_use","tool_name":"web_search","tool_id":"srvtoolu_014hJH82Qum7Td6UV8gDXThB","tool_input":{"query":"Go 1.26 release date"},"is_error":false,"is_delta":false,"metadata":{}}`,
				`{"type":"tool_result","tool_id":"srvtoolu_014hJH82Qum7Td6UV8gDXThB","tool_output":[{"page_age":"February 11, 2026","title":"Go 1.26 Release Notes","type":"web_search_result","url":"https://go.dev/doc/go1.26"}],"is_error":false,"is_delta":false,"metadata":{}}`,
				`{"type":"text","content":"Go 1.26 was released in February 2026.","is_error":false,"is_delta":true,"metadata":{}}`,
				`{"type":"result","is_error":false,"is_delta":false,"metadata":{"usage":{"input_tokens":10682,"output_tokens":510},"stop_reason":"end_turn"}}`,
			},
		},
		{
			name: "stream-error",
			want: []string{system,
				`{"type":"text","content":"The answer","is_error":false,"is_delta":true,"metadata":{}}`,
				`{"type":"error","content":"anthropic: overloaded_error: Overloaded","is_error":true,"is_delta":false,"metadata":{"error_class":"ProviderQuotaError"}}`,
			},
		},
		{
			name: "cut",
			want: []string{system,
				`{"type":"text","content":"The answer","is_error":false,"is_delta":true,"metadata":{}}`,
			},
			wantErr: wire.ProviderTransportError, errText: "the stream broke off",
		},
		{
			name: "truncated",
			want: []string{system,
				`{"type":"text","content":"The answer","is_error":false,"is_delta":true,"metadata":{}}`,
			},
			wantErr: wire.ProviderProtocolError, errText: "ended before message_stop",
		},
		{
			name: "unknown-event",
			want: []string{system,
				`{"type":"text","content":"The answer","is_error":false,"is_delta":true,"metadata":{}}`,
			},
			wantErr: wire.ProviderProtocolError, errText: `unknown event type "message_annotation"`,
		},
		{name: "not-sse", wantErr: wire.ProviderProtocolError, errText: "not an event stream"},
		{name: "http-401", wantErr: wire.ProviderAuthError, errText: "HTTP 401: authentication_error: invalid x-api-key"},
		{name: "http-429", wantErr: wire.ProviderQuotaError, errText: "HTTP 429: rate_limit_error: This request would exceed the rate limit"},
		{name: "http-500", wantErr: wire.ProviderError, errText: "HTTP 500: api_error: Internal server error"},
		{name: "http-529", wantErr: wire.ProviderQuotaError, errText: "HTTP 529: overloaded_error: Overloaded"},
		{name: "http-400-context", wantErr: wire.ProviderContextError, errText: "prompt is too long"},
		{name: "http-400-context-limit", wantErr: wire.ProviderContextError, errText: "exceed context limit"},
		{name: "http-413", wantErr: wire.ProviderContextError, errText: "HTTP 413: request_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdapter(t, srv.URL()+"/"+tt.name)
			fields := tt.request
			if fields == nil {
				fields = map[string]any{"prompt": "What is the answer?"}
			}
			chunks, err := run(t, a, adapter.Call{RunID: "r1", Request: validate(t, a, fields), Model: model, Attempt: 1, MaxAttempts: 3})
			got := jsonLines(t, chunks)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("chunks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			var we *wire.Error
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tt.wantErr != "" && !errors.As(err, &we):
				t.Errorf("err = %v (%T), want a *wire.Error of class %s", err, err, tt.wantErr)
			case tt.wantErr != "":
				if we.Class != tt.wantErr {
					t.Errorf("class = %s, want %s (%v)", we.Class, tt.wantErr, err)
				}
				if want := conformance.RetriedStatus(tt.name); we.Retryable != want {
					t.Errorf("%v has retryable %t, want %t: only a 429, 529 or 5xx before output is retried", err, we.Retryable, want)
				}
				if !strings.Contains(we.Message, tt.errText) {
					t.Errorf("message %q lacks %q", we.Message, tt.errText)
				}
			}
			assertNoSecret(t, chunks, err, testKey)
		})
	}
	for _, r := range srv.Requests() {
		if got := r.Header.Get("x-api-key"); got != testKey {
			t.Errorf("case %s: x-api-key = %q", r.Case, got)
		}
		if got := r.Header.Get("anthropic-version"); got != anthropic.APIVersion {
			t.Errorf("case %s: anthropic-version = %q", r.Case, got)
		}
		if r.Path != anthropic.MessagesPath {
			t.Errorf("case %s: path %q", r.Case, r.Path)
		}
		if strings.Contains(string(r.Body), testKey) {
			t.Errorf("case %s: the credential is in the request body", r.Case)
		}
	}
}

// assertNoSecret fails if any of the strings appears in any chunk's JSON
// or msgpack form or in the error.
func assertNoSecret(t *testing.T, chunks []wire.Chunk, err error, secrets ...string) {
	t.Helper()
	var all strings.Builder
	for _, c := range chunks {
		j, jerr := json.Marshal(c)
		if jerr != nil {
			t.Fatal(jerr)
		}
		m, merr := wire.Marshal(c)
		if merr != nil {
			t.Fatal(merr)
		}
		all.Write(j)
		all.Write(m)
	}
	if err != nil {
		all.WriteString(err.Error())
	}
	for _, s := range secrets {
		if strings.Contains(all.String(), s) {
			t.Errorf("%.24q… appears in the event stream or its error", s)
		}
	}
}

// TestCheckpointOnlyDataStaysOut scans every chunk of the streams that
// carry provider-only continuation data: thinking signatures, redacted
// thinking, encrypted search content and citation indexes, message ids.
func TestCheckpointOnlyDataStaysOut(t *testing.T) {
	srv := conformance.ReplayServer(t, anthropic.Name)
	for _, tt := range []struct {
		name    string
		request map[string]any
		hidden  []string
	}{
		{"thinking", map[string]any{"prompt": "q", "thinking_budget": 2048}, []string{
			"EqQBCkYIBxgCKkDfl0Cq3xv5UuJmL9Vb2HcGmnWkq8Pz1tX0oQeRsA4yBnFjLhYdKvM7iTzNwEb6ScUpOaD3rGf5lJ2ExHyQ0mKbEgy7Zq1Vx9Rj4TcW8sAaGgxSIG0ATH2yK4pNfBoiMMQ6bVvHwR1sTg7dYjXk",
			"EmwKAhgBEgy3va3pzix", "msg_01Gw7kYsmhkB3pJ9cQq2xTzR"}},
		{"usage", map[string]any{"prompt": "q", "thinking_budget": 1024}, []string{"EpgBCkYIBxgCKkBusageSIGNATUREf0e1d2c3b4a59687", "msg_01Ux2c4e6g8i0k2m"}},
		{"web-search", map[string]any{"prompt": "q", "web_search_max_uses": 1}, []string{
			"EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y2ISDENCRYPTEDcontent", "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm",
			"msg_01WebSearch8c2e4a"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdapter(t, srv.URL()+"/"+tt.name)
			var state []byte
			chunks, err := run(t, a, adapter.Call{Request: validate(t, a, tt.request), Model: model, Attempt: 1,
				SaveCheckpoint: func(b []byte) { state = b }})
			if err != nil {
				t.Fatal(err)
			}
			assertNoSecret(t, chunks, nil, tt.hidden...)
			for _, h := range tt.hidden {
				if !strings.Contains(string(state), h) {
					t.Errorf("the checkpoint lacks %.24q…", h)
				}
			}
		})
	}
}

// TestToolRoundTrip runs the sequence fixture through two Stream calls:
// the first ends in a tool call and saves the checkpoint, the second
// carries the tool result and continues the conversation from it.
func TestToolRoundTrip(t *testing.T) {
	srv := conformance.ReplayServer(t, anthropic.Name)
	a := newAdapter(t, srv.URL()+"/roundtrip")
	var state1, state2 []byte
	first := map[string]any{"prompt": "What's the weather in Paris?", "system": "You are terse.",
		"tools": []any{getWeather}, "thinking_budget": 2048}
	chunks1, err := run(t, a, adapter.Call{RunID: "r1", Request: validate(t, a, first), Model: model, Attempt: 1,
		SaveCheckpoint: func(b []byte) { state1 = b }})
	if err != nil {
		t.Fatal(err)
	}
	want1 := []string{system,
		`{"type":"thinking","content":"I need the current weather in Paris; the weather tool gives it.","is_error":false,"is_delta":true,"metadata":{}}`,
		`{"type":"tool_use","tool_name":"weather.get","tool_id":"toolu_01D7FLrfh4GYq7yT1ULFeyMV","tool_input":{"location":"Paris","unit":"celsius"},"is_error":false,"is_delta":false,"metadata":{}}`,
		`{"type":"result","is_error":false,"is_delta":false,"metadata":{"usage":{"input_tokens":512,"output_tokens":71},"stop_reason":"tool_use"}}`,
	}
	if got := jsonLines(t, chunks1); strings.Join(got, "\n") != strings.Join(want1, "\n") {
		t.Errorf("first run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want1, "\n"))
	}
	if state1 == nil {
		t.Fatal("the first run saved no checkpoint")
	}

	second := map[string]any{"tool_results": []any{map[string]any{
		"tool_id": "toolu_01D7FLrfh4GYq7yT1ULFeyMV", "output": map[string]any{"temp_c": 18, "sky": "sunny"}}}}
	chunks2, err := run(t, a, adapter.Call{RunID: "r2", Request: validate(t, a, second), Model: model, Attempt: 1,
		Checkpoint: state1, SaveCheckpoint: func(b []byte) { state2 = b }})
	if err != nil {
		t.Fatal(err)
	}
	want2 := []string{system,
		`{"type":"text","content":"It is 18 °C and sunny","is_error":false,"is_delta":true,"metadata":{}}`,
		`{"type":"text","content":" in Paris.","is_error":false,"is_delta":true,"metadata":{}}`,
		`{"type":"result","is_error":false,"is_delta":false,"metadata":{"usage":{"input_tokens":640,"output_tokens":14},"stop_reason":"end_turn"}}`,
	}
	if got := jsonLines(t, chunks2); strings.Join(got, "\n") != strings.Join(want2, "\n") {
		t.Errorf("second run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want2, "\n"))
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	// The second request replays the history verbatim: the signed thinking
	// block, the tool call under its provider name, then the tool result;
	// the settings (system, tools, thinking) come from the conversation.
	var body struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		System    string `json:"system"`
		Stream    bool   `json:"stream"`
		Thinking  struct {
			Type         string `json:"type"`
			BudgetTokens int    `json:"budget_tokens"`
		} `json:"thinking"`
		Tools    []map[string]any `json:"tools"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[1].Body, &body); err != nil {
		t.Fatalf("second request body: %v\n%s", err, reqs[1].Body)
	}
	if body.Model != model || !body.Stream || body.System != "You are terse." || body.Thinking.Type != "enabled" ||
		body.Thinking.BudgetTokens != 2048 || body.MaxTokens != anthropic.DefaultMaxTokens+2048 {
		t.Errorf("second request settings: %s", reqs[1].Body)
	}
	if len(body.Tools) != 1 || body.Tools[0]["name"] != "weather_get_b8affdae" {
		t.Errorf("second request tools: %v", body.Tools)
	}
	if len(body.Messages) != 3 {
		t.Fatalf("second request has %d messages, want 3: %s", len(body.Messages), reqs[1].Body)
	}
	assistant, user := body.Messages[1], body.Messages[2]
	const signature = "ErUBCkYIBxgCIkB0SIGNATURE-roundtrip-7f3a9c1e5b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a6c8e0b2d4f6a8"
	if body.Messages[0].Role != "user" || body.Messages[0].Content[0]["text"] != "What's the weather in Paris?" {
		t.Errorf("message 0: %v", body.Messages[0])
	}
	if assistant.Role != "assistant" || len(assistant.Content) != 2 ||
		assistant.Content[0]["type"] != "thinking" || assistant.Content[0]["signature"] != signature ||
		assistant.Content[0]["thinking"] != "I need the current weather in Paris; the weather tool gives it." ||
		assistant.Content[1]["type"] != "tool_use" || assistant.Content[1]["name"] != "weather_get_b8affdae" ||
		assistant.Content[1]["id"] != "toolu_01D7FLrfh4GYq7yT1ULFeyMV" {
		t.Errorf("the replayed assistant turn: %v", assistant)
	}
	if user.Role != "user" || len(user.Content) != 1 || user.Content[0]["type"] != "tool_result" ||
		user.Content[0]["tool_use_id"] != "toolu_01D7FLrfh4GYq7yT1ULFeyMV" || user.Content[0]["content"] != `{"sky":"sunny","temp_c":18}` {
		t.Errorf("the tool result turn: %v", user)
	}
	// Checkpoint-only data is in the request, never in a chunk.
	if !strings.Contains(string(reqs[1].Body), signature) {
		t.Error("the signature is not replayed")
	}
	assertNoSecret(t, append(chunks1, chunks2...), nil, signature, "msg_01Aq9w938a90dw8q", "msg_01Bq8e7f6g5h4j3k", testKey)
	if !strings.Contains(string(state2), "msg_01Bq8e7f6g5h4j3k") || !strings.Contains(string(state2), "It is 18 °C and sunny in Paris.") {
		t.Error("the second checkpoint lacks the second turn")
	}

	// A third run continues with a prompt: four messages replayed, and no
	// tool results are pending any more.
	third := map[string]any{"prompt": "And tomorrow?"}
	if _, err := run(t, a, adapter.Call{Request: validate(t, a, third), Model: model, Attempt: 1, Checkpoint: state2}); err != nil {
		t.Fatal(err)
	}
	if reqs := srv.Requests(); !strings.Contains(string(reqs[2].Body), `"text":"And tomorrow?"`) ||
		strings.Count(string(reqs[2].Body), `"role":`) != 5 {
		t.Errorf("third request: %s", reqs[2].Body)
	}
}

// TestContinuationValidation checks that a run carrying tool results is
// matched against the conversation before anything is sent.
func TestContinuationValidation(t *testing.T) {
	srv := conformance.ReplayServer(t, anthropic.Name)
	a := newAdapter(t, srv.URL()+"/tool-call")
	strictRead := map[string]any{
		"name": "fs.read_file",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{
			"path": map[string]any{"type": "string"}, "max_bytes": map[string]any{"type": "integer", "maximum": 1024},
		}},
	}
	// The recorded call asks for max_bytes 4096: valid for readFile,
	// invalid for strictRead.
	checkpoint := func(tool map[string]any) []byte {
		var state []byte
		_, err := run(t, a, adapter.Call{Request: validate(t, a, map[string]any{"prompt": "p", "tools": []any{tool}}),
			Model: model, Attempt: 1, SaveCheckpoint: func(b []byte) { state = b }})
		if err != nil || state == nil {
			t.Fatalf("first run: %v (state %d bytes)", err, len(state))
		}
		return state
	}
	valid, invalid := checkpoint(readFile), checkpoint(strictRead)
	result := func(id string) map[string]any { return map[string]any{"tool_id": id, "output": "# agentmesh"} }
	const id = "toolu_01T1x1fJ34qAmk2tNTrN7Up6"
	tests := []struct {
		name       string
		checkpoint []byte
		model      string
		request    map[string]any
		wantClass  wire.Class
		wantText   string
	}{
		{"invalid arguments", invalid, model, map[string]any{"tool_results": []any{result(id)}},
			wire.AgenticRequestValidationError, "#/max_bytes: maximum: got 4096, want 1024"},
		{"missing result", valid, model, map[string]any{"prompt": "go on"},
			wire.AgenticRequestValidationError, "awaits the results of the tool calls " + id},
		{"unknown id", valid, model, map[string]any{"tool_results": []any{result(id), result("toolu_nope")}},
			wire.AgenticRequestValidationError, "toolu_nope answer no pending tool call"},
		{"results without a conversation", nil, model, map[string]any{"tool_results": []any{result(id)}},
			wire.AgenticRequestValidationError, "answer no pending tool call"},
		{"another model", valid, "claude-opus-4-1", map[string]any{"tool_results": []any{result(id)}},
			wire.PinMismatch, "runs on model"},
		{"request model differs from the pin", nil, model, map[string]any{"prompt": "p", "model": "claude-haiku-4-5"},
			wire.AgenticRequestValidationError, "is not the pinned model"},
		{"damaged checkpoint", []byte{0x81, 0xa1, 'v', 0x02}, model, map[string]any{"prompt": "p"},
			wire.AgenticRequestValidationError, "checkpoint"},
		{"temperature with inherited thinking", mustState(t, a, srv, "thinking"), model, map[string]any{"prompt": "p", "temperature": 0.5},
			wire.AgenticRequestValidationError, "temperature cannot be set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(srv.Requests())
			chunks, err := run(t, a, adapter.Call{Request: validate(t, a, tt.request), Model: tt.model, Attempt: 1, Checkpoint: tt.checkpoint})
			if len(chunks) != 0 {
				t.Errorf("chunks before a validation error: %v", jsonLines(t, chunks))
			}
			var we *wire.Error
			if !errors.As(err, &we) || we.Class != tt.wantClass || we.Retryable || !strings.Contains(we.Message, tt.wantText) {
				t.Errorf("err = %v, want non-retryable %s containing %q", err, tt.wantClass, tt.wantText)
			}
			if after := len(srv.Requests()); after != before {
				t.Errorf("%d request(s) sent despite the validation error", after-before)
			}
		})
	}
	// The valid continuation is accepted (the fixture answers with the
	// same tool call again, which is fine here).
	if _, err := run(t, a, adapter.Call{Request: validate(t, a, map[string]any{"tool_results": []any{result(id)}}), Model: model, Attempt: 1, Checkpoint: valid}); err != nil {
		t.Errorf("a valid continuation: %v", err)
	}
}

// mustState runs the case once with thinking and returns its checkpoint.
func mustState(t *testing.T, a adapter.Adapter, srv *replay.Server, name string) []byte {
	t.Helper()
	b := newAdapter(t, srv.URL()+"/"+name)
	var state []byte
	if _, err := run(t, b, adapter.Call{Request: validate(t, a, map[string]any{"prompt": "p", "thinking_budget": 2048}),
		Model: model, Attempt: 1, SaveCheckpoint: func(s []byte) { state = s }}); err != nil {
		t.Fatal(err)
	}
	return state
}

// TestRetryability is acceptance 4 at the adapter level: a connect
// refusal and the attempt cap before any output are retryable transport
// errors, and so is a 500; a 401, and a failure after output, are not.
func TestRetryability(t *testing.T) {
	srv := conformance.ReplayServer(t, anthropic.Name)
	for _, tt := range conformance.FailedAttempts(t, srv, "", 2) {
		t.Run(tt.Name, func(t *testing.T) {
			a, err := anthropic.New(remote.Config{BaseURL: tt.BaseURL, AllowLoopback: true, Credential: secret.New(testKey), AttemptTimeout: tt.AttemptTimeout})
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := run(t, a, adapter.Call{Request: validate(t, a, map[string]any{"prompt": "p"}), Model: model, Attempt: 1, MaxAttempts: 3})
			tt.Check(t, chunks, err)
			assertNoSecret(t, chunks, err, testKey)
		})
	}
}

// TestCancellation closes and cancels a stream after its first chunk: no
// synthetic chunk, and the cancellation is the error.
func TestCancellation(t *testing.T) {
	srv := conformance.ReplayServer(t, anthropic.Name)
	a := newAdapter(t, srv.URL()+"/text")
	req := validate(t, a, map[string]any{"prompt": "p"})
	n := 0
	for range a.Stream(context.Background(), adapter.Call{Request: req, Model: model}) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("%d items after breaking at the first", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var chunks []wire.Chunk
	var final error
	for c, err := range a.Stream(ctx, adapter.Call{Request: req, Model: model}) {
		if err != nil {
			final = err
			continue
		}
		chunks = append(chunks, c)
		cancel()
	}
	if len(chunks) != 1 || !errors.Is(final, context.Canceled) {
		t.Errorf("after cancelling at the first chunk: %d chunks, err %v", len(chunks), final)
	}
}

// TestNoCredential sends no x-api-key header when the profile has none (a
// gateway adds it).
func TestNoCredential(t *testing.T) {
	srv := conformance.ReplayServer(t, anthropic.Name)
	a, err := anthropic.New(remote.Config{BaseURL: srv.URL() + "/text", AllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, a, adapter.Call{Request: validate(t, a, map[string]any{"prompt": "p"}), Model: model}); err != nil {
		t.Fatal(err)
	}
	if h := srv.Requests()[0].Header; h.Get("x-api-key") != "" {
		t.Errorf("x-api-key = %q without a credential", h.Get("x-api-key"))
	}
}

// TestNewChecksTheBaseURL refuses unsafe base URLs before any client
// exists.
func TestNewChecksTheBaseURL(t *testing.T) {
	for _, u := range []string{"ftp://api.anthropic.com", "http://127.0.0.1:1", "http://169.254.169.254/latest", "not a url"} {
		if _, err := anthropic.New(remote.Config{BaseURL: u}); !errors.Is(err, wire.ProfileError) {
			t.Errorf("New(%q) = %v, want ProfileError", u, err)
		}
	}
	if _, err := anthropic.New(remote.Config{}); err != nil {
		t.Errorf("New with the default base URL: %v", err)
	}
}
