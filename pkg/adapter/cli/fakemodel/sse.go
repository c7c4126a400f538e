package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// sse writes server-sent events and flushes each one. After the client
// goes away, or the server closes, writes become no-ops.
type sse struct {
	w    http.ResponseWriter
	f    http.Flusher
	stop <-chan struct{}
	err  error
}

func newSSE(w http.ResponseWriter, stop <-chan struct{}) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f, stop: stop}
}

// event writes one event; name "" writes a data-only event (Gemini).
func (s *sse) event(name string, data any) {
	select {
	case <-s.stop:
		return
	default:
	}
	if s.err != nil {
		return
	}
	b, err := json.Marshal(data)
	if err != nil {
		s.err = err
		return
	}
	if name != "" {
		_, s.err = fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	} else {
		_, s.err = fmt.Fprintf(s.w, "data: %s\n\n", b)
	}
	if s.err == nil && s.f != nil {
		s.f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// vendorError is one vendor's documented error body for a status.
type vendorError struct {
	anthropicType, openaiType, openaiCode, googleStatus string
	anthropicMsg, openaiMsg, googleMsg                  string
}

var vendorErrors = map[int]vendorError{
	http.StatusBadRequest: {
		anthropicType: "invalid_request_error", anthropicMsg: "invalid request",
		openaiType: "invalid_request_error", openaiCode: "invalid_request", openaiMsg: "Invalid request.",
		googleStatus: "INVALID_ARGUMENT", googleMsg: "Invalid request.",
	},
	http.StatusUnauthorized: {
		anthropicType: "authentication_error", anthropicMsg: "invalid x-api-key",
		openaiType: "invalid_request_error", openaiCode: "invalid_api_key",
		openaiMsg:    "Incorrect API key provided: sk-fake****. You can find your API key at https://platform.openai.com/account/api-keys.",
		googleStatus: "UNAUTHENTICATED", googleMsg: "API key not valid. Please pass a valid API key.",
	},
	http.StatusTooManyRequests: {
		anthropicType: "rate_limit_error", anthropicMsg: "Number of request tokens has exceeded your per-minute rate limit",
		openaiType: "requests", openaiCode: "rate_limit_exceeded",
		openaiMsg:    "Rate limit reached for requests. Please try again in 1s.",
		googleStatus: "RESOURCE_EXHAUSTED", googleMsg: "Resource has been exhausted (e.g. check quota).",
	},
	http.StatusInternalServerError: {
		anthropicType: "api_error", anthropicMsg: "Internal server error",
		openaiType: "server_error", openaiCode: "server_error",
		openaiMsg:    "The server had an error while processing your request. Sorry about that!",
		googleStatus: "INTERNAL", googleMsg: "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
	},
}

// writeScenarioError answers an error scenario: its status, with
// retry-after: 1 on a 429, and the vendor's error body.
func writeScenarioError(w http.ResponseWriter, api API, sc Scenario) {
	code := sc.status()
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, api, code, "")
}

// writeError writes a vendor-shaped error body; msg "" takes the vendor's
// documented message for the status:
//
//	Anthropic  {"type":"error","error":{"type","message"},"request_id"}
//	OpenAI     {"error":{"message","type","param","code"}}
//	Google     {"error":{"code","message","status"}}
func writeError(w http.ResponseWriter, api API, code int, msg string) {
	ve, ok := vendorErrors[code]
	if !ok {
		ve = vendorErrors[http.StatusInternalServerError]
	}
	reqID := newID("req_fake")
	switch api {
	case Anthropic:
		if msg == "" {
			msg = ve.anthropicMsg
		}
		w.Header().Set("Request-Id", reqID)
		writeJSON(w, code, map[string]any{
			"type":       "error",
			"error":      map[string]any{"type": ve.anthropicType, "message": msg},
			"request_id": reqID,
		})
	case Responses:
		if msg == "" {
			msg = ve.openaiMsg
		}
		w.Header().Set("X-Request-Id", reqID)
		writeJSON(w, code, map[string]any{
			"error": map[string]any{"message": msg, "type": ve.openaiType, "param": nil, "code": ve.openaiCode},
		})
	default:
		if msg == "" {
			msg = ve.googleMsg
		}
		writeJSON(w, code, map[string]any{
			"error": map[string]any{"code": code, "message": msg, "status": ve.googleStatus},
		})
	}
}

// writeStall opens a stream the way each API starts one, then waits
// without sending anything until the client goes away or stop closes.
func writeStall(w http.ResponseWriter, r *http.Request, rep reply, stop <-chan struct{}) {
	s := newSSE(w, stop)
	switch api, _, _ := route(r); api {
	case Anthropic:
		s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": newID("msg_fake"), "type": "message", "role": "assistant", "model": rep.model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(rep, 1),
		}})
	case Responses:
		s.event("response.created", map[string]any{"type": "response.created", "sequence_number": 0, "response": map[string]any{
			"id": newID("resp_fake"), "object": "response", "status": "in_progress", "model": rep.model, "output": []any{},
		}})
	default:
		if s.f != nil {
			s.f.Flush()
		}
	}
	select {
	case <-r.Context().Done():
	case <-stop:
	}
}
