package gateway

import (
	"encoding/json"
	"fmt"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"net/http"
	"strings"
)

// responsesRequest is the body of POST /v1/responses: the fields the
// gateway honours (any other is refused by decodeBody).
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       string          `json:"instructions"`
	PreviousResponseID string          `json:"previous_response_id"`
	Stream             bool            `json:"stream"`
	Temperature        *float64        `json:"temperature"`
	MaxOutputTokens    *int64          `json:"max_output_tokens"`
	Reasoning          *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Tools             []responsesTool `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	// AgentmeshRequest is the adapter's own request fields (ask.extra).
	AgentmeshRequest json.RawMessage `json:"agentmesh_request"`
	// AgentmeshWorkspace is the runs API's workspace (ask.workspace).
	AgentmeshWorkspace *wire.WorkspaceSource `json:"agentmesh_workspace"`
}

// ask reads the request.
func (req *responsesRequest) ask() (ask, *APIError) {
	a := ask{model: req.Model, param: "input", extra: req.AgentmeshRequest, workspace: req.AgentmeshWorkspace}
	effort := ""
	if req.Reasoning != nil {
		effort = req.Reasoning.Effort
	}
	a.sampling = sampling(req.Temperature, req.MaxOutputTokens, "max_output_tokens", effort, "reasoning.effort")
	instructions := req.Instructions
	if req.PreviousResponseID != "" {
		id, ok := strings.CutPrefix(req.PreviousResponseID, "resp_")
		if !ok || id == "" {
			return a, apiErr(http.StatusNotFound, typeInvalidRequest, "previous_response_not_found", "previous_response_id",
				"previous response %q not found: the gateway's response ids start with resp_", req.PreviousResponseID)
		}
		a.previous, a.system, instructions = id, req.Instructions, ""
	}
	var e *APIError
	if a.atoms, e = responsesAtoms(req.Input, instructions); e != nil {
		return a, e
	}
	if a.tools, e = responsesTools(req.Tools); e != nil {
		return a, e
	}
	if e = toolChoice(req.ToolChoice); e != nil {
		return a, e
	}
	return a, parallelCalls(req.ParallelToolCalls)
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

// outputItems are a reply's output items: its message (left out when a
// reply with tool calls has no text), then a function_call item for each
// call.
func outputItems(runID string, o *outcome) []any {
	var items []any
	if o.text != "" || len(o.calls) == 0 {
		items = append(items, messageItem(runID, 0, o.text, "completed"))
	}
	for i, c := range o.calls {
		items = append(items, callItem(runID, i, c, "completed"))
	}
	return items
}

func messageItem(runID string, n int, text, status string) map[string]any {
	content := []any{}
	if status == "completed" {
		content = []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}
	}
	return map[string]any{"type": "message", "id": fmt.Sprintf("msg_%s_%d", runID, n), "status": status, "role": "assistant", "content": content}
}

func callItem(runID string, n int, c call, status string) map[string]any {
	args := c.args
	if status != "completed" {
		args = ""
	}
	return map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%s_%d", runID, n), "status": status,
		"call_id": c.id, "name": c.name, "arguments": args}
}

// response is the Responses API's response object for run, as it stands:
// in progress (o nil), completed or failed.
func response(run *run, o *outcome) map[string]any {
	resp := map[string]any{
		"id": "resp_" + run.id, "object": "response", "created_at": run.created, "model": run.model,
		"status": "in_progress", "output": []any{}, "error": nil, "incomplete_details": nil,
		"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
	}
	if run.parent != "" {
		resp["previous_response_id"] = "resp_" + run.parent
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
	resp["status"], resp["output"], resp["usage"] = "completed", outputItems(run.id, o), u
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
	a, e := req.ask()
	if e != nil {
		writeError(w, e)
		return
	}
	run, e := g.begin(r.Context(), who, a)
	if e != nil {
		writeError(w, e)
		return
	}
	if !req.Stream {
		o := g.collect(r.Context(), run)
		if o.err != nil {
			writeError(w, o.err)
			return
		}
		hdr := map[string]string{"x-agentmesh-run-id": run.id}
		if o.cost != "" {
			hdr[costHeader] = o.cost
		}
		writeJSON(w, http.StatusOK, response(run, &o), hdr)
		return
	}
	s := newSSE(w, run.id)
	seq := 0
	send := func(typ string, fields map[string]any) bool {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		return s.send(typ, fields)
	}
	// The output items go out as they come: a message item open while text
	// streams, a function_call item for each call.
	created := false
	index := -1     // the output index of the item last opened
	var text []byte // the open message item's text (nil: none open)
	messages, calls := 0, 0
	begin := func() bool {
		if created {
			return true
		}
		created = true
		return send("response.created", map[string]any{"response": response(run, nil)}) &&
			send("response.in_progress", map[string]any{"response": response(run, nil)})
	}
	msgID := func() string { return fmt.Sprintf("msg_%s_%d", run.id, messages) }
	openMessage := func() bool {
		if !begin() {
			return false
		}
		index++
		text = []byte{}
		return send("response.output_item.added", map[string]any{"output_index": index, "item": messageItem(run.id, messages, "", "in_progress")}) &&
			send("response.content_part.added", map[string]any{"item_id": msgID(), "output_index": index, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	}
	closeMessage := func() bool {
		if text == nil {
			return true
		}
		t := string(text)
		part := map[string]any{"type": "output_text", "text": t, "annotations": []any{}}
		ok := send("response.output_text.done", map[string]any{"item_id": msgID(), "output_index": index, "content_index": 0, "text": t, "logprobs": []any{}}) &&
			send("response.content_part.done", map[string]any{"item_id": msgID(), "output_index": index, "content_index": 0, "part": part}) &&
			send("response.output_item.done", map[string]any{"output_index": index, "item": messageItem(run.id, messages, t, "completed")})
		text = nil
		messages++
		return ok
	}
	o := g.follow(r.Context(), run, func(delta string) bool {
		if text == nil && !openMessage() {
			return false
		}
		text = append(text, delta...)
		return send("response.output_text.delta", map[string]any{"item_id": msgID(), "output_index": index, "content_index": 0, "delta": delta, "logprobs": []any{}})
	}, func(c call) bool {
		if !closeMessage() || !begin() {
			return false
		}
		index++
		id := fmt.Sprintf("fc_%s_%d", run.id, calls)
		ok := send("response.output_item.added", map[string]any{"output_index": index, "item": callItem(run.id, calls, c, "in_progress")}) &&
			send("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": index, "delta": c.args}) &&
			send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": index, "name": c.name, "arguments": c.args}) &&
			send("response.output_item.done", map[string]any{"output_index": index, "item": callItem(run.id, calls, c, "completed")})
		calls++
		return ok
	})
	switch {
	case o.err != nil && !s.started:
		writeError(w, o.err)
		return
	case o.err != nil:
		send("response.failed", map[string]any{"response": response(run, &o)})
		return
	}
	if index < 0 && !openMessage() { // an empty reply: one empty message
		return
	}
	if !closeMessage() {
		return
	}
	send("response.completed", map[string]any{"response": response(run, &o)})
}
