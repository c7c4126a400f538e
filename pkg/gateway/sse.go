package gateway

import (
	"encoding/json"
	"net/http"
)

// sse writes one server-sent event stream. Its headers go out with the
// first event, so a run refused before any output is still answered with
// a plain HTTP error.
type sse struct {
	w       http.ResponseWriter
	flusher http.Flusher
	started bool
	failed  bool // a write failed: the caller went away
}

// newSSE is the stream of w; a stream of one run names it in the header
// x-agentmesh-run-id (runID "" for a stream of no one run).
func newSSE(w http.ResponseWriter, runID string) *sse {
	f, _ := w.(http.Flusher)
	if runID != "" {
		w.Header().Set("x-agentmesh-run-id", runID)
	}
	return &sse{w: w, flusher: f}
}

// open sends the stream's headers now, if they have not gone out yet.
func (s *sse) open() {
	if s.started {
		return
	}
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	if s.flusher != nil {
		s.flusher.Flush()
	}
	s.started = true
}

// comment writes a comment line (": text"), which a client ignores: a
// keep-alive through proxies that close a quiet connection. It reports
// whether the write went through.
func (s *sse) comment(text string) bool {
	return s.write([]byte(": " + text + "\n\n"))
}

// send writes one event: "event: <name>" when name is set, then "data:"
// with v as JSON (or v itself when it is a string, as "[DONE]" is). It
// reports whether the write went through.
func (s *sse) send(name string, v any) bool { return s.sendID("", name, v) }

// sendID is send with "id: <id>" first when id is set.
func (s *sse) sendID(id, name string, v any) bool {
	if s.failed {
		return false
	}
	var data []byte
	if str, ok := v.(string); ok {
		data = []byte(str)
	} else {
		var err error
		if data, err = json.Marshal(v); err != nil {
			data = errorBody(apiErr(http.StatusInternalServerError, typeServer, "encode", "", "encode an event: %v", err))
		}
	}
	buf := make([]byte, 0, len(data)+len(name)+len(id)+24)
	if id != "" {
		buf = append(append(append(buf, "id: "...), id...), '\n')
	}
	if name != "" {
		buf = append(append(append(buf, "event: "...), name...), '\n')
	}
	buf = append(append(append(buf, "data: "...), data...), "\n\n"...)
	return s.write(buf)
}

// write writes b and flushes it, the stream's headers first.
func (s *sse) write(b []byte) bool {
	if s.failed {
		return false
	}
	s.open()
	if _, err := s.w.Write(b); err != nil {
		s.failed = true
		return false
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return true
}
