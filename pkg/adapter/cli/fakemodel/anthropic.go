package fakemodel

import (
	"net/http"
)

// anthropicBlocks are the content blocks of a reply, complete, as the
// non-streaming API returns them and as the stream builds them.
func anthropicBlocks(r reply) []map[string]any {
	var blocks []map[string]any
	if r.kind == "thinking" {
		blocks = append(blocks, map[string]any{"type": "thinking", "thinking": ThinkingText, "signature": fakeSignature})
	}
	if r.tool != nil {
		return append(blocks,
			map[string]any{"type": "text", "text": PreambleText},
			map[string]any{"type": "tool_use", "id": newID("toolu_fake"), "name": r.tool.name, "input": r.tool.args})
	}
	return append(blocks, map[string]any{"type": "text", "text": r.text})
}

// fakeSignature stands in for a thinking block's signature.
const fakeSignature = "ZmFrZW1vZGVsLXNpZ25hdHVyZQ=="

func anthropicStop(r reply) string {
	if r.tool != nil {
		return "tool_use"
	}
	return "end_turn"
}

func anthropicUsage(r reply, output int) map[string]any {
	return map[string]any{
		"input_tokens": r.inputTokens, "output_tokens": output,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
	}
}

// writeAnthropic answers a Messages request: message_start, per block
// content_block_start / content_block_delta… / content_block_stop,
// message_delta (stop_reason, usage), message_stop.
func writeAnthropic(w http.ResponseWriter, r reply, stream bool, stop <-chan struct{}) {
	id := newID("msg_fake")
	blocks := anthropicBlocks(r)
	output := r.outputTokens() + r.thinkingTokens()
	if !stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": r.model, "content": blocks,
			"stop_reason": anthropicStop(r), "stop_sequence": nil, "usage": anthropicUsage(r, output),
		})
		return
	}
	s := newSSE(w, stop)
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": r.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(r, 1),
	}})
	s.event("ping", map[string]any{"type": "ping"})
	for i, b := range blocks {
		start := map[string]any{}
		for k, v := range b {
			start[k] = v
		}
		var deltas []map[string]any
		switch b["type"] {
		case "thinking":
			start["thinking"], start["signature"] = "", ""
			for _, piece := range split(ThinkingText) {
				deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": piece})
			}
			deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": fakeSignature})
		case "text":
			start["text"] = ""
			for _, piece := range split(b["text"].(string)) {
				deltas = append(deltas, map[string]any{"type": "text_delta", "text": piece})
			}
		case "tool_use":
			start["input"] = map[string]any{}
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": ""})
			for _, piece := range split(r.tool.argsJSON()) {
				deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": piece})
			}
		}
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		for _, d := range deltas {
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	s.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": anthropicStop(r), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": output},
	})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}
