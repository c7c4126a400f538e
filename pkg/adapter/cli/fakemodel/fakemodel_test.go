package fakemodel_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/fakemodel"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs a fake for one test.
func start(t *testing.T, sc fakemodel.Scenario) *fakemodel.Server {
	t.Helper()
	s := fakemodel.New(sc)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// httpClient has its own transport so that its idle connections can be
// closed before goleak looks.
func httpClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

type event struct {
	name string
	data map[string]any
}

func post(t *testing.T, c *http.Client, url string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readSSE parses a text/event-stream body into events; every data line
// must be one JSON object.
func readSSE(t *testing.T, resp *http.Response) []event {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content-type = %q, want text/event-stream", ct)
	}
	var out []event
	var cur event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != nil {
				out = append(out, cur)
			}
			cur = event{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data); err != nil {
				t.Fatalf("data line %q: %v", line, err)
			}
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur.data != nil {
		t.Fatalf("stream ended inside an event: %v", cur)
	}
	return out
}

// got is what a client assembles from one streamed answer.
type got struct {
	names    []string // event names (Anthropic, Responses) in order
	text     string
	thinking string
	toolName string
	toolArgs map[string]any
	stop     string // Anthropic stop_reason, Responses status, Gemini finishReason
	output   int    // output tokens reported
}

// wireAPI is one API as a client speaks it.
type wireAPI struct {
	name string
	path string
	// tools are the tools the client offers, as the CLI declares them.
	tools any
	// request builds a request for prompt; with toolResult it continues
	// the turn after a tool call of the previous answer.
	request func(prompt, toolResult string) map[string]any
	decode  func(t *testing.T, evs []event) got
}

var anthropicAPI = wireAPI{
	name: "anthropic", path: "/v1/messages?beta=true",
	tools: []any{
		map[string]any{"name": "Read", "input_schema": map[string]any{"properties": map[string]any{"file_path": map[string]any{}}}},
		map[string]any{"name": "Bash", "input_schema": map[string]any{"properties": map[string]any{"command": map[string]any{}, "description": map[string]any{}}}},
	},
	request: func(prompt, toolResult string) map[string]any {
		msgs := []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "<system-reminder>context</system-reminder>"},
			map[string]any{"type": "text", "text": prompt},
		}}}
		if toolResult != "" {
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": []any{
					map[string]any{"type": "text", "text": fakemodel.PreambleText},
					map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": fakemodel.ToolCommand}},
				}},
				map[string]any{"role": "user", "content": []any{
					map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": toolResult, "is_error": false},
				}})
		}
		return map[string]any{"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 32000, "messages": msgs}
	},
	decode: func(t *testing.T, evs []event) got {
		var g got
		var args strings.Builder
		for _, ev := range evs {
			g.names = append(g.names, ev.name)
			if ev.data["type"] != ev.name {
				t.Fatalf("event %q carries type %v", ev.name, ev.data["type"])
			}
			switch ev.name {
			case "content_block_start":
				if cb := ev.data["content_block"].(map[string]any); cb["type"] == "tool_use" {
					g.toolName = cb["name"].(string)
				}
			case "content_block_delta":
				d := ev.data["delta"].(map[string]any)
				switch d["type"] {
				case "text_delta":
					g.text += d["text"].(string)
				case "thinking_delta":
					g.thinking += d["thinking"].(string)
				case "input_json_delta":
					args.WriteString(d["partial_json"].(string))
				case "signature_delta":
				default:
					t.Fatalf("unknown delta %v", d)
				}
			case "message_delta":
				g.stop = ev.data["delta"].(map[string]any)["stop_reason"].(string)
				g.output = int(ev.data["usage"].(map[string]any)["output_tokens"].(float64))
			}
		}
		if args.Len() > 0 {
			if err := json.Unmarshal([]byte(args.String()), &g.toolArgs); err != nil {
				t.Fatalf("tool input %q: %v", args.String(), err)
			}
		}
		return g
	},
}

var responsesAPI = wireAPI{
	name: "responses", path: "/v1/responses",
	tools: []any{
		map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"properties": map[string]any{"cmd": map[string]any{"type": "string"}}}},
		map[string]any{"type": "web_search"},
	},
	request: func(prompt, toolResult string) map[string]any {
		input := []any{
			map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "base instructions"}}},
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "<environment_context/>"}}},
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": prompt}}},
		}
		if toolResult != "" {
			input = append(input,
				map[string]any{"type": "function_call", "name": "exec_command", "arguments": `{"cmd":"echo hello-from-tool"}`, "call_id": "call_1"},
				map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "Process exited with code 0\nOutput:\n" + toolResult})
		}
		return map[string]any{"model": "gpt-5.5", "stream": true, "store": false, "input": input}
	},
	decode: func(t *testing.T, evs []event) got {
		var g got
		var args string
		seq := -1.0
		for _, ev := range evs {
			g.names = append(g.names, ev.name)
			if ev.data["type"] != ev.name {
				t.Fatalf("event %q carries type %v", ev.name, ev.data["type"])
			}
			if n := ev.data["sequence_number"].(float64); n != seq+1 {
				t.Fatalf("sequence_number %v after %v", n, seq)
			} else {
				seq = n
			}
			switch ev.name {
			case "response.output_text.delta":
				g.text += ev.data["delta"].(string)
			case "response.reasoning_summary_text.delta":
				g.thinking += ev.data["delta"].(string)
			case "response.function_call_arguments.delta":
				args += ev.data["delta"].(string)
			case "response.output_item.done":
				item := ev.data["item"].(map[string]any)
				if item["type"] == "function_call" {
					g.toolName = item["name"].(string)
					if item["arguments"] != args {
						t.Fatalf("item arguments %v, deltas %q", item["arguments"], args)
					}
					if err := json.Unmarshal([]byte(args), &g.toolArgs); err != nil {
						t.Fatal(err)
					}
				}
			case "response.completed":
				r := ev.data["response"].(map[string]any)
				g.stop = r["status"].(string)
				g.output = int(r["usage"].(map[string]any)["output_tokens"].(float64))
			}
		}
		return g
	},
}

var geminiAPI = wireAPI{
	name: "gemini", path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
	tools: []any{map[string]any{"functionDeclarations": []any{
		map[string]any{"name": "read_file", "parametersJsonSchema": map[string]any{"properties": map[string]any{"file_path": map[string]any{}}}},
		map[string]any{"name": "run_shell_command", "parametersJsonSchema": map[string]any{"properties": map[string]any{"command": map[string]any{}, "description": map[string]any{}}}},
	}}},
	request: func(prompt, toolResult string) map[string]any {
		contents := []any{map[string]any{"role": "user", "parts": []any{
			map[string]any{"text": "This is the Gemini CLI. Context."},
			map[string]any{"text": prompt},
		}}}
		if toolResult != "" {
			contents = append(contents,
				map[string]any{"role": "model", "parts": []any{map[string]any{
					"functionCall":     map[string]any{"name": "run_shell_command", "args": map[string]any{"command": fakemodel.ToolCommand}},
					"thoughtSignature": "skip",
				}}},
				map[string]any{"role": "user", "parts": []any{map[string]any{
					"functionResponse": map[string]any{"name": "run_shell_command", "response": map[string]any{"output": toolResult}},
				}}})
		}
		return map[string]any{"contents": contents, "generationConfig": map[string]any{"temperature": 1}}
	},
	decode: func(t *testing.T, evs []event) got {
		var g got
		for _, ev := range evs {
			if ev.name != "" {
				t.Fatalf("gemini event has a name %q", ev.name)
			}
			cand := ev.data["candidates"].([]any)[0].(map[string]any)
			for _, p := range cand["content"].(map[string]any)["parts"].([]any) {
				p := p.(map[string]any)
				switch {
				case p["functionCall"] != nil:
					fc := p["functionCall"].(map[string]any)
					g.toolName, g.toolArgs = fc["name"].(string), fc["args"].(map[string]any)
				case p["thought"] == true:
					g.thinking += p["text"].(string)
				default:
					g.text += p["text"].(string)
				}
			}
			if fr, ok := cand["finishReason"].(string); ok {
				g.stop = fr
				g.output = int(ev.data["usageMetadata"].(map[string]any)["candidatesTokenCount"].(float64))
			}
		}
		return g
	},
}

var apis = []wireAPI{anthropicAPI, responsesAPI, geminiAPI}

// ask sends one request and decodes the streamed answer.
func ask(t *testing.T, c *http.Client, s *fakemodel.Server, api wireAPI, prompt, toolResult string) got {
	t.Helper()
	body := api.request(prompt, toolResult)
	body["tools"] = api.tools
	resp := post(t, c, s.URL()+api.path, body)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	g := api.decode(t, readSSE(t, resp))
	if g.stop == "" || g.output <= 0 {
		t.Fatalf("no stop reason or output usage: %+v", g)
	}
	return g
}

func TestAnswer(t *testing.T) {
	for _, api := range apis {
		t.Run(api.name, func(t *testing.T) {
			s := start(t, fakemodel.Auto)
			g := ask(t, httpClient(t), s, api, "What is the answer?", "")
			if g.text != fakemodel.AnswerText || g.toolName != "" || g.thinking != "" {
				t.Fatalf("got %+v, want text %q only", g, fakemodel.AnswerText)
			}
		})
	}
}

func TestAnthropicEventOrder(t *testing.T) {
	s := start(t, fakemodel.Auto)
	g := ask(t, httpClient(t), s, anthropicAPI, "Run it. "+fakemodel.Marker(fakemodel.ToolCall), "")
	want := "message_start ping content_block_start content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(g.names, " "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if g.stop != "tool_use" || g.text != fakemodel.PreambleText {
		t.Fatalf("stop %q text %q, want tool_use after %q", g.stop, g.text, fakemodel.PreambleText)
	}
}

func TestResponsesEventOrder(t *testing.T) {
	s := start(t, fakemodel.Auto)
	g := ask(t, httpClient(t), s, responsesAPI, "Think. "+fakemodel.Marker(fakemodel.Thinking), "")
	want := "response.created response.in_progress " +
		"response.output_item.added response.reasoning_summary_text.delta response.reasoning_summary_text.delta response.output_item.done " +
		"response.output_item.added response.output_text.delta response.output_text.delta response.output_item.done response.completed"
	if got := strings.Join(g.names, " "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
}

func TestToolRoundTrip(t *testing.T) {
	tests := []struct {
		api      wireAPI
		tools    any // overrides api.tools
		wantName string
		wantArgs string
	}{
		{api: anthropicAPI, wantName: "Bash", wantArgs: `{"command":"echo hello-from-tool","description":"Print a greeting"}`},
		{api: anthropicAPI, tools: []any{ // Pi's bash tool has no description
			map[string]any{"name": "bash", "input_schema": map[string]any{"properties": map[string]any{"command": map[string]any{}, "timeout": map[string]any{}}}},
		}, wantName: "bash", wantArgs: `{"command":"echo hello-from-tool"}`},
		{api: responsesAPI, wantName: "exec_command", wantArgs: `{"cmd":"echo hello-from-tool"}`},
		{api: responsesAPI, tools: []any{ // Codex's older shell tool takes an argv
			map[string]any{"type": "function", "name": "shell", "parameters": map[string]any{"properties": map[string]any{"command": map[string]any{"type": "array"}}}},
		}, wantName: "shell", wantArgs: `{"command":["bash","-lc","echo hello-from-tool"]}`},
		{api: geminiAPI, wantName: "run_shell_command", wantArgs: `{"command":"echo hello-from-tool","description":"Print a greeting"}`},
	}
	for _, tt := range tests {
		t.Run(tt.api.name+"/"+tt.wantName, func(t *testing.T) {
			api := tt.api
			if tt.tools != nil {
				api.tools = tt.tools
			}
			s := start(t, fakemodel.Auto)
			c := httpClient(t)
			prompt := "Run the shell command 'echo hello-from-tool'. " + fakemodel.Marker(fakemodel.ToolCall)

			first := ask(t, c, s, api, prompt, "")
			args, _ := json.Marshal(first.toolArgs)
			if first.toolName != tt.wantName || string(args) != tt.wantArgs {
				t.Fatalf("tool call %s %s, want %s %s", first.toolName, args, tt.wantName, tt.wantArgs)
			}

			// The follow-up carries the result: the final text, no tool call.
			second := ask(t, c, s, api, prompt, "hello-from-tool\n")
			if second.text != fakemodel.ToolDoneText || second.toolName != "" {
				t.Fatalf("follow-up got %+v, want text %q", second, fakemodel.ToolDoneText)
			}
			third := ask(t, c, s, api, prompt, "command not found")
			if third.text != fakemodel.ToolMismatchText {
				t.Fatalf("follow-up of a wrong output: text %q, want %q", third.text, fakemodel.ToolMismatchText)
			}

			reqs := s.Requests()
			if len(reqs) != 3 || reqs[0].Reply != "tool_call "+tt.wantName || reqs[1].Reply != "tool_done" {
				t.Fatalf("recorded %+v", reqs)
			}
			if got := reqs[1].LatestUserText(); !strings.Contains(got, fakemodel.Marker(fakemodel.ToolCall)) {
				t.Fatalf("latest user text of the follow-up = %q", got)
			}
		})
	}
}

func TestToolCallWithoutShellTool(t *testing.T) {
	api := geminiAPI
	api.tools = []any{} // Gemini CLI in default approval mode offers no shell
	s := start(t, fakemodel.Auto)
	g := ask(t, httpClient(t), s, api, fakemodel.Marker(fakemodel.ToolCall), "")
	if g.text != fakemodel.NoToolText || g.toolName != "" {
		t.Fatalf("got %+v, want %q", g, fakemodel.NoToolText)
	}
}

func TestThinking(t *testing.T) {
	for _, api := range apis {
		t.Run(api.name, func(t *testing.T) {
			s := start(t, fakemodel.Thinking) // fixed: no marker needed
			g := ask(t, httpClient(t), s, api, "What is the answer?", "")
			if g.thinking != fakemodel.ThinkingText || g.text != fakemodel.AnswerText {
				t.Fatalf("got %+v, want thinking then %q", g, fakemodel.AnswerText)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		api  wireAPI
		sc   fakemodel.Scenario
		want string // the body's shape, with its variable parts cut
	}{
		{anthropicAPI, fakemodel.Unauthorized, `{"error":{"message":"invalid x-api-key","type":"authentication_error"},"type":"error"}`},
		{anthropicAPI, fakemodel.RateLimited, `{"error":{"message":"Number of request tokens has exceeded your per-minute rate limit","type":"rate_limit_error"},"type":"error"}`},
		{anthropicAPI, fakemodel.ServerError, `{"error":{"message":"Internal server error","type":"api_error"},"type":"error"}`},
		{responsesAPI, fakemodel.Unauthorized, `{"error":{"code":"invalid_api_key","message":"Incorrect API key provided: sk-fake****. You can find your API key at https://platform.openai.com/account/api-keys.","param":null,"type":"invalid_request_error"}}`},
		{responsesAPI, fakemodel.RateLimited, `{"error":{"code":"rate_limit_exceeded","message":"Rate limit reached for requests. Please try again in 1s.","param":null,"type":"requests"}}`},
		{responsesAPI, fakemodel.ServerError, `{"error":{"code":"server_error","message":"The server had an error while processing your request. Sorry about that!","param":null,"type":"server_error"}}`},
		{geminiAPI, fakemodel.Unauthorized, `{"error":{"code":401,"message":"API key not valid. Please pass a valid API key.","status":"UNAUTHENTICATED"}}`},
		{geminiAPI, fakemodel.RateLimited, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`},
		{geminiAPI, fakemodel.ServerError, `{"error":{"code":500,"message":"An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting","status":"INTERNAL"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.api.name+"/"+string(tt.sc), func(t *testing.T) {
			s := start(t, fakemodel.Auto)
			resp := post(t, httpClient(t), s.URL()+tt.api.path, tt.api.request("What is the answer? "+fakemodel.Marker(tt.sc), ""))
			if got := resp.Status[:3]; got != string(tt.sc) {
				t.Fatalf("status %s, want %s", resp.Status, tt.sc)
			}
			if ra := resp.Header.Get("Retry-After"); (ra == "1") != (tt.sc == fakemodel.RateLimited) {
				t.Fatalf("retry-after %q on a %s", ra, tt.sc)
			}
			var body map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if tt.api.name == "anthropic" {
				if id, _ := body["request_id"].(string); !strings.HasPrefix(id, "req_fake") {
					t.Fatalf("request_id = %v", body["request_id"])
				}
				delete(body, "request_id")
			}
			if b, _ := json.Marshal(body); string(b) != tt.want {
				t.Fatalf("body\n got %s\nwant %s", b, tt.want)
			}
			if r := s.Requests(); len(r) != 1 || r[0].Status != resp.StatusCode || r[0].Scenario != tt.sc {
				t.Fatalf("recorded %+v", r)
			}
		})
	}
}

func TestFixedScenarioIgnoresMarkers(t *testing.T) {
	s := start(t, fakemodel.ServerError)
	resp := post(t, httpClient(t), s.URL()+anthropicAPI.path, anthropicAPI.request(fakemodel.Marker(fakemodel.Answer), ""))
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", resp.StatusCode)
	}
}

func TestNonStreaming(t *testing.T) {
	tests := []struct {
		name string
		path string
		body map[string]any
		text func(map[string]any) string
	}{
		{"anthropic", "/v1/messages", map[string]any{"model": "m", "stream": false, "messages": []any{map[string]any{"role": "user", "content": "hi"}}},
			func(m map[string]any) string {
				return m["content"].([]any)[0].(map[string]any)["text"].(string)
			}},
		{"responses", "/v1/responses", map[string]any{"model": "m", "input": "hi"},
			func(m map[string]any) string {
				item := m["output"].([]any)[0].(map[string]any)
				return item["content"].([]any)[0].(map[string]any)["text"].(string)
			}},
		{"gemini", "/v1beta/models/gemini-2.5-flash:generateContent", map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "hi"}}}}},
			func(m map[string]any) string {
				cand := m["candidates"].([]any)[0].(map[string]any)
				return cand["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"].(string)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, fakemodel.Auto)
			resp := post(t, httpClient(t), s.URL()+tt.path, tt.body)
			var m map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
				t.Fatal(err)
			}
			if got := tt.text(m); got != fakemodel.AnswerText {
				t.Fatalf("text %q, want %q", got, fakemodel.AnswerText)
			}
			if r := s.Requests(); len(r) != 1 || r[0].Stream {
				t.Fatalf("recorded %+v, want one non-streaming request", r)
			}
		})
	}
}

func TestRecordsNormalizedHistory(t *testing.T) {
	s := start(t, fakemodel.Auto)
	c := httpClient(t)
	for _, api := range apis {
		ask(t, c, s, api, "Run it. "+fakemodel.Marker(fakemodel.ToolCall), "hello-from-tool")
	}
	reqs := s.Requests()
	if len(reqs) != len(apis) {
		t.Fatalf("%d requests recorded, want %d", len(reqs), len(apis))
	}
	for i, want := range []fakemodel.API{fakemodel.Anthropic, fakemodel.Responses, fakemodel.Gemini} {
		r := reqs[i]
		var kinds []string
		for _, m := range r.Messages {
			for _, p := range m.Parts {
				kinds = append(kinds, p.Kind)
			}
		}
		k := strings.Join(kinds, ",")
		if r.API != want || !strings.Contains(k, "tool_call") || !strings.HasSuffix(k, "tool_result") {
			t.Errorf("request %d: api %s, parts %s", i, r.API, k)
		}
		if !strings.Contains(r.Text(), "Run it.") || len(r.Tools) == 0 {
			t.Errorf("request %d: text %q, tools %v", i, r.Text(), r.Tools)
		}
	}
	if reqs[2].Model != "gemini-2.5-flash" || reqs[0].Model != "claude-sonnet-4-5" || reqs[1].Model != "gpt-5.5" {
		t.Errorf("models %q %q %q", reqs[0].Model, reqs[1].Model, reqs[2].Model)
	}
}

func TestUnknownRoute(t *testing.T) {
	s := start(t, fakemodel.Auto)
	c := httpClient(t)
	for _, path := range []string{"/v1/models", "/v1/chat/completions", "/v1beta/models/x:countTokens"} {
		resp := post(t, c, s.URL()+path, map[string]any{})
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, resp.StatusCode)
		}
	}
	if r := s.Requests(); len(r) != 3 || r[0].Reply != "no such route" {
		t.Fatalf("recorded %+v", r)
	}
}

func TestProbe(t *testing.T) {
	s := start(t, fakemodel.Auto)
	resp, err := httpClient(t).Head(s.URL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD / = %d, want 200", resp.StatusCode)
	}
	if r := s.Requests(); len(r) != 1 || r[0].Reply != "probe" {
		t.Fatalf("recorded %+v", r)
	}
}

func TestBadBody(t *testing.T) {
	s := start(t, fakemodel.Auto)
	resp, err := httpClient(t).Post(s.URL()+"/v1/messages", "application/json", strings.NewReader("[1]"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
}

func TestLifecycle(t *testing.T) {
	tests := []struct {
		name    string
		sc      fakemodel.Scenario
		addr    string
		wantErr bool
	}{
		{"any free port", fakemodel.Auto, "", false},
		{"localhost", fakemodel.Answer, "localhost:0", false},
		{"ipv6 loopback", fakemodel.Answer, "[::1]:0", false},
		{"not loopback", fakemodel.Answer, "0.0.0.0:0", true},
		{"a host name", fakemodel.Answer, "example.com:80", true},
		{"no port", fakemodel.Answer, "127.0.0.1", true},
		{"unknown scenario", fakemodel.Scenario("418"), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fakemodel.New(tt.sc)
			err := s.Start(tt.addr)
			if tt.name == "ipv6 loopback" && err != nil && strings.Contains(err.Error(), "listen") {
				t.Skipf("no IPv6 loopback here: %v", err)
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("Start(%q) = %v, want error %t", tt.addr, err, tt.wantErr)
			}
			if err == nil && !strings.HasPrefix(s.URL(), "http://") {
				t.Fatalf("URL = %q", s.URL())
			}
			if err == nil && s.Start(tt.addr) == nil {
				t.Fatal("second Start succeeded")
			}
			s.Close()
			s.Close() // idempotent
			if s.Start("") == nil {
				t.Fatal("Start after Close succeeded")
			}
		})
	}
}

func TestCloseRefusesLaterRequests(t *testing.T) {
	s := fakemodel.New(fakemodel.Auto)
	if err := s.Start(""); err != nil {
		t.Fatal(err)
	}
	url := s.URL()
	s.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	if resp, err := (&http.Client{Transport: tr}).Post(url+"/v1/messages", "application/json", strings.NewReader("{}")); err == nil {
		resp.Body.Close()
		t.Fatal("a closed server answered")
	}
}

func TestStall(t *testing.T) {
	for _, api := range apis {
		t.Run(api.name, func(t *testing.T) {
			s := fakemodel.New(fakemodel.Auto)
			if err := s.Start(""); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			resp := post(t, httpClient(t), s.URL()+api.path, api.request(fakemodel.Marker(fakemodel.Stall), ""))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			br := bufio.NewReader(resp.Body)
			if api.name != "gemini" { // the opening event arrives, then nothing
				line, err := br.ReadString('\n')
				if err != nil || !strings.HasPrefix(line, "event: ") {
					t.Fatalf("first line %q, %v", line, err)
				}
			}
			// Close ends the stalled stream and returns once its handler did.
			closed := make(chan struct{})
			go func() { s.Close(); close(closed) }()
			if _, err := io.ReadAll(br); err != nil && !strings.Contains(err.Error(), "EOF") {
				t.Logf("stream ended with %v", err)
			}
			<-closed
			if r := s.Requests(); len(r) != 1 || r[0].Reply != "stall" {
				t.Fatalf("recorded %+v", r)
			}
		})
	}
}

func TestStallEndsWhenTheClientGoesAway(t *testing.T) {
	s := start(t, fakemodel.Stall)
	c := httpClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/responses", strings.NewReader(`{"model":"m","stream":true,"input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	s.Close() // blocks until the handler saw the client leave and returned
}

func TestMountedInHTTPTest(t *testing.T) {
	fake := fakemodel.New(fakemodel.Auto)
	ts := httptest.NewServer(fake)
	defer ts.Close()
	defer fake.Close()
	resp := post(t, httpClient(t), ts.URL+geminiAPI.path, geminiAPI.request("What is the answer?", ""))
	if g := geminiAPI.decode(t, readSSE(t, resp)); g.text != fakemodel.AnswerText {
		t.Fatalf("text %q, want %q", g.text, fakemodel.AnswerText)
	}
}
