package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// openAIModel is a fake OpenAI Responses API serving the recorded tool
// round trip: the call for a request without a function_call_output, the
// answer for one with it. It keeps every request body.
type openAIModel struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []string
	// Set before the requests they affect: with hold set, an answer
	// waits for it to be closed, after telling arrived; with failAnswers
	// > 0, that many answers are refused with a 400.
	hold, arrived chan struct{}
	failAnswers   int
}

func startOpenAIModel(t *testing.T) *openAIModel {
	t.Helper()
	rec, err := replay.Load("../../testdata/remote/openai/tool-roundtrip.json")
	if err != nil || len(rec) != 2 {
		t.Fatalf("tool-roundtrip.json: %v, %d responses, want 2", err, len(rec))
	}
	m := &openAIModel{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		isAnswer := strings.Contains(string(b), `"function_call_output"`)
		m.mu.Lock()
		m.reqs = append(m.reqs, string(b))
		hold, arrived, fail := m.hold, m.arrived, isAnswer && m.failAnswers > 0
		if fail {
			m.failAnswers--
		}
		m.mu.Unlock()
		if fail {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"bad output","type":"invalid_request_error","param":null,"code":null}}`)
			return
		}
		resp := rec[0]
		if isAnswer {
			resp = rec[1]
			if hold != nil {
				arrived <- struct{}{}
				<-hold
			}
		}
		resp.Write(w)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *openAIModel) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.reqs...)
}

// startWithOpenAI is a gateway whose profiles are the fixture's and "oa",
// the openai adapter against m.
func startWithOpenAI(t *testing.T, m *openAIModel) *env {
	t.Helper()
	profiles, err := profile.New(
		profile.Profile{Name: "fixture", Adapter: "fixture", Transport: wire.TransportInProcess, Model: "fixture-1",
			Pricing: map[string]string{"input": "0", "output": "0"}},
		profile.Profile{Name: "oa", Adapter: "openai", Transport: wire.TransportRemote, Model: "gpt-5.5",
			BaseURL: m.URL, AllowLoopback: true,
			Pricing: map[string]string{"input": "1.25", "output": "10", "cache_read": "0.125", "reasoning": "10"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return startWith(t, gateway.Config{}, profiles)
}

var fsReadParams = shared.FunctionParameters{
	"type": "object",
	"properties": map[string]any{
		"path":      map[string]any{"type": "string"},
		"max_bytes": map[string]any{"type": "integer", "minimum": 1},
	},
	"required":             []any{"path"},
	"additionalProperties": false,
}

const (
	question  = "What does answer.txt say?"
	answer    = "answer.txt says: 42."
	callID    = "call_Rt7Yh2Kp9Lm4Nq8Ws1Ez5Xc3"
	wantArgs  = `{"path":"answer.txt"}`
	toolReply = "42\n"
)

// TestSDKToolCallRoundTrip: with the official SDK, a model's tool call
// reaches the caller in both shapes, streaming and not, and the caller's
// tool result continues the same mesh conversation: sent back in the
// chat history, as a Responses previous_response_id or as the Responses
// history inline. A conversation is its tenant's alone, and a turn is
// continued once.
func TestSDKToolCallRoundTrip(t *testing.T) {
	m := startOpenAIModel(t)
	e := startWithOpenAI(t, m)
	ctx := context.Background()
	c := e.sdk(e.keyA)
	chatTools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "fs_read", Description: openai.String("Read a file of the workspace"), Parameters: fsReadParams,
	})}
	user := openai.UserMessage(question)
	checkCall := func(shape string, id, name, args string) {
		t.Helper()
		if id != callID || name != "fs_read" || args != wantArgs {
			t.Fatalf("%s: call %s %s(%s), want %s fs_read(%s)", shape, id, name, args, callID, wantArgs)
		}
	}
	var apiErr *openai.Error

	// Chat, not streaming: the call, then the answer to its result.
	r1, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "oa", Tools: chatTools,
		Messages: []openai.ChatCompletionMessageParamUnion{user}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.Choices) != 1 || r1.Choices[0].FinishReason != "tool_calls" || len(r1.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("chat: %s, want one tool call", r1.RawJSON())
	}
	tc := r1.Choices[0].Message.ToolCalls[0]
	checkCall("chat", tc.ID, tc.Function.Name, tc.Function.Arguments)
	if r1.Model != "gpt-5.5-2026-04-23" && r1.Model != "gpt-5.5" {
		t.Errorf("chat model %q, want the pin's", r1.Model)
	}
	history := []openai.ChatCompletionMessageParamUnion{user, r1.Choices[0].Message.ToParam(), openai.ToolMessage(toolReply, tc.ID)}
	r2, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "oa", Tools: chatTools, Messages: history})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Choices[0].Message.Content != answer || r2.Choices[0].FinishReason != "stop" || r2.Usage.PromptTokens == 0 {
		t.Fatalf("chat answer: %s", r2.RawJSON())
	}
	// The result went to the model as the call's output, on the
	// conversation the mesh continued (its encrypted reasoning replayed).
	reqs := m.requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1], `"call_id":"`+callID+`"`) || !strings.Contains(reqs[1], `"output":"42\n"`) ||
		!strings.Contains(reqs[1], "encrypted_content") {
		t.Fatalf("the model's second request: %s", reqs[len(reqs)-1])
	}
	// The same history again: the conversation has moved on from it.
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "oa", Tools: chatTools, Messages: history})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || apiErr.Code != "conversation_moved_on" {
		t.Errorf("the same turn continued twice: %v, want a 409 conversation_moved_on", err)
	}
	// Tenant B sending tenant A's history finds no conversation.
	_, err = e.sdk(e.keyB).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "oa", Tools: chatTools,
		Messages: []openai.ChatCompletionMessageParamUnion{user, r2.Choices[0].Message.ToParam(), openai.UserMessage("and then?")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "conversation_not_found" {
		t.Errorf("tenant B continuing tenant A's conversation: %v, want a 400 conversation_not_found", err)
	}

	// Chat, streaming: the call arrives as tool_calls deltas.
	var acc openai.ChatCompletionAccumulator
	s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "oa", Tools: chatTools,
		Messages: []openai.ChatCompletionMessageParamUnion{user}, StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "tool_calls" || len(acc.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("chat stream: %+v, want one tool call", acc.Choices)
	}
	tc = acc.Choices[0].Message.ToolCalls[0]
	checkCall("chat stream", tc.ID, tc.Function.Name, tc.Function.Arguments)
	asst := acc.Choices[0].Message.ToParam()
	acc = openai.ChatCompletionAccumulator{}
	s = c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "oa", Tools: chatTools,
		Messages: []openai.ChatCompletionMessageParamUnion{user, asst, openai.ToolMessage(toolReply, tc.ID)}})
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil || acc.Choices[0].Message.Content != answer {
		t.Fatalf("chat stream answer: %+v %v", acc.Choices, err)
	}

	// Responses, not streaming, through previous_response_id.
	respTools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
		Name: "fs_read", Description: openai.String("Read a file of the workspace"), Parameters: fsReadParams, Strict: openai.Bool(false),
	}}}
	q := responses.ResponseNewParams{Model: "oa", Tools: respTools, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question)}}
	p1, err := c.Responses.New(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(p1.Output) != 1 || p1.Output[0].Type != "function_call" {
		t.Fatalf("responses: %s, want one function_call item", p1.RawJSON())
	}
	fc := p1.Output[0].AsFunctionCall()
	checkCall("responses", fc.CallID, fc.Name, fc.Arguments)
	out := responses.ResponseInputItemParamOfFunctionCallOutput(toolReply)
	out.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
	next := responses.ResponseNewParams{Model: "oa", Tools: respTools, PreviousResponseID: openai.String(p1.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}}
	// Another tenant cannot continue from tenant A's response.
	_, err = e.sdk(e.keyB).Responses.New(ctx, next)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "previous_response_not_found" {
		t.Errorf("tenant B continuing tenant A's response: %v %s, want a 404 previous_response_not_found", err, apiErr.RawJSON())
	}
	p2, err := c.Responses.New(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if p2.OutputText() != answer || p2.Usage.InputTokens == 0 {
		t.Fatalf("responses answer: %s", p2.RawJSON())
	}

	// Responses, streaming, with the history sent back inline.
	var done responses.Response
	var argDeltas strings.Builder
	rs := c.Responses.NewStreaming(ctx, q)
	for rs.Next() {
		ev := rs.Current()
		switch ev.Type {
		case "response.function_call_arguments.delta":
			argDeltas.WriteString(ev.Delta)
		case "response.completed":
			done = ev.Response
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if len(done.Output) != 1 || argDeltas.String() != wantArgs {
		t.Fatalf("responses stream: output %s, argument deltas %q", done.RawJSON(), argDeltas.String())
	}
	fc = done.Output[0].AsFunctionCall()
	checkCall("responses stream", fc.CallID, fc.Name, fc.Arguments)
	callParam := fc.ToParam()
	out = responses.ResponseInputItemParamOfFunctionCallOutput(toolReply)
	out.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
	inline := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage(question, responses.EasyInputMessageRoleUser),
		{OfFunctionCall: &callParam},
		out,
	}
	var text strings.Builder
	rs = c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "oa", Tools: respTools,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: inline}})
	for rs.Next() {
		if ev := rs.Current(); ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	if err := rs.Err(); err != nil || text.String() != answer {
		t.Fatalf("responses stream answer %q, %v", text.String(), err)
	}
	if n := len(m.requests()); n != 8 {
		t.Errorf("the model got %d requests, want 8 (4 round trips)", n)
	}
}

// TestOneContinuationAtATime: while one request continues a turn, another
// from the same turn is refused as busy; a continuation that failed
// leaves the turn to be continued again.
func TestOneContinuationAtATime(t *testing.T) {
	m := startOpenAIModel(t)
	e := startWithOpenAI(t, m)
	ctx := context.Background()
	c := e.sdk(e.keyA)
	respTools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "fs_read", Parameters: fsReadParams}}}
	p1, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "oa", Tools: respTools,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question)}})
	if err != nil {
		t.Fatal(err)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput(toolReply)
	out.OfFunctionCallOutput.CallID = openai.String(callID)
	next := responses.ResponseNewParams{Model: "oa", Tools: respTools, PreviousResponseID: openai.String(p1.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}}
	var apiErr *openai.Error

	m.mu.Lock()
	m.failAnswers = 1
	m.mu.Unlock()
	if _, err := c.Responses.New(ctx, next); !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "bad output") {
		t.Fatalf("a continuation the model refuses: %v, want the model's error", err)
	}

	m.mu.Lock()
	m.hold, m.arrived = make(chan struct{}), make(chan struct{}, 1)
	m.mu.Unlock()
	first := make(chan error, 1)
	go func() {
		r, err := c.Responses.New(ctx, next)
		if err == nil && r.OutputText() != answer {
			err = errors.New("answer " + r.OutputText())
		}
		first <- err
	}()
	<-m.arrived // the first continuation is running
	_, err = c.Responses.New(ctx, next)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || apiErr.Code != "conversation_busy" {
		t.Errorf("a second continuation while the first runs: %v, want a 409 conversation_busy", err)
	}
	close(m.hold)
	if err := <-first; err != nil {
		t.Fatalf("the continuation after a failed one: %v", err)
	}
	_, err = c.Responses.New(ctx, next)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || apiErr.Code != "conversation_moved_on" {
		t.Errorf("continuing a turn already continued: %v, want a 409 conversation_moved_on", err)
	}
}

// TestSettingsReachTheModel: temperature, the output token limit and the
// reasoning effort, in either shape's names, reach the model API as its
// own fields.
func TestSettingsReachTheModel(t *testing.T) {
	m := startOpenAIModel(t)
	e := startWithOpenAI(t, m)
	ctx := context.Background()
	c := e.sdk(e.keyA)
	// The fake model calls fs_read whatever it is asked: declare it.
	chatTools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "fs_read", Parameters: fsReadParams})}
	respTools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "fs_read", Parameters: fsReadParams}}}
	if _, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "oa", Tools: chatTools, Temperature: openai.Float(0.25),
		MaxCompletionTokens: openai.Int(100), ReasoningEffort: shared.ReasoningEffortLow,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)}}); err != nil {
		var apiErr *openai.Error
		errors.As(err, &apiErr)
		t.Fatalf("%v %s", err, apiErr.RawJSON())
	}
	if _, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "oa", Tools: respTools, Temperature: openai.Float(1.5),
		MaxOutputTokens: openai.Int(64), Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortHigh},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question)}}); err != nil {
		t.Fatal(err)
	}
	reqs := m.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for i, want := range [][]string{
		{`"temperature":0.25`, `"max_output_tokens":100`, `"effort":"low"`},
		{`"temperature":1.5`, `"max_output_tokens":64`, `"effort":"high"`},
	} {
		for _, w := range want {
			if !strings.Contains(reqs[i], w) {
				t.Errorf("request %d to the model lacks %s: %s", i+1, w, reqs[i])
			}
		}
	}
}

// TestAlikeConversations: two conversations of one tenant that are alike
// turn for turn (the same question, the same reply) are each continued
// once: the history finds a free one for each, and only a third
// continuation is refused.
func TestAlikeConversations(t *testing.T) {
	m := startOpenAIModel(t)
	e := startWithOpenAI(t, m)
	ctx := context.Background()
	keyC, _, err := e.keys.Create(ctx, "acme", "carol")
	if err != nil {
		t.Fatal(err)
	}
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "fs_read", Parameters: fsReadParams})}
	user := openai.UserMessage(question)
	var histories [][]openai.ChatCompletionMessageParamUnion
	for _, key := range []string{e.keyA, keyC} {
		r, err := e.sdk(key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "oa", Tools: tools,
			Messages: []openai.ChatCompletionMessageParamUnion{user}})
		if err != nil {
			t.Fatal(err)
		}
		histories = append(histories, []openai.ChatCompletionMessageParamUnion{user, r.Choices[0].Message.ToParam(),
			openai.ToolMessage(toolReply, r.Choices[0].Message.ToolCalls[0].ID)})
	}
	for i, key := range []string{keyC, e.keyA} {
		r, err := e.sdk(key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "oa", Tools: tools, Messages: histories[i]})
		if err != nil || r.Choices[0].Message.Content != answer {
			t.Fatalf("continuation %d of two alike conversations: %v", i+1, err)
		}
	}
	var apiErr *openai.Error
	_, err = e.sdk(e.keyA).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "oa", Tools: tools, Messages: histories[0]})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || apiErr.Code != "conversation_moved_on" {
		t.Errorf("a third continuation of two alike conversations: %v, want a 409 conversation_moved_on", err)
	}
}
