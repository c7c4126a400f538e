package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// running records a run of tenant routed, and has a runner take it: its
// events say running while its record says routed. It returns the
// runner's writer of the run's events.
func (e *consoleEnv) running(t *testing.T, tenant, id string, rec wire.RunRecord) *events.Writer {
	t.Helper()
	ctx := context.Background()
	store, err := runs.Open(ctx, service.Deps{NC: e.nc, JS: e.js, Log: slog.New(slog.DiscardHandler),
		Metrics: service.NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		t.Fatal(err)
	}
	rec.RunID, rec.Tenant, rec.State = id, tenant, wire.StateRouted
	e.record(t, rec)
	w := store.Events().New(tenant, id)
	if err := w.StatusesFenced(ctx, wire.Status{State: wire.StateAccepted}, wire.Status{State: wire.StateRouted}); err != nil {
		t.Fatal(err)
	}
	lease, err := store.HoldRunner(ctx, "runner-x")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lease.Stop)
	if w, err = store.Events().Open(ctx, tenant, id); err != nil {
		t.Fatal(err)
	}
	w.Author("runner-x", lease.Epoch(), 1)
	if err := w.StatusFenced(ctx, wire.Status{State: wire.StateRunning, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	return w
}

// A run's page lists its artifacts with links that download them through
// the console's own auth, the cookie's or the header's; another tenant's
// key finds neither the links nor the bytes.
func TestConsoleRunArtifacts(t *testing.T) {
	e := startConsole(t)
	seedRuns(t, e)
	ctx := context.Background()
	const patch, archive = "diff --git a/x b/x\n+acme\n", "acme's archive bytes"
	pref, err := e.artifacts.Put(ctx, "acme", "acme-failed", "patch", strings.NewReader(patch))
	if err != nil {
		t.Fatal(err)
	}
	aref, err := e.artifacts.Put(ctx, "acme", "acme-failed", "archive", strings.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := e.artifacts.List(ctx, "acme", "acme-failed")
	if err != nil || len(recs) != 2 {
		t.Fatalf("the store lists %v, %v", recs, err)
	}
	cookieA := map[string]string{"Cookie": "agentmesh_console=" + e.keyA}
	p := e.req(t, "", "GET", "/console/runs/acme/acme-failed", cookieA, nil)
	if p.code != http.StatusOK {
		t.Fatalf("the run page: %d %s", p.code, p.body)
	}
	for _, rec := range recs {
		for _, want := range []string{
			`<a href="/console/runs/acme/acme-failed/artifacts/` + rec.Name + `" download="acme-failed-` + rec.Name + `">` + rec.Name + `</a>`,
			fmt.Sprintf("<td>%d</td>", rec.Size), "<code>" + rec.SHA256 + "</code>",
			time.UnixMilli(rec.Expires).UTC().Format("2006-01-02 15:04:05Z"),
		} {
			if !strings.Contains(p.body, want) {
				t.Errorf("the run page has no %s", want)
			}
		}
	}
	for _, tt := range []struct {
		name, body, sha string
	}{{"patch", patch, pref.SHA256}, {"archive", archive, aref.SHA256}} {
		path := "/console/runs/acme/acme-failed/artifacts/" + tt.name
		for _, auth := range []struct {
			key string
			hdr map[string]string
		}{{"", cookieA}, {e.keyA, nil}, {e.keyOps, nil}} {
			d := e.req(t, auth.key, "GET", path, auth.hdr, nil)
			if d.code != http.StatusOK || d.body != tt.body || d.hdr.Get("X-Artifact-SHA256") != tt.sha || d.hdr.Get("Content-Security-Policy") == "" {
				t.Errorf("GET %s (%v): %d %q %v, want the %s", path, auth, d.code, d.body, d.hdr, tt.name)
			}
		}
	}
	if p := e.get(t, e.keyA, "/console/runs/acme/acme-ok"); !strings.Contains(p.body, `id="no-artifacts"`) || strings.Contains(p.body, "/artifacts/") {
		t.Errorf("a run without artifacts: %.400s", p.body)
	}

	// Globex, by its header or its cookie, reaches none of acme's.
	cookieB := map[string]string{"Cookie": "agentmesh_console=" + e.keyB}
	for _, path := range []string{
		"/console/runs/acme/acme-failed",
		"/console/runs/acme/acme-failed/artifacts/patch",
		"/console/runs/globex/acme-failed/artifacts/patch", // its own tenant in the URL: not its run's
	} {
		for _, d := range []page{e.get(t, e.keyB, path), e.req(t, "", "GET", path, cookieB, nil)} {
			if d.code != http.StatusNotFound || strings.Contains(d.body, patch) || strings.Contains(d.body, pref.SHA256) {
				t.Errorf("globex: GET %s: %d %.200s, want 404 without acme's bytes", path, d.code, d.body)
			}
		}
	}
	if p := e.get(t, e.keyA, "/console/runs/acme/acme-failed/artifacts/..x"); p.code != http.StatusBadRequest {
		t.Errorf("a bad artifact name: %d, want 400", p.code)
	}
}

// consoleEvent is one server-sent event.
type consoleEvent struct{ name, data string }

// stream opens a console event stream and returns its events as they come.
func (e *consoleEnv) stream(t *testing.T, key, path string) <-chan consoleEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := e.http.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	out := make(chan consoleEvent, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var ev consoleEvent
		for sc.Scan() {
			l := sc.Text()
			switch {
			case strings.HasPrefix(l, "event: "):
				ev.name = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "data: "):
				ev.data = strings.TrimPrefix(l, "data: ")
			case l == "" && ev.name != "":
				out <- ev
				ev = consoleEvent{}
			}
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return out
}

// liveRow is a run event's data.
type liveRow struct {
	Key     string `json:"key"`
	RunID   string `json:"run_id"`
	Tenant  string `json:"tenant"`
	State   string `json:"state"`
	Created string `json:"created"`
	Match   bool   `json:"match"`
}

// next waits for the stream's next run event of a run that ok keeps.
func next(t *testing.T, ch <-chan consoleEvent, what string, ok func(liveRow) bool) liveRow {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, open := <-ch:
			if !open {
				t.Fatalf("%s: the stream ended", what)
			}
			var r liveRow
			if ev.name != "run" || json.Unmarshal([]byte(ev.data), &r) != nil {
				t.Fatalf("%s: event %s %s", what, ev.name, ev.data)
			}
			if ok(r) {
				return r
			}
		case <-timeout:
			t.Fatalf("%s: no such run event within 10s", what)
		}
	}
}

// The runs list's live stream: a run recorded after it opened arrives,
// then its state as it changes (running, from its events; its end, from
// its record), within the list's filters and its key's tenant.
func TestConsoleRunsLive(t *testing.T) {
	e := startConsole(t)
	seedRuns(t, e)
	acme := e.stream(t, e.keyA, "/console/runs/live")
	failed := e.stream(t, e.keyA, "/console/runs/live?state=failed")
	ops := e.stream(t, e.keyOps, "/console/runs/live?tenant=globex")

	e.record(t, wire.RunRecord{RunID: "globex-new", Tenant: "globex", Principal: "bob", Profile: "fixture", Adapter: "fixture", State: wire.StateAccepted})
	w := e.running(t, "acme", "acme-new", wire.RunRecord{Principal: "alice", Profile: "fixture", Adapter: "fixture", Created: time.Now().UnixMilli()})
	r := next(t, acme, "acme's new run", func(r liveRow) bool { return r.RunID == "acme-new" })
	if r.Key != "acme/acme-new" || r.Tenant != "acme" || !r.Match || r.Created == "" {
		t.Errorf("acme's new run: %+v", r)
	}
	next(t, acme, "acme's new run running", func(r liveRow) bool { return r.RunID == "acme-new" && r.State == "running" && r.Match })
	if r := next(t, ops, "globex's new run, to the operator", func(r liveRow) bool { return r.Tenant == "globex" }); r.RunID != "globex-new" || !r.Match {
		t.Errorf("the operator's globex stream: %+v", r)
	}
	// The run fails: its record says so.
	if err := w.Terminal(context.Background(), wire.Status{State: wire.StateFailed, Attempt: 1, Error: &wire.Error{Class: "ProviderStreamError", Message: "boom"}}); err != nil {
		t.Fatal(err)
	}
	e.record(t, wire.RunRecord{RunID: "acme-new", Tenant: "acme", Principal: "alice", Profile: "fixture", Adapter: "fixture", State: wire.StateFailed,
		Created: r2ms(t, e, "acme-new"), Error: &wire.Error{Class: "ProviderStreamError", Message: "boom"}})
	next(t, acme, "acme's run failed", func(r liveRow) bool { return r.RunID == "acme-new" && r.State == "failed" && r.Match })
	// The failed list saw it before only as not matching, now matching.
	if r := next(t, failed, "the failed list", func(r liveRow) bool { return r.RunID == "acme-new" && r.Match }); r.State != "failed" {
		t.Errorf("the failed list: %+v", r)
	}
	// Nothing of globex reached acme's streams, nor acme's the operator's globex stream.
	e.record(t, wire.RunRecord{RunID: "acme-last", Tenant: "acme", Principal: "alice", Profile: "fixture", Adapter: "fixture", State: wire.StateSucceeded})
	e.record(t, wire.RunRecord{RunID: "globex-last", Tenant: "globex", Principal: "bob", Profile: "fixture", Adapter: "fixture", State: wire.StateSucceeded})
	next(t, acme, "acme's last run", func(r liveRow) bool {
		if r.Tenant != "acme" {
			t.Errorf("acme's stream has %+v", r)
		}
		return r.RunID == "acme-last"
	})
	next(t, ops, "globex's last run", func(r liveRow) bool {
		if r.Tenant != "globex" {
			t.Errorf("the operator's globex stream has %+v", r)
		}
		return r.RunID == "globex-last"
	})

	// acme cannot follow globex's list; bad filters are refused.
	for path, want := range map[string]int{
		"/console/runs/live?tenant=globex": http.StatusForbidden,
		"/console/runs/live?state=nope":    http.StatusBadRequest,
		"/console/runs/live?cursor=x":      http.StatusBadRequest,
	} {
		if p := e.get(t, e.keyA, path); p.code != want {
			t.Errorf("GET %s: %d, want %d", path, p.code, want)
		}
	}
	// The list's page points at the stream with its filters.
	if p := e.get(t, e.keyA, "/console/runs?state=failed"); !strings.Contains(p.body, `data-url="/console/runs/live?state=failed"`) || !strings.Contains(p.body, `data-first="true"`) {
		t.Errorf("the runs page's live stream: %.2000s", p.body)
	}
}

// r2ms is the creation time of acme's run id in its record.
func r2ms(t *testing.T, e *consoleEnv, id string) int64 {
	t.Helper()
	code, body := e.do(t, e.keyA, "GET", "/v1/runs/"+id, "", nil)
	var rec wire.RunRecord
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rec) != nil {
		t.Fatalf("GET /v1/runs/%s: %d %s", id, code, body)
	}
	return rec.Created
}

// A session run's page: its turns' section, with the run's prompt as turn
// 1's, which the page's script fills from the run's events: an input
// chunk opens each later turn with its prompt, a turn_end ends one.
func TestConsoleSessionTurns(t *testing.T) {
	e := startConsole(t)
	req, err := wire.Marshal(map[string]any{"prompt": "first <b>prompt</b>"})
	if err != nil {
		t.Fatal(err)
	}
	w := e.running(t, "acme", "acme-session", wire.RunRecord{Principal: "alice", Profile: "fixture", Adapter: "fixture", Consent: true, Request: req})
	ctx := context.Background()
	turn := func(n int) *int { return &n }
	for _, c := range []wire.Chunk{
		{Type: wire.ChunkText, Content: "answer one"},
		{Type: wire.ChunkTurnEnd, Metadata: wire.Metadata{NumTurns: turn(1), StopReason: "end_turn"}},
		{Type: wire.ChunkInput, Content: "second prompt", Metadata: wire.Metadata{NumTurns: turn(2)}},
		{Type: wire.ChunkText, Content: "answer two"},
		{Type: wire.ChunkTurnEnd, Metadata: wire.Metadata{NumTurns: turn(2), StopReason: "end_turn"}},
	} {
		if err := w.ChunkFenced(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	p := e.get(t, e.keyA, "/console/runs/acme/acme-session")
	for _, want := range []string{`<div id="session" hidden>`, `<div id="turns" data-prompt="first &lt;b&gt;prompt&lt;/b&gt;">`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the session's page has no %s: %.3000s", want, p.body)
		}
	}
	// The page's stream gives the script the turns' chunks in order.
	ch := e.stream(t, e.keyA, "/console/runs/acme/acme-session/events")
	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < 5 {
		select {
		case ev := <-ch:
			if ev.name != "chunk" {
				continue
			}
			var v struct{ Chunk wire.Chunk }
			if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
				t.Fatal(err)
			}
			s := string(v.Chunk.Type) + ":" + v.Chunk.Content
			if v.Chunk.Metadata.NumTurns != nil {
				s += fmt.Sprintf("#%d", *v.Chunk.Metadata.NumTurns)
			}
			got = append(got, s)
		case <-timeout:
			t.Fatalf("the session's stream: %q within 10s", got)
		}
	}
	want := []string{"text:answer one", "turn_end:#1", "input:second prompt#2", "text:answer two", "turn_end:#2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the session's chunks: %q, want %q", got, want)
	}
	// Another tenant's key finds no such page.
	if p := e.get(t, e.keyB, "/console/runs/acme/acme-session"); p.code != http.StatusNotFound || strings.Contains(p.body, "first") {
		t.Errorf("globex: %d", p.code)
	}
}

// A run of a conversation links, on its page, to the conversation's
// history (the runs API's), which the console serves by its own auth to
// the keys that see the tenant only.
func TestConsoleConversationHistory(t *testing.T) {
	e := startConsole(t)
	id := e.submit(t, e.keyA, `{"profile":"fixture","conversation":"conv-c","request":{"prompt":"acme's secret prompt"}}`)
	e.ended(t, e.keyA, id)
	const link = "/console/conversations/acme/conv-c/history"
	p := e.get(t, e.keyA, "/console/runs/acme/"+id)
	if want := `<a id="history" href="` + link + `">`; !strings.Contains(p.body, want) {
		t.Errorf("the run page has no %s: %.3000s", want, p.body)
	}
	for _, d := range []page{e.req(t, "", "GET", link, map[string]string{"Cookie": "agentmesh_console=" + e.keyA}, nil), e.get(t, e.keyOps, link)} {
		var h client.History
		if err := json.Unmarshal([]byte(d.body), &h); d.code != http.StatusOK || err != nil || h.Conversation != "conv-c" || len(h.Runs) != 1 || h.Runs[0].RunID != id {
			t.Errorf("GET %s: %d %.300s (%v), want the conversation's one run", link, d.code, d.body, err)
		}
	}
	for _, path := range []string{link, "/console/conversations/globex/conv-c/history"} {
		for _, d := range []page{e.get(t, e.keyB, path), e.req(t, "", "GET", path, map[string]string{"Cookie": "agentmesh_console=" + e.keyB}, nil)} {
			if d.code != http.StatusNotFound || !strings.Contains(d.body, `"code":"conversation_not_found"`) || strings.Contains(d.body, "secret") {
				t.Errorf("globex: GET %s: %d %.200s, want 404 conversation_not_found", path, d.code, d.body)
			}
		}
	}
}

// ended waits until key's run id has ended.
func (e *env) ended(t *testing.T, key, id string) {
	t.Helper()
	natstest.Eventually(t, 20*time.Second, func() error {
		_, body := e.do(t, key, "GET", "/v1/runs/"+id, "", nil)
		var rec wire.RunRecord
		if err := json.Unmarshal([]byte(body), &rec); err != nil || !rec.State.Terminal() {
			return fmt.Errorf("run %s: %s %v", id, body, err)
		}
		return nil
	})
}
