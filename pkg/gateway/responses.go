package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// responsesRequest is the body of POST /v1/responses: the fields the
// gateway honours (any other is refused by decodeBody).
type responsesRequest struct {
	Model        string          `json:"model"`
	Input        json.RawMessage `json:"input"`
	Instructions string          `json:"instructions"`
	Stream       bool            `json:"stream"`
	// AgentmeshRequest is the adapter's own request fields (begin).
	AgentmeshRequest json.RawMessage `json:"agentmesh_request"`
}

// inputItem is one item of a Responses input list: a message.
type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// input reads a Responses input, a string or a list of messages.
func (req *responsesRequest) messages() ([]message, *APIError) {
	var msgs []message
	if req.Instructions != "" {
		msgs = append(msgs, message{role: "system", text: req.Instructions, param: "instructions"})
	}
	raw := bytes.TrimSpace(req.Input)
	if len(raw) > 0 && raw[0] == '"' {
		text, e := textOf(raw, "input")
		if e != nil {
			return nil, e
		}
		return append(msgs, message{role: "user", text: text, param: "input"}), nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
		return nil, invalid("input", "input must be a string or a non-empty list of messages")
	}
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		var item inputItem
		d := json.NewDecoder(bytes.NewReader(it))
		d.DisallowUnknownFields()
		if err := d.Decode(&item); err != nil {
			return nil, invalid(param, "%s: only messages {type, role, content} are supported: %v", param, err)
		}
		if item.Type != "" && item.Type != "message" {
			return nil, invalid(param+".type", "%s.type %q is not supported yet (want message)", param, item.Type)
		}
		text, e := textOf(item.Content, param+".content", "input_text", "output_text", "text")
		if e != nil {
			return nil, e
		}
		msgs = append(msgs, message{role: item.Role, text: text, param: param})
	}
	return msgs, nil
}

type responsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// response is the Responses API's response object for run, as it stands:
// in progress (o nil), completed or failed.
func response(run *run, text string, o *outcome) map[string]any {
	item := map[string]any{
		"type": "message", "id": "msg_" + run.id, "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}},
	}
	resp := map[string]any{
		"id": "resp_" + run.id, "object": "response", "created_at": run.created, "model": run.model,
		"status": "in_progress", "output": []any{}, "error": nil, "incomplete_details": nil,
		"parallel_tool_calls": false, "tool_choice": "auto", "tools": []any{},
	}
	if o == nil {
		return resp
	}
	if o.err != nil {
		resp["status"] = "failed"
		code := ""
		if o.err.Code != nil {
			code = *o.err.Code
		}
		resp["error"] = map[string]any{"code": code, "message": o.err.Message}
		return resp
	}
	var u responsesUsage
	u.InputTokens, u.OutputTokens, u.InputTokensDetails.CachedTokens, u.OutputTokensDetails.ReasoningTokens = usageTokens(o.usage)
	u.TotalTokens = u.InputTokens + u.OutputTokens
	resp["status"], resp["output"], resp["usage"] = "completed", []any{item}, u
	if o.cost != "" {
		resp[costField] = o.cost
	}
	return resp
}

func (g *Gateway) responses(w http.ResponseWriter, r *http.Request, who caller) {
	var req responsesRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	msgs, e := req.messages()
	if e != nil {
		writeError(w, e)
		return
	}
	run, e := g.begin(r.Context(), who, req.Model, msgs, "input", req.AgentmeshRequest)
	if e != nil {
		writeError(w, e)
		return
	}
	if !req.Stream {
		text, o := g.collect(r.Context(), run)
		if o.err != nil {
			writeError(w, o.err)
			return
		}
		hdr := map[string]string{"x-agentmesh-run-id": run.id}
		if o.cost != "" {
			hdr[costHeader] = o.cost
		}
		writeJSON(w, http.StatusOK, response(run, text, &o), hdr)
		return
	}
	var text []byte
	s := newSSE(w, run.id)
	seq := 0
	send := func(typ string, fields map[string]any) bool {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		return s.send(typ, fields)
	}
	itemID := "msg_" + run.id
	opened := false
	open := func() bool {
		opened = true
		return send("response.created", map[string]any{"response": response(run, "", nil)}) &&
			send("response.in_progress", map[string]any{"response": response(run, "", nil)}) &&
			send("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
				"type": "message", "id": itemID, "status": "in_progress", "role": "assistant", "content": []any{}}}) &&
			send("response.content_part.added", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	}
	o := g.follow(r.Context(), run, func(delta string) bool {
		if !opened && !open() {
			return false
		}
		text = append(text, delta...)
		return send("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "delta": delta, "logprobs": []any{}})
	})
	switch {
	case o.err != nil && !s.started:
		writeError(w, o.err)
		return
	case o.err != nil:
		send("response.failed", map[string]any{"response": response(run, string(text), &o)})
		return
	}
	if !opened && !open() {
		return
	}
	final := response(run, string(text), &o)
	part := map[string]any{"type": "output_text", "text": string(text), "annotations": []any{}}
	_ = send("response.output_text.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "text": string(text), "logprobs": []any{}}) &&
		send("response.content_part.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part}) &&
		send("response.output_item.done", map[string]any{"output_index": 0, "item": final["output"].([]any)[0]}) &&
		send("response.completed", map[string]any{"response": final})
}
