package fakemodel

import (
	"net/http"
)

// writeGemini answers a generateContent request. Streamed, each chunk is
// one data-only event holding a GenerateContentResponse: candidates[0]
// with content.parts (a thought text, text pieces, or a functionCall), and
// on the last chunk finishReason STOP and usageMetadata.
func writeGemini(w http.ResponseWriter, r reply, stream bool, stop <-chan struct{}) {
	var chunks [][]map[string]any // parts per chunk
	if r.kind == "thinking" {
		chunks = append(chunks, []map[string]any{{"text": ThinkingText, "thought": true}})
	}
	if r.tool != nil {
		chunks = append(chunks, []map[string]any{{"functionCall": map[string]any{"name": r.tool.name, "args": r.tool.args}}})
	} else {
		for _, piece := range split(r.text) {
			chunks = append(chunks, []map[string]any{{"text": piece}})
		}
	}
	out, thoughts := r.outputTokens(), r.thinkingTokens()
	usage := map[string]any{
		"promptTokenCount": r.inputTokens, "candidatesTokenCount": out,
		"totalTokenCount": r.inputTokens + out + thoughts,
	}
	if thoughts > 0 {
		usage["thoughtsTokenCount"] = thoughts
	}
	id := newID("fake")
	response := func(parts []map[string]any, last bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		m := map[string]any{"candidates": []any{cand}, "modelVersion": r.model, "responseId": id}
		if last {
			cand["finishReason"] = "STOP"
			m["usageMetadata"] = usage
		}
		return m
	}
	if !stream {
		// One response: the text pieces joined back into one part.
		var all []map[string]any
		for _, c := range chunks {
			for _, p := range c {
				if t, ok := p["text"].(string); ok && p["thought"] == nil && len(all) > 0 && all[len(all)-1]["thought"] == nil {
					if prev, ok := all[len(all)-1]["text"].(string); ok {
						all[len(all)-1]["text"] = prev + t
						continue
					}
				}
				all = append(all, p)
			}
		}
		writeJSON(w, http.StatusOK, response(all, true))
		return
	}
	s := newSSE(w, stop)
	for i, parts := range chunks {
		s.event("", response(parts, i == len(chunks)-1))
	}
}
