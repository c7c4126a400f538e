package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// do sends method path body with key and returns the status and body.
func (e *env) do(t *testing.T, key, method, path, body string, hdr map[string]string) (int, string) {
	t.Helper()
	resp := e.open(t, key, method, path, body, hdr)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) open(t *testing.T, key, method, path, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// submit posts body to /v1/runs as key's tenant and waits until the
// gateway finds the run; it returns the run's id.
func (e *env) submit(t *testing.T, key, body string) string {
	t.Helper()
	code, got := e.do(t, key, "POST", "/v1/runs", body, nil)
	if code != http.StatusAccepted {
		t.Fatalf("POST /v1/runs: %d %s", code, got)
	}
	var sub struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(got), &sub); err != nil || sub.RunID == "" {
		t.Fatalf("POST /v1/runs: %s: %v", got, err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if code, got := e.do(t, key, "GET", "/v1/runs/"+sub.RunID, "", nil); code != http.StatusOK {
			return fmt.Errorf("GET /v1/runs/%s: %d %s", sub.RunID, code, got)
		}
		return nil
	})
	return sub.RunID
}

// sseEvent is one server-sent event of the runs API.
type sseEvent struct {
	id    uint64
	kind  string
	event wire.Event
}

// readEvents reads the events of body until it ends or stop says so.
func readEvents(t *testing.T, body io.Reader, stop func([]sseEvent) bool) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			n, err := strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			if err != nil {
				t.Fatalf("id line %q: %v", line, err)
			}
			cur.id = n
		case strings.HasPrefix(line, "event: "):
			cur.kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.event); err != nil {
				t.Fatalf("data line %q: %v", line, err)
			}
		case line == "":
			out = append(out, cur)
			cur = sseEvent{}
			if stop != nil && stop(out) {
				return out
			}
		}
	}
	return out
}

// TestRunsResume: an SSE client that disconnects mid-run and reconnects
// with Last-Event-ID gets every later event exactly once.
func TestRunsResume(t *testing.T) {
	e := start(t, gateway.Config{})
	id := e.submit(t, e.keyA, `{"profile":"fixture","request":{"prompt":"resume me","delay_ms":20},"labels":{"team":"x"}}`)

	resp := e.open(t, e.keyA, "GET", "/v1/runs/"+id+"/events", "", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %v", resp.StatusCode, resp.Header)
	}
	first := readEvents(t, resp.Body, func(evs []sseEvent) bool { return len(evs) == 3 })
	resp.Body.Close() // the client goes away mid-run
	if len(first) != 3 {
		t.Fatalf("first connection: %d events, want 3", len(first))
	}
	last := first[len(first)-1].id
	resp = e.open(t, e.keyA, "GET", "/v1/runs/"+id+"/events", "", map[string]string{"Last-Event-ID": strconv.FormatUint(last, 10)})
	rest := readEvents(t, resp.Body, nil)
	resp.Body.Close()

	all := append(first, rest...)
	for i, ev := range all {
		if ev.id != uint64(i+1) || ev.event.Seq != ev.id {
			t.Fatalf("event %d: id %d seq %d, want %d once each, in order (ids %v)", i, ev.id, ev.event.Seq, i+1, ids(all))
		}
	}
	end := all[len(all)-1]
	if !end.event.Terminal() || end.event.Status.State != wire.StateSucceeded || end.kind != "status" {
		t.Errorf("last event %+v, want the succeeded status", end)
	}
	var text string
	for _, ev := range all {
		if ev.event.Chunk != nil && ev.event.Chunk.Type == wire.ChunkText {
			text += ev.event.Chunk.Content
		}
	}
	if text != fixtureText("resume me") {
		t.Errorf("text over both connections %q, want %q", text, fixtureText("resume me"))
	}

	// Submitting the same run id again is the same run.
	code, body := e.do(t, e.keyA, "POST", "/v1/runs", `{"run_id":"`+id+`","profile":"fixture","request":{"prompt":"resume me","delay_ms":20},"labels":{"team":"x"}}`, nil)
	if code != http.StatusAccepted || !strings.Contains(body, id) {
		t.Errorf("resubmit: %d %s", code, body)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		code, body := e.do(t, e.keyA, "GET", "/v1/runs/"+id, "", nil)
		var rec wire.RunRecord
		if err := json.Unmarshal([]byte(body), &rec); err != nil || code != http.StatusOK || rec.State != wire.StateSucceeded || rec.Principal != "alice" {
			return fmt.Errorf("GET /v1/runs/%s: %d %s", id, code, body)
		}
		return nil
	})
	code, body = e.do(t, e.keyA, "POST", "/v1/runs/"+id+"/cancel", "", nil)
	if code != http.StatusOK || !strings.Contains(body, `"ended":true`) {
		t.Errorf("cancel of an ended run: %d %s, want 200 ended", code, body)
	}
}

func ids(evs []sseEvent) []uint64 {
	out := make([]uint64, len(evs))
	for i, ev := range evs {
		out[i] = ev.id
	}
	return out
}

// TestRunsIsolation: tenant B's key cannot read, follow, cancel or
// submit for tenant A's run.
func TestRunsIsolation(t *testing.T) {
	e := start(t, gateway.Config{})
	id := e.submit(t, e.keyA, `{"profile":"fixture","request":{"prompt":"secret"}}`)
	for _, tt := range []struct{ method, path string }{
		{"GET", "/v1/runs/" + id},
		{"GET", "/v1/runs/" + id + "/events"},
		{"POST", "/v1/runs/" + id + "/cancel"},
	} {
		code, body := e.do(t, e.keyB, tt.method, tt.path, "", nil)
		if code != http.StatusNotFound || !strings.Contains(body, `"code":"run_not_found"`) || strings.Contains(body, "secret") {
			t.Errorf("B: %s %s: %d %s, want 404 run_not_found", tt.method, tt.path, code, body)
		}
	}
	for _, b := range []string{
		`{"tenant":"acme","profile":"fixture","request":{"prompt":"as A"}}`,
		`{"principal":"alice","profile":"fixture","request":{"prompt":"as A"}}`,
	} {
		if code, body := e.do(t, e.keyB, "POST", "/v1/runs", b, nil); code != http.StatusForbidden {
			t.Errorf("B submits %s: %d %s, want 403", b, code, body)
		}
	}
	for _, tt := range []struct{ body, wantCode string }{
		{`{"profile":"fixture","request":{"prompt":"x"},"colour":1}`, "unknown_parameter"},
		{`{"profile":"no-such","request":{"prompt":"x"}}`, "model_not_found"},
		{`{"profile":"fixture","request":[1]}`, "invalid_request"},
		{`{"run_id":"a.b","profile":"fixture","request":{"prompt":"x"}}`, "invalid_request"},
	} {
		if code, body := e.do(t, e.keyA, "POST", "/v1/runs", tt.body, nil); code/100 != 4 || !strings.Contains(body, `"code":"`+tt.wantCode+`"`) {
			t.Errorf("POST /v1/runs %s: %d %s, want a 4xx %s", tt.body, code, body, tt.wantCode)
		}
	}
	if code, body := e.do(t, e.keyA, "GET", "/v1/runs/"+id+"/events", "", map[string]string{"Last-Event-ID": "x"}); code != http.StatusBadRequest {
		t.Errorf("a bad Last-Event-ID: %d %s, want 400", code, body)
	}
}
