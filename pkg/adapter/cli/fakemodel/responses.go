package fakemodel

import (
	"net/http"
	"time"
)

// writeResponses answers a Responses request: response.created,
// response.in_progress, per output item response.output_item.added, its
// deltas (response.reasoning_summary_text.delta,
// response.output_text.delta, response.function_call_arguments.delta) and
// response.output_item.done, then response.completed with usage.
func writeResponses(w http.ResponseWriter, r reply, stream bool, stop <-chan struct{}) {
	type item struct {
		done   map[string]any // the complete item
		deltas []map[string]any
	}
	var items []item
	if r.kind == "thinking" {
		id := newID("rs_fake")
		it := item{done: map[string]any{
			"id": id, "type": "reasoning", "encrypted_content": fakeSignature,
			"summary": []any{map[string]any{"type": "summary_text", "text": ThinkingText}},
		}}
		for _, piece := range split(ThinkingText) {
			it.deltas = append(it.deltas, map[string]any{
				"type": "response.reasoning_summary_text.delta", "item_id": id, "summary_index": 0, "delta": piece,
			})
		}
		items = append(items, it)
	}
	if r.tool != nil {
		id := newID("fc_fake")
		args := r.tool.argsJSON()
		it := item{done: map[string]any{
			"id": id, "type": "function_call", "status": "completed",
			"name": r.tool.name, "call_id": newID("call_fake"), "arguments": args,
		}}
		for _, piece := range split(args) {
			it.deltas = append(it.deltas, map[string]any{
				"type": "response.function_call_arguments.delta", "item_id": id, "delta": piece,
			})
		}
		items = append(items, it)
	} else {
		id := newID("msg_fake")
		it := item{done: map[string]any{
			"id": id, "type": "message", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": r.text, "annotations": []any{}}},
		}}
		for _, piece := range split(r.text) {
			it.deltas = append(it.deltas, map[string]any{
				"type": "response.output_text.delta", "item_id": id, "content_index": 0, "delta": piece,
			})
		}
		items = append(items, it)
	}

	output := make([]any, 0, len(items))
	for _, it := range items {
		output = append(output, it.done)
	}
	in, out, reasoning := r.inputTokens, r.outputTokens()+r.thinkingTokens(), r.thinkingTokens()
	resp := map[string]any{
		"id": newID("resp_fake"), "object": "response", "created_at": time.Now().Unix(),
		"status": "completed", "model": r.model, "output": output,
		"usage": map[string]any{
			"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": reasoning},
			"total_tokens": in + out,
		},
	}
	if !stream {
		writeJSON(w, http.StatusOK, resp)
		return
	}

	s := newSSE(w, stop)
	seq := 0
	emit := func(ev map[string]any) {
		ev["sequence_number"] = seq
		seq++
		s.event(ev["type"].(string), ev)
	}
	pending := map[string]any{}
	for k, v := range resp {
		pending[k] = v
	}
	pending["status"], pending["output"] = "in_progress", []any{}
	delete(pending, "usage")
	emit(map[string]any{"type": "response.created", "response": pending})
	emit(map[string]any{"type": "response.in_progress", "response": pending})
	for i, it := range items {
		added := map[string]any{}
		for k, v := range it.done {
			added[k] = v
		}
		switch added["type"] {
		case "message":
			added["status"], added["content"] = "in_progress", []any{}
		case "function_call":
			added["status"], added["arguments"] = "in_progress", ""
		case "reasoning":
			added["summary"] = []any{}
		}
		emit(map[string]any{"type": "response.output_item.added", "output_index": i, "item": added})
		for _, d := range it.deltas {
			d["output_index"] = i
			emit(d)
		}
		emit(map[string]any{"type": "response.output_item.done", "output_index": i, "item": it.done})
	}
	emit(map[string]any{"type": "response.completed", "response": resp})
}
