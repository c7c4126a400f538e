package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// scripts are the fixture scripts the tests' runs may name
// (agentmesh_request.script).
var scripts = map[string]string{
	// Deltas, then a result with usage and a stop at the length limit.
	"hello": `{"chunks": [
		{"type": "text", "content": "Hello", "is_delta": true},
		{"type": "text", "content": ", world!", "is_delta": true},
		{"type": "result", "metadata": {"usage": {"input_tokens": 3, "output_tokens": 4}, "stop_reason": "max_tokens"}}]}`,
	// The provider refuses before any output.
	"quota": `{"error": {"class": "ProviderQuotaError", "message": "slow down", "retryable": false}}`,
	// The provider fails after some output.
	"midway": `{"chunks": [
		{"type": "text", "content": "Working on it", "is_delta": true},
		{"type": "error", "content": "upstream broke", "is_error": true, "metadata": {"error_class": "ProviderStreamError"}}]}`,
}

func init() {
	// A stream of 600 deltas: paced at 100 ms (delay_ms), it lasts a
	// minute, far longer than a cancel takes.
	chunks := make([]string, 600)
	for i := range chunks {
		chunks[i] = `{"type": "text", "content": "tick ", "is_delta": true}`
	}
	scripts["long"] = `{"chunks": [` + strings.Join(chunks, ",") + `]}`
}

// env is a mesh with the fixture profile, a gateway in front of it and a
// key for each of two tenants.
type env struct {
	url        string
	keyA, keyB string
	keys       *gateway.Keys
	http       *http.Client
	client     *client.Client
	artifacts  *artifacts.Store
	// What the console tests build their own gateway from.
	nc       *nats.Conn
	js       jetstream.JetStream
	turns    *gateway.Turns
	profiles *profile.Registry
}

func start(t *testing.T, cfg gateway.Config) *env {
	t.Helper()
	return startWith(t, cfg, profile.Builtin())
}

// startWith is start with the profiles given (the fixture's among them).
func startWith(t *testing.T, cfg gateway.Config, profiles *profile.Registry) *env {
	t.Helper()
	s := natstest.RunJetStream(t)
	dir := t.TempDir()
	for name, script := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(script), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	adapters, err := catalog.Dirs{FixtureDir: dir, WorkspaceRoot: t.TempDir()}.Registry(profiles)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Serve(t, servicetest.Deps(t, s, topology.Config{}), profiles, adapters, mesh.Config{}, 30*time.Second)
	nc, js := natstest.Connect(t, s)
	ctx := context.Background()
	keys, err := gateway.OpenKeys(ctx, js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	turns, err := gateway.OpenTurns(ctx, js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(c, keys, turns, profiles, slog.New(slog.DiscardHandler), cfg)
	if err != nil {
		t.Fatal(err)
	}
	store, err := artifacts.Open(ctx, js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	g.SetArtifacts(store)
	srv := httptest.NewServer(g.Handler())
	tr := &http.Transport{}
	t.Cleanup(func() { tr.CloseIdleConnections(); srv.Close() })
	e := &env{url: srv.URL, keys: keys, client: c, artifacts: store, http: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		nc: nc, js: js, turns: turns, profiles: profiles}
	if e.keyA, _, err = keys.Create(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	if e.keyB, _, err = keys.Create(ctx, "globex", "bob"); err != nil {
		t.Fatal(err)
	}
	return e
}

// sdk is the official OpenAI client pointed at the gateway with key,
// retrying nothing (a retried request would hide the status under test).
func (e *env) sdk(key string) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(key),
		option.WithHTTPClient(e.http), option.WithMaxRetries(0))
	return &c
}

// fixtureText is the fixture adapter's text for a prompt without a script.
func fixtureText(prompt string) string { return "echo: " + prompt }

func TestSDKChatCompletions(t *testing.T) {
	e := start(t, gateway.Config{})
	ctx := context.Background()
	for _, key := range []string{e.keyA, e.keyB} { // two tenants, one gateway
		c := e.sdk(key)
		stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:         "fixture",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi there")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		var text strings.Builder
		for stream.Next() {
			ch := stream.Current()
			acc.AddChunk(ch)
			if ch.Model != "fixture-1" {
				t.Errorf("chunk model = %q, want the pin's fixture-1", ch.Model)
			}
			for _, choice := range ch.Choices {
				text.WriteString(choice.Delta.Content)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if got, want := text.String(), fixtureText("hi there"); got != want {
			t.Errorf("streamed text = %q, want %q", got, want)
		}
		if acc.Usage.TotalTokens == 0 || acc.Usage.PromptTokens == 0 || acc.Usage.CompletionTokens == 0 {
			t.Errorf("usage = %+v, want the run's tokens", acc.Usage)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "stop" {
			t.Errorf("accumulated choices = %+v, want one that stopped", acc.Choices)
		}

		got, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "fixture",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi there")},
		})
		if err != nil {
			t.Fatalf("non-streaming: %v", err)
		}
		if len(got.Choices) != 1 || got.Choices[0].Message.Content != text.String() {
			t.Errorf("non-streaming choices = %+v, want the streamed text %q", got.Choices, text.String())
		}
		if got.Model != "fixture-1" || got.Usage.TotalTokens != acc.Usage.TotalTokens {
			t.Errorf("non-streaming model %q usage %+v, want fixture-1 and the streamed usage %+v", got.Model, got.Usage, acc.Usage)
		}
		if cost := got.JSON.ExtraFields["x-agentmesh-cost"].Raw(); cost != `"0"` {
			t.Errorf("cost field = %s, want \"0\" (the fixture is priced at zero)", cost)
		}
	}
}

func TestSDKResponses(t *testing.T) {
	e := start(t, gateway.Config{})
	ctx := context.Background()
	c := e.sdk(e.keyA)
	stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "fixture",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
	})
	var text strings.Builder
	var types []string
	var done responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			done = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got, want := text.String(), fixtureText("hello"); got != want {
		t.Errorf("streamed text = %q, want %q", got, want)
	}
	if types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Errorf("event types = %v, want response.created first and response.completed last", types)
	}
	if done.Usage.TotalTokens == 0 || done.Usage.OutputTokens == 0 || done.Model != "fixture-1" || done.OutputText() != text.String() {
		t.Errorf("completed response: model %q usage %+v text %q, want fixture-1, the run's tokens and the streamed text", done.Model, done.Usage, done.OutputText())
	}
	if cost := done.JSON.ExtraFields["x-agentmesh-cost"].Raw(); cost != `"0"` {
		t.Errorf("completed response's cost = %s, want \"0\"", cost)
	}

	got, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model: "fixture",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("hello", responses.EasyInputMessageRoleUser),
		}},
	})
	if err != nil {
		t.Fatalf("non-streaming: %v", err)
	}
	if got.OutputText() != text.String() || got.Status != "completed" || got.Usage.TotalTokens != done.Usage.TotalTokens {
		t.Errorf("non-streaming: text %q status %q usage %+v, want %q, completed, %+v", got.OutputText(), got.Status, got.Usage, text.String(), done.Usage)
	}
}

func TestSDKWrongKey(t *testing.T) {
	e := start(t, gateway.Config{})
	ctx := context.Background()
	for _, key := range []string{"amk_not-a-key", "sk-something-else"} {
		c := e.sdk(key)
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "fixture", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_api_key" {
			t.Errorf("key %q: err = %v, want a 401 invalid_api_key", key[:4], err)
		}
		stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "fixture", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
		})
		for stream.Next() {
			t.Errorf("key %q: an event for a refused key: %+v", key[:4], stream.Current())
		}
		if !errors.As(stream.Err(), &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
			t.Errorf("key %q: stream err = %v, want a 401", key[:4], stream.Err())
		}
	}
	// A revoked key is refused from the next request on.
	keys, err := e.keys.List(ctx, "acme")
	if err != nil || len(keys) != 1 {
		t.Fatalf("list acme's keys: %v %v", keys, err)
	}
	if _, err := e.keys.Revoke(ctx, keys[0].ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.sdk(e.keyA).Models.List(ctx)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Errorf("revoked key: err = %v, want a 401", err)
	}
	if _, err := e.sdk(e.keyB).Models.List(ctx); err != nil {
		t.Errorf("the other tenant's key after a revoke: %v", err)
	}
}

func TestModels(t *testing.T) {
	e := start(t, gateway.Config{})
	page, err := e.sdk(e.keyA).Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "fixture" || page.Data[0].OwnedBy != "fixture" {
		t.Errorf("models = %+v, want the fixture profile", page.Data)
	}
}

// openAIError is OpenAI's error body, every field present.
type openAIError struct {
	Error struct {
		Message *string `json:"message"`
		Type    *string `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func TestBadInput(t *testing.T) {
	e := start(t, gateway.Config{MaxBodyBytes: gateway.MinMaxBodyBytes})
	big := `{"model":"fixture","messages":[{"role":"user","content":"` + strings.Repeat("x", gateway.MinMaxBodyBytes) + `"}]}`
	tests := []struct {
		name, path, body string
		key              string // "" : tenant A's
		wantStatus       int
		wantCode         string
		wantParam        string
	}{
		{name: "malformed JSON", path: "/v1/chat/completions", body: `{"model": "fixture", "messages": [`, wantStatus: 400, wantCode: "invalid_json"},
		{name: "malformed JSON responses", path: "/v1/responses", body: `{"model": "fixture" "input": "hi"}`, wantStatus: 400, wantCode: "invalid_json"},
		{name: "oversized body", path: "/v1/chat/completions", body: big, wantStatus: 413, wantCode: "request_too_large"},
		{name: "unknown model", path: "/v1/chat/completions", body: `{"model":"no-such","messages":[{"role":"user","content":"hi"}]}`, wantStatus: 404, wantCode: "model_not_found", wantParam: "model"},
		{name: "unknown model responses", path: "/v1/responses", body: `{"model":"openai/gpt-0","input":"hi"}`, wantStatus: 404, wantCode: "model_not_found", wantParam: "model"},
		{name: "unsupported parameter", path: "/v1/chat/completions", body: `{"model":"fixture","top_p":0.2,"messages":[{"role":"user","content":"hi"}]}`, wantStatus: 400, wantCode: "unknown_parameter", wantParam: "top_p"},
		{name: "a setting the adapter refuses", path: "/v1/chat/completions", body: `{"model":"fixture","temperature":0.2,"messages":[{"role":"user","content":"hi"}]}`, wantStatus: 400, wantCode: "invalid_request"},
		{name: "two output limits", path: "/v1/chat/completions", body: `{"model":"fixture","max_tokens":5,"max_completion_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "max_tokens"},
		{name: "a setting set twice", path: "/v1/responses", body: `{"model":"fixture","temperature":1,"agentmesh_request":{"temperature":1},"input":"hi"}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "agentmesh_request.temperature"},
		{name: "reasoning summary", path: "/v1/responses", body: `{"model":"fixture","reasoning":{"effort":"low","summary":"auto"},"input":"hi"}`, wantStatus: 400, wantCode: "unknown_parameter", wantParam: "summary"},
		{name: "wrong type", path: "/v1/chat/completions", body: `{"model":"fixture","stream":"yes","messages":[{"role":"user","content":"hi"}]}`, wantStatus: 400, wantCode: "invalid_type", wantParam: "stream"},
		{name: "no user message", path: "/v1/chat/completions", body: `{"model":"fixture","messages":[{"role":"system","content":"be brief"}]}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "messages"},
		{name: "history", path: "/v1/chat/completions", body: `{"model":"fixture","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "messages"},
		{name: "tools on an agent-less profile", path: "/v1/chat/completions", body: `{"model":"fixture","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "tools"},
		{name: "tool_choice required", path: "/v1/chat/completions", body: `{"model":"fixture","tool_choice":"required","messages":[{"role":"user","content":"hi"}]}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "tool_choice"},
		{name: "no parallel tool calls", path: "/v1/responses", body: `{"model":"fixture","parallel_tool_calls":false,"input":"hi"}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "parallel_tool_calls"},
		{name: "hosted tool", path: "/v1/responses", body: `{"model":"fixture","tools":[{"type":"web_search"}],"input":"hi"}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "tools[0].type"},
		{name: "tool results without calls", path: "/v1/chat/completions", body: `{"model":"fixture","messages":[{"role":"tool","tool_call_id":"c1","content":"42"}]}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "messages[0]"},
		{name: "tool message without its call id", path: "/v1/chat/completions", body: `{"model":"fixture","messages":[{"role":"user","content":"a"},{"role":"tool","content":"42"}]}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "messages[1].tool_call_id"},
		{name: "late system message", path: "/v1/chat/completions", body: `{"model":"fixture","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"system","content":"s"},{"role":"user","content":"c"}]}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "messages[2]"},
		{name: "two user turns", path: "/v1/responses", body: `{"model":"fixture","input":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "input[0]"},
		{name: "unknown previous response", path: "/v1/responses", body: `{"model":"fixture","previous_response_id":"chatcmpl-x","input":"hi"}`, wantStatus: 404, wantCode: "previous_response_not_found", wantParam: "previous_response_id"},
		{name: "reasoning item", path: "/v1/responses", body: `{"model":"fixture","input":[{"type":"reasoning","id":"rs_1","summary":[]}]}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "input[0].type"},
		{name: "image part", path: "/v1/chat/completions", body: `{"model":"fixture","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, wantStatus: 400, wantCode: "invalid_request", wantParam: "messages[0].content[0]"},
		{name: "adapter refuses a system text", path: "/v1/responses", body: `{"model":"fixture","instructions":"be brief","input":"hi"}`, wantStatus: 400, wantCode: "invalid_request"},
		{name: "no key", path: "/v1/responses", body: `{"model":"fixture","input":"hi"}`, key: "-", wantStatus: 401, wantCode: "missing_api_key"},
		{name: "unknown endpoint", path: "/v1/embeddings", body: `{}`, wantStatus: 404, wantCode: "unknown_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.url+tt.path, strings.NewReader(tt.body))
			switch tt.key {
			case "":
				req.Header.Set("Authorization", "Bearer "+e.keyA)
			case "-":
			default:
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			resp, err := e.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, b)
			}
			var got openAIError
			d := json.NewDecoder(bytes.NewReader(b))
			d.DisallowUnknownFields()
			if err := d.Decode(&got); err != nil {
				t.Fatalf("body %s: %v", b, err)
			}
			if got.Error.Message == nil || *got.Error.Message == "" || got.Error.Type == nil || *got.Error.Type == "" {
				t.Errorf("body %s: want a message and a type", b)
			}
			if !bytes.Contains(b, []byte(`"param":`)) || !bytes.Contains(b, []byte(`"code":`)) {
				t.Errorf("body %s: want param and code present", b)
			}
			if got.Error.Code == nil || *got.Error.Code != tt.wantCode {
				t.Errorf("body %s: code, want %q", b, tt.wantCode)
			}
			if tt.wantParam != "" && (got.Error.Param == nil || *got.Error.Param != tt.wantParam) {
				t.Errorf("body %s: param, want %q", b, tt.wantParam)
			}
			if strings.Contains(string(b), e.keyA) {
				t.Errorf("body %s holds the key", b)
			}
		})
	}
}

// TestTenantOfKey: a run started through the gateway is the key's
// tenant's and principal's, and another tenant cannot read it; the
// non-streaming reply carries its id and exact cost in headers.
func TestTenantOfKey(t *testing.T) {
	e := start(t, gateway.Config{})
	ctx := context.Background()
	req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(`{"model":"fixture","messages":[{"role":"user","content":"mine"}]}`))
	req.Header.Set("Authorization", "Bearer "+e.keyB)
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	runID := resp.Header.Get("x-agentmesh-run-id")
	if resp.StatusCode != http.StatusOK || runID == "" || resp.Header.Get("x-agentmesh-cost") != "0" {
		t.Fatalf("%d %v %s, want 200 with the run id and cost headers", resp.StatusCode, resp.Header, b)
	}
	// The record is written just after the terminal event the reply
	// followed to.
	natstest.Eventually(t, 10*time.Second, func() error {
		rec, err := e.client.Status(ctx, "globex", runID)
		if err != nil || rec.Principal != "bob" || rec.State != "succeeded" {
			return fmt.Errorf("globex's record of %s: %+v %v, want bob's, succeeded", runID, rec, err)
		}
		return nil
	})
	if _, err := e.client.Status(ctx, "acme", runID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("acme's record of globex's run: %v, want not found", err)
	}
}
