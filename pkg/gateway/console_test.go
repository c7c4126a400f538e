package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// consoleEnv is env with a gateway whose console is on, and an operator
// key (tenant ops) beside the two tenants' keys.
type consoleEnv struct {
	*env
	keyOps string
}

func startConsole(t *testing.T) *consoleEnv {
	t.Helper()
	e := start(t, gateway.Config{})
	ctx := context.Background()
	keyOps, rec, err := e.keys.Create(ctx, "ops", "root")
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(e.client, e.keys, e.turns, e.profiles, slog.New(slog.DiscardHandler), gateway.Config{OperatorKeys: []string{rec.ID}})
	if err != nil {
		t.Fatal(err)
	}
	g.SetArtifacts(e.artifacts)
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	if err := g.EnableConsole(cctx, e.nc, e.js, subject.Names{}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	ce := *e
	ce.url = srv.URL
	return &consoleEnv{env: &ce, keyOps: keyOps}
}

// page is a console answer.
type page struct {
	code int
	body string
	hdr  http.Header
}

// get asks for path with key (none when ""), and hdr.
func (e *consoleEnv) req(t *testing.T, key, method, path string, hdr map[string]string, body io.Reader) page {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, body)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := *e.http
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return page{code: resp.StatusCode, body: string(b), hdr: resp.Header}
}

func (e *consoleEnv) get(t *testing.T, key, path string) page {
	t.Helper()
	return e.req(t, key, "GET", path, nil, nil)
}

// record stores rec in the runs bucket, as the router and the runners
// write it.
func (e *consoleEnv) record(t *testing.T, rec wire.RunRecord) {
	t.Helper()
	rec.V = wire.Version
	if rec.Created == 0 {
		rec.Created = time.Now().UnixMilli()
	}
	if rec.Updated == 0 {
		rec.Updated = rec.Created
	}
	b, err := wire.Marshal(&rec)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := e.js.KeyValue(context.Background(), subject.Names{}.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), subject.RunKey(rec.Tenant, rec.RunID), b); err != nil {
		t.Fatal(err)
	}
}

// eventually retries get until has holds of the page.
func (e *consoleEnv) eventually(t *testing.T, key, path string, has func(page) error) page {
	t.Helper()
	var p page
	natstest.Eventually(t, 10*time.Second, func() error {
		p = e.get(t, key, path)
		return has(p)
	})
	return p
}

func contains(subs ...string) func(page) error {
	return func(p page) error {
		if p.code != http.StatusOK {
			return fmt.Errorf("status %d: %.300s", p.code, p.body)
		}
		for _, s := range subs {
			if !strings.Contains(p.body, s) {
				return fmt.Errorf("no %q in the page", s)
			}
		}
		return nil
	}
}

func seedRuns(t *testing.T, e *consoleEnv) {
	t.Helper()
	base := time.Now().Add(-time.Hour).UnixMilli()
	e.record(t, wire.RunRecord{RunID: "acme-ok", Tenant: "acme", Principal: "alice", Profile: "fixture", Adapter: "fixture", State: wire.StateSucceeded, Cost: "0.25", Created: base + 1})
	e.record(t, wire.RunRecord{RunID: "acme-failed", Tenant: "acme", Principal: "carol", Profile: "fixture", Adapter: "fixture", State: wire.StateFailed, Cost: "0.5", Created: base + 2,
		Error: &wire.Error{Class: "ProviderStreamError", Message: "boom"}})
	e.record(t, wire.RunRecord{RunID: "acme-live", Tenant: "acme", Principal: "alice", Profile: "claude-code", Adapter: "claude-code", State: wire.StateRouted, Created: base + 3})
	e.record(t, wire.RunRecord{RunID: "globex-ok", Tenant: "globex", Principal: "bob", Profile: "fixture", Adapter: "fixture", State: wire.StateSucceeded, Cost: "1.5", Created: base + 4})
	e.eventually(t, e.keyOps, "/console/runs", contains("acme-ok", "acme-failed", "acme-live", "globex-ok"))
}

func TestConsoleRefusesWithoutKey(t *testing.T) {
	e := startConsole(t)
	for _, tt := range []struct {
		name string
		key  string
		hdr  map[string]string
		code string
	}{
		{"no key", "", nil, "missing_api_key"},
		{"wrong key", "amk_wrong", nil, "invalid_api_key"},
		{"not bearer", "", map[string]string{"Authorization": "Basic " + e.keyA}, "missing_api_key"},
		{"wrong cookie", "", map[string]string{"Cookie": "agentmesh_console=amk_nope"}, "invalid_api_key"},
	} {
		for _, path := range []string{"/console/runs", "/console/spend", "/console/exports", "/console/runners", "/console/runs/acme/x", "/console/runs/acme/x/events"} {
			p := e.req(t, tt.key, "GET", path, tt.hdr, nil)
			if p.code != http.StatusUnauthorized || p.hdr.Get("X-Agentmesh-Error-Code") != tt.code || !strings.Contains(p.body, `action="/console/login"`) {
				t.Errorf("%s: GET %s: %d %s %.200s, want 401 %s with the login form", tt.name, path, p.code, p.hdr.Get("X-Agentmesh-Error-Code"), p.body, tt.code)
			}
		}
	}
	p := e.req(t, "", "GET", "/console/runs", map[string]string{"Cookie": "agentmesh_console=amk_nope"}, nil)
	if sc := p.hdr.Get("Set-Cookie"); !strings.Contains(sc, "agentmesh_console=;") || !strings.Contains(sc, "Max-Age=0") {
		t.Errorf("a wrong cookie is not cleared: Set-Cookie %q", sc)
	}
	// A cancel without a key reaches no run.
	if p := e.req(t, "", "POST", "/console/runs/acme/x/cancel", nil, nil); p.code != http.StatusUnauthorized {
		t.Errorf("POST cancel without a key: %d, want 401", p.code)
	}
}

func TestConsoleLoginCookie(t *testing.T) {
	e := startConsole(t)
	login := func(key, origin string) page {
		hdr := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
		if origin != "" {
			hdr["Origin"] = origin
		}
		return e.req(t, "", "POST", "/console/login", hdr, strings.NewReader(url.Values{"key": {key}}.Encode()))
	}
	if p := login(e.keyA, "https://evil.example"); p.code != http.StatusForbidden || p.hdr.Get("Set-Cookie") != "" {
		t.Errorf("a cross-origin login: %d, Set-Cookie %q, want 403 and no cookie", p.code, p.hdr.Get("Set-Cookie"))
	}
	if p := login("amk_wrong", e.url); p.code != http.StatusUnauthorized || p.hdr.Get("Set-Cookie") != "" {
		t.Errorf("a wrong key's login: %d, Set-Cookie %q, want 401 and no cookie", p.code, p.hdr.Get("Set-Cookie"))
	}
	p := login(e.keyA, e.url)
	sc := p.hdr.Get("Set-Cookie")
	if p.code != http.StatusSeeOther || p.hdr.Get("Location") != "/console/runs" {
		t.Fatalf("login: %d to %q, want 303 to /console/runs", p.code, p.hdr.Get("Location"))
	}
	for _, want := range []string{"agentmesh_console=" + e.keyA, "HttpOnly", "SameSite=Strict", "Path=/console"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q has no %s", sc, want)
		}
	}
	cookie := map[string]string{"Cookie": "agentmesh_console=" + e.keyA}
	if p := e.req(t, "", "GET", "/console/runs", cookie, nil); p.code != http.StatusOK || !strings.Contains(p.body, "tenant <b>acme</b>") {
		t.Errorf("with the cookie: %d %.300s, want acme's runs", p.code, p.body)
	}
	// Security headers on every answer, the login form's and the static files' too.
	for _, path := range []string{"/console/runs", "/console/login", "/console/static/console.js", "/console/nope"} {
		p := e.req(t, "", "GET", path, cookie, nil)
		if csp := p.hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
		if p.hdr.Get("X-Content-Type-Options") != "nosniff" || p.hdr.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: headers %v", path, p.hdr)
		}
		// no-referrer would have browsers post the console's own forms
		// with "Origin: null", refused below (TestConsole in e2e saw it).
		if rp := p.hdr.Get("Referrer-Policy"); rp != "same-origin" {
			t.Errorf("GET %s: Referrer-Policy %q, want same-origin", path, rp)
		}
		if strings.Contains(p.body, "<script>") {
			t.Errorf("GET %s: an inline script", path)
		}
	}
	if p := e.get(t, "", "/console/static/console.js"); p.code != http.StatusOK || !strings.Contains(p.hdr.Get("Content-Type"), "javascript") {
		t.Errorf("console.js: %d %q", p.code, p.hdr.Get("Content-Type"))
	}
	// A POST by the cookie must come from the console's own origin.
	for _, o := range []map[string]string{{}, {"Origin": "https://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}} {
		hdr := map[string]string{"Cookie": cookie["Cookie"]}
		for k, v := range o {
			hdr[k] = v
		}
		if p := e.req(t, "", "POST", "/console/runs/acme/x/cancel", hdr, nil); p.code != http.StatusForbidden || p.hdr.Get("X-Agentmesh-Error-Code") != "cross_origin" {
			t.Errorf("POST cancel by the cookie with %v: %d %s, want 403 cross_origin", o, p.code, p.hdr.Get("X-Agentmesh-Error-Code"))
		}
	}
	p = e.req(t, "", "POST", "/console/logout", map[string]string{"Cookie": cookie["Cookie"], "Origin": e.url}, nil)
	if sc := p.hdr.Get("Set-Cookie"); p.code != http.StatusSeeOther || !strings.Contains(sc, "Max-Age=0") {
		t.Errorf("logout: %d, Set-Cookie %q", p.code, sc)
	}
}

func TestConsoleTenantSeesOwnTenant(t *testing.T) {
	e := startConsole(t)
	seedRuns(t, e)
	ctx := context.Background()
	if _, err := e.artifacts.Put(ctx, "acme", "acme-ok", "patch", strings.NewReader("acme's patch")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.artifacts.Put(ctx, "globex", "globex-ok", "globex-secret", strings.NewReader("globex's patch")); err != nil {
		t.Fatal(err)
	}

	a := e.get(t, e.keyA, "/console/runs")
	if a.code != http.StatusOK || !strings.Contains(a.body, "acme-ok") || !strings.Contains(a.body, "acme-live") || strings.Contains(a.body, "globex") {
		t.Errorf("acme's runs page: %d, want acme's runs only:\n%s", a.code, a.body)
	}
	b := e.get(t, e.keyB, "/console/runs")
	if !strings.Contains(b.body, "globex-ok") || strings.Contains(b.body, "acme-") {
		t.Errorf("globex's runs page holds another tenant's runs:\n%s", b.body)
	}
	if p := e.get(t, e.keyA, "/console/runs?tenant=globex"); p.code != http.StatusForbidden || p.hdr.Get("X-Agentmesh-Error-Param") != "tenant" {
		t.Errorf("acme asks for globex's runs: %d %q, want 403 naming tenant", p.code, p.hdr.Get("X-Agentmesh-Error-Param"))
	}
	for _, path := range []string{"/console/runs/globex/globex-ok", "/console/runs/globex/globex-ok/events"} {
		if p := e.get(t, e.keyA, path); p.code != http.StatusNotFound || strings.Contains(p.body, "bob") {
			t.Errorf("acme: GET %s: %d, want 404", path, p.code)
		}
	}
	if p := e.get(t, e.keyA, "/console/runners"); p.code != http.StatusForbidden {
		t.Errorf("acme: the runner pools: %d, want 403 (operators only)", p.code)
	}
	ex := e.get(t, e.keyA, "/console/exports")
	if !strings.Contains(ex.body, "acme-ok") || strings.Contains(ex.body, "globex") {
		t.Errorf("acme's artifacts page: %d\n%s", ex.code, ex.body)
	}
	if p := e.get(t, e.keyB, "/console/exports"); !strings.Contains(p.body, "globex-secret") || strings.Contains(p.body, "acme") {
		t.Errorf("globex's artifacts page: %d\n%s", p.code, p.body)
	}

	// The spend, as the ledger's writer folds the records' costs.
	sp := e.eventually(t, e.keyA, "/console/spend", contains(`id="spend-total">0.75<`, "alice", "carol"))
	if strings.Contains(sp.body, "globex") || strings.Contains(sp.body, "bob") || !strings.Contains(sp.body, `<svg id="spend-chart"`) {
		t.Errorf("acme's spend page:\n%s", sp.body)
	}

	// The operator sees every tenant.
	ops := e.get(t, e.keyOps, "/console/runs")
	for _, id := range []string{"acme-ok", "acme-failed", "acme-live", "globex-ok"} {
		if !strings.Contains(ops.body, id) {
			t.Errorf("the operator's runs page has no %s", id)
		}
	}
	if p := e.get(t, e.keyOps, "/console/runs?tenant=globex"); !strings.Contains(p.body, "globex-ok") || strings.Contains(p.body, "acme-ok") {
		t.Errorf("the operator's page of globex:\n%s", p.body)
	}
	if p := e.get(t, e.keyOps, "/console/runs/globex/globex-ok"); p.code != http.StatusOK || !strings.Contains(p.body, "1.5 USD") {
		t.Errorf("the operator's page of a globex run: %d\n%s", p.code, p.body)
	}
	e.eventually(t, e.keyOps, "/console/spend", contains(`id="spend-total">2.25<`, ">acme<", ">globex<"))
	if p := e.get(t, e.keyOps, "/console/exports"); !strings.Contains(p.body, "globex-secret") || !strings.Contains(p.body, "acme-ok") {
		t.Errorf("the operator's artifacts page:\n%s", p.body)
	}
	rp := e.eventually(t, e.keyOps, "/console/runners", contains("<td>fixture</td>"))
	if !strings.Contains(rp.body, `id="runners"`) {
		t.Errorf("the runners page:\n%s", rp.body)
	}
}

func TestConsoleEscapes(t *testing.T) {
	e := startConsole(t)
	const evil = `<script>alert("x")</script>`
	req, err := wire.Marshal(map[string]any{"prompt": evil})
	if err != nil {
		t.Fatal(err)
	}
	e.record(t, wire.RunRecord{RunID: "evil", Tenant: "acme", Principal: "alice", Profile: "fixture", Adapter: "fixture",
		State: wire.StateFailed, Labels: map[string]string{"note": evil, evil: "v"}, Request: req,
		Error: &wire.Error{Class: "ProviderStreamError", Message: evil}})
	list := e.eventually(t, e.keyA, "/console/runs", contains("evil"))
	run := e.get(t, e.keyA, "/console/runs/acme/evil")
	for name, p := range map[string]page{"runs list": list, "run page": run} {
		if strings.Contains(p.body, "<script>") || strings.Contains(p.body, `alert("x")`) {
			t.Errorf("%s: the attacker's markup is in the page:\n%s", name, p.body)
		}
		if !strings.Contains(p.body, "&lt;script&gt;") {
			t.Errorf("%s: the label is not shown as text:\n%s", name, p.body)
		}
	}
	if !strings.Contains(run.body, `id="request"`) {
		t.Errorf("the run page shows no request:\n%s", run.body)
	}
	// The live events are the API's JSON stream: a prompt in them is JSON
	// text, which the page's script writes with textContent only.
	id := e.submit(t, e.keyA, `{"profile":"fixture","request":{"prompt":"<script>alert(1)</script>"}}`)
	p := e.get(t, e.keyA, "/console/runs/acme/"+id+"/events")
	if p.code != http.StatusOK || !strings.Contains(p.hdr.Get("Content-Type"), "text/event-stream") || !strings.Contains(p.body, `\u003cscript\u003e`) {
		t.Errorf("the console's event stream: %d %q\n%s", p.code, p.hdr.Get("Content-Type"), p.body)
	}
}

func TestConsoleCancel(t *testing.T) {
	e := startConsole(t)
	id := e.submit(t, e.keyB, `{"profile":"fixture","request":{"prompt":"hi","script":"long","delay_ms":100}}`)
	path := "/console/runs/globex/" + id + "/cancel"
	// acme, by its header and by its cookie, cannot cancel globex's run.
	if p := e.req(t, e.keyA, "POST", path, nil, nil); p.code != http.StatusNotFound {
		t.Errorf("acme cancels globex's run: %d %s, want 404", p.code, p.body)
	}
	if p := e.req(t, "", "POST", path, map[string]string{"Cookie": "agentmesh_console=" + e.keyA, "Origin": e.url}, nil); p.code != http.StatusNotFound {
		t.Errorf("acme's cookie cancels globex's run: %d %s, want 404", p.code, p.body)
	}
	// Nor can it by naming its own tenant in the URL.
	if p := e.req(t, e.keyA, "POST", "/console/runs/acme/"+id+"/cancel", nil, nil); p.code != http.StatusNotFound {
		t.Errorf("acme cancels globex's run under acme: %d %s, want 404", p.code, p.body)
	}
	if rec, err := e.client.Status(context.Background(), "globex", id); err != nil || rec.State.Terminal() {
		t.Fatalf("globex's run after acme's cancels: %+v %v, want it going", rec, err)
	}
	run := e.get(t, e.keyB, "/console/runs/globex/"+id)
	if run.code != http.StatusOK || !strings.Contains(run.body, `data-url="/console/runs/globex/`+id+`/cancel"`) {
		t.Fatalf("globex's run page: %d\n%s", run.code, run.body)
	}
	// globex cancels it from the page: the cookie, from the console's origin.
	p := e.req(t, "", "POST", path, map[string]string{"Cookie": "agentmesh_console=" + e.keyB, "Origin": e.url, "Accept": "application/json"}, nil)
	if p.code != http.StatusOK || !strings.Contains(p.body, `"cancelled":true`) {
		t.Fatalf("globex cancels: %d %s", p.code, p.body)
	}
	ev := e.get(t, e.keyB, "/console/runs/globex/"+id+"/events")
	if !strings.Contains(ev.body, `"state":"cancelled"`) {
		t.Errorf("the run's events end with no cancelled status:\n%.2000s", ev.body)
	}
	e.eventually(t, e.keyB, "/console/runs/globex/"+id, contains(`class="state cancelled"`))
}

func TestConsoleFilters(t *testing.T) {
	e := startConsole(t)
	seedRuns(t, e)
	for _, tt := range []struct {
		query     string
		want, not []string
	}{
		{"state=failed", []string{"acme-failed"}, []string{"acme-ok", "acme-live", "globex-ok"}},
		{"state=live", []string{"acme-live"}, []string{"acme-ok", "acme-failed", "globex-ok"}},
		{"state=succeeded", []string{"acme-ok", "globex-ok"}, []string{"acme-failed", "acme-live"}},
		{"profile=claude-code", []string{"acme-live"}, []string{"acme-ok", "globex-ok"}},
		{"adapter=fixture&tenant=globex", []string{"globex-ok"}, []string{"acme-"}},
		{"adapter=fixture&state=succeeded&tenant=acme", []string{"acme-ok"}, []string{"acme-failed", "acme-live", "globex-ok"}},
	} {
		p := e.get(t, e.keyOps, "/console/runs?"+tt.query)
		if p.code != http.StatusOK {
			t.Errorf("?%s: %d %s", tt.query, p.code, p.body)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(p.body, ">"+w+"<") {
				t.Errorf("?%s: no %s", tt.query, w)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(p.body, ">"+n) {
				t.Errorf("?%s: %s is listed", tt.query, n)
			}
		}
	}
	// Pages of one run each, newest first, go through every run once.
	var seen []string
	path := "/console/runs?limit=1"
	for range 10 {
		p := e.get(t, e.keyOps, path)
		for _, id := range []string{"globex-ok", "acme-live", "acme-failed", "acme-ok"} {
			if strings.Contains(p.body, ">"+id+"<") {
				seen = append(seen, id)
			}
		}
		_, rest, ok := strings.Cut(p.body, `id="next" href="`)
		if !ok {
			break
		}
		next, _, _ := strings.Cut(rest, `"`)
		path = strings.ReplaceAll(next, "&amp;", "&")
	}
	if got := strings.Join(seen, ","); !strings.HasPrefix(got, "globex-ok,acme-live,acme-failed,acme-ok") || strings.Count(got, ",") < 3 {
		t.Errorf("paged through %s, want globex-ok,acme-live,acme-failed,acme-ok then the rest", got)
	}
	// The index follows the bucket: a record deleted leaves the list.
	kv, err := e.js.KeyValue(context.Background(), subject.Names{}.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(context.Background(), subject.RunKey("acme", "acme-failed")); err != nil {
		t.Fatal(err)
	}
	e.eventually(t, e.keyOps, "/console/runs", func(p page) error {
		if strings.Contains(p.body, ">acme-failed<") {
			return fmt.Errorf("the deleted record is still listed")
		}
		return contains("acme-ok")(p)
	})
}

func TestConsoleBadParams(t *testing.T) {
	e := startConsole(t)
	for _, tt := range []struct{ path, param string }{
		{"/console/runs?limit=0", "limit"},
		{"/console/runs?limit=201", "limit"},
		{"/console/runs?limit=ten", "limit"},
		{"/console/runs?state=done", "state"},
		{"/console/runs?cursor=abc", "cursor"},
		{"/console/runs?cursor=1.a.b.c", "cursor"},
		{"/console/runs?cursor=-5.acme.x", "cursor"},
		{"/console/runs?tenant=a.b", "tenant"},
		{"/console/runs?tenant=%3Cscript%3E", "tenant"},
		{"/console/runs?profile=" + strings.Repeat("p", 200), "profile"},
		{"/console/runs?adapter=a%20b", "adapter"},
		{"/console/runs?colour=red", "colour"},
		{"/console/runs?state=failed&state=live", "state"},
		{"/console/spend?days=0", "days"},
		{"/console/spend?days=1000", "days"},
		{"/console/exports?limit=-1", "limit"},
		{"/console/runs/acme/a.b", "run_id"},
	} {
		p := e.get(t, e.keyOps, tt.path)
		if p.code != http.StatusBadRequest || p.hdr.Get("X-Agentmesh-Error-Param") != tt.param || !strings.Contains(p.body, `id="error-param">`+tt.param+`<`) {
			t.Errorf("GET %.80s: %d param %q, want 400 naming %s\n%.400s", tt.path, p.code, p.hdr.Get("X-Agentmesh-Error-Param"), tt.param, p.body)
		}
		if strings.Contains(p.body, "<script>") {
			t.Errorf("GET %.80s: the error page holds a script", tt.path)
		}
	}
}

func TestConsoleOperatorKeysConfig(t *testing.T) {
	if got := gateway.ParseKeyIDs(" 0123456789ab, ,ba9876543210,"); strings.Join(got, " ") != "0123456789ab ba9876543210" {
		t.Errorf("ParseKeyIDs: %q", got)
	}
	if err := (gateway.Config{OperatorKeys: []string{"0123456789ab"}}).Validate(); err != nil {
		t.Errorf("a key id: %v", err)
	}
	for _, bad := range []string{"0123456789", "0123456789AB", "amk_0123456789ab", "0123456789abc"} {
		err := (gateway.Config{OperatorKeys: []string{bad}}).Validate()
		if err == nil || !strings.Contains(err.Error(), "OperatorKeys") {
			t.Errorf("operator key %q: %v, want an error naming OperatorKeys", bad, err)
		}
	}
}

// TestConsoleListsRunsAsTheyAreNow: a run's record says routed until the
// run ends, while its events say a runner holds it. The runs list shows
// such a run running, as the run's page and the runs API do, and the
// state filter finds it by that state: running, not routed.
func TestConsoleListsRunsAsTheyAreNow(t *testing.T) {
	e := startConsole(t)
	seedRuns(t, e)
	e.running(t, "acme", "acme-running", wire.RunRecord{Principal: "alice", Profile: "fixture", Adapter: "fixture"})
	e.eventually(t, e.keyOps, "/console/runs", contains("acme-running"))
	for _, tt := range []struct {
		query     string
		want, not []string
	}{
		{"", []string{`data-state="running"`, `data-state="routed"`}, nil},
		{"state=running", []string{">acme-running<"}, []string{">acme-live<", ">acme-ok<"}},
		{"state=routed", []string{">acme-live<"}, []string{">acme-running<"}},
		{"state=live", []string{">acme-live<", ">acme-running<"}, []string{">acme-ok<"}},
	} {
		p := e.get(t, e.keyOps, "/console/runs?"+tt.query)
		if p.code != http.StatusOK {
			t.Fatalf("?%s: %d %s", tt.query, p.code, p.body)
		}
		for _, s := range tt.want {
			if !strings.Contains(p.body, s) {
				t.Errorf("?%s: no %s", tt.query, s)
			}
		}
		for _, s := range tt.not {
			if strings.Contains(p.body, s) {
				t.Errorf("?%s: %s is listed", tt.query, s)
			}
		}
	}
}
