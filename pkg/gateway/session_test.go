package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/acp"
	"github.com/agentmesh/agentmesh/pkg/adapter/acp/acpfake"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// startSessions is start with a second profile, "acp-fake": adapter acp
// over this test binary as the fake ACP agent (acpfake), built by the
// catalog from the profile as a deployment's would be. A session ends 2 s
// after its last turn; a permission request waits 20 s for its answer.
func startSessions(t *testing.T) *env {
	t.Helper()
	profiles, err := profile.New(
		profile.Profile{Name: "fixture", Adapter: "fixture", Transport: wire.TransportInProcess, Model: "fixture-1",
			Pricing: map[string]string{"input": "0", "output": "0"}},
		profile.Profile{Name: "acp-fake", Adapter: acp.Name, Transport: wire.TransportSubprocess, Model: "fake",
			Binary: os.Args[0], InstallHint: "the test binary",
			Env:     map[string]string{acpFakeEnv: "1", acpfake.StateEnv: t.TempDir(), "GORACE": "atexit_sleep_ms=0"},
			Policy:  profile.Policy{MaxActive: 4},
			Session: &profile.Session{PermissionTimeout: 20 * time.Second, IdleTimeout: 2 * time.Second},
			Pricing: map[string]string{"input": "1", "output": "2", "cache_read": "0", "cache_write": "0", "reasoning": "2"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return startWith(t, gateway.Config{}, profiles)
}

// startSession submits a session run of prompt as key's tenant (submit).
func (e *env) startSession(t *testing.T, key, prompt string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"profile": "acp-fake", "request": map[string]any{"prompt": prompt}})
	return e.submit(t, key, string(b))
}

// follow reads the run's SSE stream to its end, calling on with each
// chunk as it arrives.
func (e *env) follow(t *testing.T, key, id string, on func(ch *wire.Chunk)) []sseEvent {
	t.Helper()
	resp := e.open(t, key, "GET", "/v1/runs/"+id+"/events", "", nil)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events of %s: %d", id, resp.StatusCode)
	}
	evs := readEvents(t, resp.Body, func(evs []sseEvent) bool {
		ev := evs[len(evs)-1]
		if ev.kind == "chunk" && ev.event.Chunk != nil && on != nil {
			on(ev.event.Chunk)
		}
		return ev.event.Terminal()
	})
	if len(evs) == 0 || !evs[len(evs)-1].event.Terminal() {
		t.Fatalf("events of %s ended before the terminal status (%d events)", id, len(evs))
	}
	return evs
}

// post sends body to path as key's and decodes a 200's JSON into out.
func (e *env) post(t *testing.T, key, path, body string, out any) {
	t.Helper()
	code, got := e.do(t, key, "POST", path, body, nil)
	if code != http.StatusOK {
		t.Fatalf("POST %s %s: %d %s", path, body, code, got)
	}
	if err := json.Unmarshal([]byte(got), out); err != nil {
		t.Fatalf("POST %s: %s: %v", path, got, err)
	}
}

// wantError checks that POST path body answers status with error code.
func (e *env) wantError(t *testing.T, key, path, body string, status int, code string) {
	t.Helper()
	got, resp := e.do(t, key, "POST", path, body, nil)
	if got != status || !strings.Contains(resp, `"code":"`+code+`"`) {
		t.Errorf("POST %s %s: %d %s, want %d %s", path, body, got, resp, status, code)
	}
}

type inputReply struct {
	RunID  string `json:"run_id"`
	Turn   int    `json:"turn"`
	Queued int    `json:"queued"`
}

// TestSessionOverHTTP: a session through the runs API. The first turn
// ends on the SSE stream, another tenant's key finds no such run for
// either endpoint, a follow-up becomes turn 2, an interrupt cancels it
// mid-turn, a third prompt runs, and the session ends idle; every input
// and turn_end on the stream. Then an input or an answer is a 409
// SessionEnded, and bad bodies are 400s naming the field.
func TestSessionOverHTTP(t *testing.T) {
	e := startSessions(t)
	id := e.startSession(t, e.keyA, "first")
	input := "/v1/runs/" + id + "/input"
	dots := 0
	evs := e.follow(t, e.keyA, id, func(ch *wire.Chunk) {
		switch {
		case ch.Type == wire.ChunkTurnEnd && *ch.Metadata.NumTurns == 1:
			// Tenant B's key: A's run does not exist for it.
			e.wantError(t, e.keyB, input, `{"prompt":"as B"}`, http.StatusNotFound, "run_not_found")
			e.wantError(t, e.keyB, "/v1/runs/"+id+"/permissions/perm-1", `{"decision":"allow"}`, http.StatusNotFound, "run_not_found")
			var rep inputReply
			e.post(t, e.keyA, input, `{"prompt":"second [slow]"}`, &rep)
			if rep.RunID != id || rep.Turn != 2 || rep.Queued != 0 {
				t.Errorf("follow-up: %+v, want turn 2 of %s, none queued", rep, id)
			}
		case ch.Type == wire.ChunkText && ch.Content == ".":
			if dots++; dots == 2 {
				var rep inputReply
				e.post(t, e.keyA, input, `{"interrupt":true}`, &rep)
				if rep.RunID != id || rep.Turn != 0 {
					t.Errorf("interrupt: %+v, want turn 0 of %s", rep, id)
				}
			}
		case ch.Type == wire.ChunkTurnEnd && *ch.Metadata.NumTurns == 2:
			var rep inputReply
			e.post(t, e.keyA, input, `{"prompt":"third"}`, &rep)
			if rep.Turn != 3 {
				t.Errorf("third prompt: %+v, want turn 3", rep)
			}
		}
	})
	if st := evs[len(evs)-1].event.Status; st.State != wire.StateSucceeded {
		t.Fatalf("session ended %s: %+v", st.State, st.Error)
	}
	var inputs, ends []string
	var text strings.Builder
	for i, ev := range evs {
		if ev.id != uint64(i+1) {
			t.Fatalf("event %d has id %d (ids %v)", i, ev.id, ids(evs))
		}
		if ev.kind != "chunk" {
			continue
		}
		switch ch := ev.event.Chunk; ch.Type {
		case wire.ChunkInput:
			inputs = append(inputs, fmt.Sprintf("%d:%s", *ch.Metadata.NumTurns, ch.Content))
		case wire.ChunkTurnEnd:
			ends = append(ends, ch.Metadata.StopReason)
		case wire.ChunkText:
			text.WriteString(ch.Content)
		}
	}
	if got := strings.Join(inputs, ","); got != "2:second [slow],3:third" {
		t.Errorf("input chunks %s", got)
	}
	if got := strings.Join(ends, ","); got != "end_turn,cancelled,end_turn" {
		t.Errorf("turn ends %s, want end_turn,cancelled,end_turn", got)
	}
	for _, want := range []string{"echo: first (turn 1)", "echo: third (turn 3)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text %q lacks %q", text.String(), want)
		}
	}

	// The session has ended.
	e.wantError(t, e.keyA, input, `{"prompt":"too late"}`, http.StatusConflict, "session_ended")
	e.wantError(t, e.keyA, input, `{"interrupt":true}`, http.StatusConflict, "session_ended")
	e.wantError(t, e.keyA, "/v1/runs/"+id+"/permissions/perm-1", `{"decision":"deny"}`, http.StatusConflict, "session_ended")
	e.wantError(t, e.keyB, input, `{"prompt":"as B"}`, http.StatusNotFound, "run_not_found")

	// Bad bodies, refused before the mesh is asked.
	for _, tt := range []struct{ body, code, param string }{
		{``, "invalid_json", ""},
		{`{`, "invalid_json", ""},
		{`{}`, "invalid_request", "prompt"},
		{`{"prompt":""}`, "invalid_request", "prompt"},
		{`{"interrupt":false}`, "invalid_request", "interrupt"},
		{`{"prompt":"x","interrupt":true}`, "invalid_request", "interrupt"},
		{`{"prompt":"x","colour":1}`, "unknown_parameter", "colour"},
		{`{"prompt":1}`, "invalid_type", "prompt"},
		{`{"prompt":"x"} {}`, "invalid_json", ""},
	} {
		code, body := e.do(t, e.keyA, "POST", input, tt.body, nil)
		var got struct {
			Error gateway.APIError `json:"error"`
		}
		_ = json.Unmarshal([]byte(body), &got)
		if code != http.StatusBadRequest || got.Error.Code == nil || *got.Error.Code != tt.code || (tt.param != "" && (got.Error.Param == nil || *got.Error.Param != tt.param)) {
			t.Errorf("input %q: %d %s, want 400 %s naming %q", tt.body, code, body, tt.code, tt.param)
		}
	}
	for _, tt := range []struct{ body, code, param string }{
		{`{}`, "invalid_request", "decision"},
		{`{"decision":"maybe"}`, "invalid_request", "decision"},
		{`{"decision":"allow","remember":true}`, "unknown_parameter", "remember"},
		{`{"decision":true}`, "invalid_type", "decision"},
	} {
		code, body := e.do(t, e.keyA, "POST", "/v1/runs/"+id+"/permissions/perm-1", tt.body, nil)
		if code != http.StatusBadRequest || !strings.Contains(body, `"code":"`+tt.code+`"`) || !strings.Contains(body, `"param":"`+tt.param+`"`) {
			t.Errorf("permission %q: %d %s, want 400 %s naming %q", tt.body, code, body, tt.code, tt.param)
		}
	}
	e.wantError(t, e.keyA, "/v1/runs/a.b/input", `{"prompt":"x"}`, http.StatusBadRequest, "invalid_request")
	e.wantError(t, e.keyA, "/v1/runs/no-such-run/input", `{"prompt":"x"}`, http.StatusNotFound, "run_not_found")
}

// TestSessionPermissionsOverHTTP: a [permission] prompt's request arrives
// on the SSE stream and is answered through the endpoint, allow in one
// session and deny in another; the stream has the resolution and the tool
// call's result, an error only when denied. Another tenant's key cannot
// answer, and the request, once answered, is a 400 to answer again.
func TestSessionPermissionsOverHTTP(t *testing.T) {
	e := startSessions(t)
	for _, tt := range []struct {
		decision, option, outcome string
		isError                   bool
	}{
		{"allow", "allow", "allowed", false},
		{"deny", "reject", "denied", true},
	} {
		t.Run(tt.decision, func(t *testing.T) {
			id := e.startSession(t, e.keyA, "go [permission]")
			var requestID string
			evs := e.follow(t, e.keyA, id, func(ch *wire.Chunk) {
				if ch.Type != wire.ChunkPermissionRequested {
					return
				}
				requestID = ch.ToolID
				path := "/v1/runs/" + id + "/permissions/" + requestID
				e.wantError(t, e.keyB, path, `{"decision":"`+tt.decision+`"}`, http.StatusNotFound, "run_not_found")
				var rep struct {
					RunID     string `json:"run_id"`
					RequestID string `json:"request_id"`
					OptionID  string `json:"option_id"`
				}
				e.post(t, e.keyA, path, `{"decision":"`+tt.decision+`"}`, &rep)
				if rep.RunID != id || rep.RequestID != requestID || rep.OptionID != tt.option {
					t.Errorf("answer: %+v, want option %s of request %s of %s", rep, tt.option, requestID, id)
				}
				// Answered: the request is no longer pending.
				e.wantError(t, e.keyA, path, `{"decision":"`+tt.decision+`"}`, http.StatusBadRequest, "invalid_request")
			})
			if st := evs[len(evs)-1].event.Status; st.State != wire.StateSucceeded {
				t.Fatalf("session ended %s: %+v", st.State, st.Error)
			}
			var requested, resolved, result *wire.Chunk
			for _, ev := range evs {
				if ev.kind != "chunk" {
					continue
				}
				switch ch := ev.event.Chunk; ch.Type {
				case wire.ChunkPermissionRequested:
					requested = ch
				case wire.ChunkPermissionResolved:
					resolved = ch
				case wire.ChunkToolResult:
					result = ch
				}
			}
			if requested == nil || requestID == "" || !strings.HasPrefix(requested.ToolName, "Run") {
				t.Fatalf("permission_requested %+v", requested)
			}
			opts, _ := requested.ToolInput["options"].([]any)
			if len(opts) != 2 || requested.ToolInput["kind"] != "execute" || requested.ToolInput["tool_call_id"] == nil {
				t.Errorf("permission_requested tool_input %v, want its kind, tool call and two options", requested.ToolInput)
			}
			if resolved == nil || resolved.ToolID != requestID || resolved.Content != tt.option {
				t.Fatalf("permission_resolved %+v, want %s of %s", resolved, tt.option, requestID)
			}
			if out, _ := resolved.ToolOutput.(map[string]any); out["outcome"] != tt.outcome || out["by"] != "client" {
				t.Errorf("permission_resolved tool_output %v, want %s by client", resolved.ToolOutput, tt.outcome)
			}
			if result == nil || result.IsError != tt.isError {
				t.Errorf("tool_result %+v, want is_error %t", result, tt.isError)
			}
		})
	}
}
