package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// script names a fixture script through agentmesh_request.
func script(name string) option.RequestOption {
	return option.WithJSONSet("agentmesh_request", map[string]any{"script": name})
}

// chatParams is a chat request for prompt; streaming, it asks for usage.
func chatParams(prompt string, stream bool) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{
		Model:    "fixture",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
	}
	if stream {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	return p
}

// TestScriptedStreams: deltas, the stop reason and the usage of a
// recorded stream come through; a provider failure before output is the
// HTTP status its class maps to, and one after output ends the stream
// with an error the SDK reports.
func TestScriptedStreams(t *testing.T) {
	e := start(t, gateway.Config{})
	ctx := context.Background()
	c := e.sdk(e.keyA)

	stream := c.Chat.Completions.NewStreaming(ctx, chatParams("hi", true), script("hello"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Hello, world!" || acc.Choices[0].FinishReason != "length" {
		t.Errorf("choices %+v, want \"Hello, world!\" stopped at the length limit", acc.Choices)
	}
	if u := acc.Usage; u.PromptTokens != 3 || u.CompletionTokens != 4 || u.TotalTokens != 7 {
		t.Errorf("usage %+v, want the script's 3 in, 4 out", u)
	}

	var apiErr *openai.Error
	_, err := c.Chat.Completions.New(ctx, chatParams("hi", false), script("quota"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "rate_limit_exceeded" || !strings.Contains(apiErr.Message, "slow down") {
		t.Errorf("quota before output: %v %s, want a 429 rate_limit_exceeded with the provider's message", err, apiErr.RawJSON())
	}
	rs := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "fixture", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	}, script("quota"))
	for rs.Next() {
		t.Errorf("an event before a refusal: %s", rs.Current().Type)
	}
	if !errors.As(rs.Err(), &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Errorf("quota before output, streaming: %v, want a 429", rs.Err())
	}

	stream = c.Chat.Completions.NewStreaming(ctx, chatParams("hi", true), script("midway"))
	var text strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	if text.String() != "Working on it" || stream.Err() == nil || !strings.Contains(stream.Err().Error(), "upstream broke") {
		t.Errorf("failure after output: text %q, err %v; want the text, then the provider's error", text.String(), stream.Err())
	}
	rs = c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "fixture", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	}, script("midway"))
	var last responses.ResponseStreamEventUnion
	for rs.Next() {
		last = rs.Current()
	}
	if last.Type != "response.failed" || last.Response.Status != "failed" || !strings.Contains(last.Response.Error.Message, "upstream broke") {
		t.Errorf("failure after output, responses: last event %s %q %q (err %v), want response.failed with the provider's error",
			last.Type, last.Response.Status, last.Response.Error.Message, rs.Err())
	}

	for _, tt := range []struct {
		name  string
		extra map[string]any
		param string
	}{
		{"sets the prompt", map[string]any{"prompt": "other"}, "agentmesh_request.prompt"},
		{"a field the adapter refuses", map[string]any{"colour": "red"}, ""},
		{"an unknown script", map[string]any{"script": "nope"}, ""},
	} {
		_, err := c.Chat.Completions.New(ctx, chatParams("hi", false), option.WithJSONSet("agentmesh_request", tt.extra))
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || (tt.param != "" && apiErr.Param != tt.param) {
			t.Errorf("%s: %v %s, want a 400 naming %q", tt.name, err, apiErr.RawJSON(), tt.param)
		}
	}
}

// TestCallerLeaves: a streaming caller that goes away mid-run has its
// run cancelled, not left running for nobody.
func TestCallerLeaves(t *testing.T) {
	e := start(t, gateway.Config{})
	body := `{"model":"fixture","stream":true,"messages":[{"role":"user","content":"hi"}],"agentmesh_request":{"script":"long","delay_ms":100}}`
	resp := e.open(t, e.keyA, "POST", "/v1/chat/completions", body, nil)
	runID := resp.Header.Get("x-agentmesh-run-id")
	first := make([]byte, 64)
	n, err := resp.Body.Read(first)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || runID == "" || err != nil || !strings.Contains(string(first[:n]), "data: ") {
		t.Fatalf("%d run %q, first read %q %v: want a stream under way", resp.StatusCode, runID, first[:n], err)
	}
	natstest.Eventually(t, 20*time.Second, func() error {
		rec, err := e.client.Status(context.Background(), "acme", runID)
		if err != nil || rec.State != wire.StateCancelled {
			return fmt.Errorf("run %s: %s %v, want cancelled", runID, rec.State, err)
		}
		return nil
	})
}
