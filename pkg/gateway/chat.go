package gateway

import (
	"encoding/json"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"net/http"
)

// chatRequest is the body of POST /v1/chat/completions: the fields the
// gateway honours (any other is refused by decodeBody).
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Temperature         *float64        `json:"temperature"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	ReasoningEffort     string          `json:"reasoning_effort"`
	Tools               []chatTool      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	// AgentmeshRequest is the adapter's own request fields (ask.extra).
	AgentmeshRequest json.RawMessage `json:"agentmesh_request"`
	// AgentmeshWorkspace is the runs API's workspace (ask.workspace).
	AgentmeshWorkspace *wire.WorkspaceSource `json:"agentmesh_workspace"`
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func newChatUsage(o outcome) *chatUsage {
	var u chatUsage
	u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens, u.CompletionTokensDetails.ReasoningTokens = usageTokens(o.usage)
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return &u
}

// finishReason is OpenAI's finish_reason for how a run ended.
func finishReason(o outcome) string {
	if len(o.calls) > 0 {
		return "tool_calls"
	}
	switch o.stop {
	case "max_tokens", "length", "max_output_tokens":
		return "length"
	case "content_filter", "refusal":
		return "content_filter"
	}
	return "stop"
}

// costHeader is the header carrying a run's exact cost (USD, a decimal
// string), and costField the same as a field of the final event or body.
const (
	costHeader = "x-agentmesh-cost"
	costField  = "x-agentmesh-cost"
)

func (g *Gateway) chatCompletions(w http.ResponseWriter, r *http.Request, who caller) {
	var req chatRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.StreamOptions != nil && !req.Stream {
		writeError(w, invalid("stream_options", "stream_options is only allowed with stream: true"))
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, invalid("messages", "messages must not be empty"))
		return
	}
	a := ask{model: req.Model, param: "messages", extra: req.AgentmeshRequest, workspace: req.AgentmeshWorkspace}
	maxTokens, maxParam := req.MaxCompletionTokens, "max_completion_tokens"
	if req.MaxTokens != nil {
		if maxTokens != nil {
			writeError(w, invalid("max_tokens", "max_tokens and max_completion_tokens are one limit: send one of them"))
			return
		}
		maxTokens, maxParam = req.MaxTokens, "max_tokens"
	}
	a.sampling = sampling(req.Temperature, maxTokens, maxParam, req.ReasoningEffort, "reasoning_effort")
	var e *APIError
	if a.atoms, e = chatAtoms(req.Messages); e == nil {
		if a.tools, e = chatTools(req.Tools); e == nil {
			if e = toolChoice(req.ToolChoice); e == nil {
				e = parallelCalls(req.ParallelToolCalls)
			}
		}
	}
	if e != nil {
		writeError(w, e)
		return
	}
	run, e := g.begin(r.Context(), who, a)
	if e != nil {
		writeError(w, e)
		return
	}
	id := "chatcmpl-" + run.id
	if !req.Stream {
		o := g.collect(r.Context(), run)
		if o.err != nil {
			writeError(w, o.err)
			return
		}
		msg := map[string]any{"role": "assistant", "content": o.text, "refusal": nil}
		if len(o.calls) > 0 {
			calls := make([]any, len(o.calls))
			for i, c := range o.calls {
				calls[i] = chatCall(c)
			}
			msg["tool_calls"] = calls
			if o.text == "" {
				msg["content"] = nil
			}
		}
		body := map[string]any{
			"id": id, "object": "chat.completion", "created": run.created, "model": run.model,
			"choices": []any{map[string]any{
				"index":         0,
				"message":       msg,
				"finish_reason": finishReason(o),
				"logprobs":      nil,
			}},
			"usage": newChatUsage(o),
		}
		hdr := map[string]string{"x-agentmesh-run-id": run.id}
		if o.cost != "" {
			body[costField], hdr[costHeader] = o.cost, o.cost
		}
		writeJSON(w, http.StatusOK, body, hdr)
		return
	}
	s := newSSE(w, run.id)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": run.created, "model": run.model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		}
	}
	first := true
	send := func(delta map[string]any) bool {
		if first {
			delta["role"], first = "assistant", false
		}
		return s.send("", chunk(delta, nil))
	}
	calls := 0
	o := g.follow(r.Context(), run, func(text string) bool {
		return send(map[string]any{"content": text})
	}, func(c call) bool {
		tc := chatCall(c)
		tc["index"] = calls
		calls++
		return send(map[string]any{"tool_calls": []any{tc}})
	})
	switch {
	case o.err != nil && !s.started:
		writeError(w, o.err)
		return
	case o.err != nil:
		s.send("", map[string]any{"error": o.err})
		return
	}
	if first {
		s.send("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	}
	last := chunk(map[string]any{}, finishReason(o))
	if o.cost != "" {
		last[costField] = o.cost
	}
	if req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
		s.send("", last)
		s.send("", "[DONE]")
		return
	}
	s.send("", last)
	final := map[string]any{
		"id": id, "object": "chat.completion.chunk", "created": run.created, "model": run.model,
		"choices": []any{}, "usage": newChatUsage(o),
	}
	if o.cost != "" {
		final[costField] = o.cost
	}
	s.send("", final)
	s.send("", "[DONE]")
}

// chatCall is a tool call in a chat message's tool_calls.
func chatCall(c call) map[string]any {
	return map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": c.args}}
}
