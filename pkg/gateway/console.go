package gateway

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/ledger"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The console: server-rendered pages under /console on the API's own
// listener, authenticated with the API's keys.
//
//	GET  /console/runs                        live and recent runs (filters, cursor)
//	GET  /console/runs/live                   the runs list's changes, server-sent events (consoleRunsLive)
//	GET  /console/runs/{tenant}/{id}          a run: record, pin, cost, live events, cancel
//	GET  /console/runs/{tenant}/{id}/events   its events, the runs API's SSE stream (runEvents)
//	POST /console/runs/{tenant}/{id}/cancel   cancel it, the runs API's cancel (cancelRun)
//	GET  /console/runs/{tenant}/{id}/artifacts/{name}  an artifact's bytes, the runs API's (getArtifact)
//	GET  /console/conversations/{tenant}/{id}/history  a conversation's history, the runs API's (conversationHistory)
//	GET  /console/spend                       spend per day by principal, or by tenant
//	GET  /console/runners                     runner pools, from micro and the work consumers
//	GET  /console/exports                     exports and artifacts with their expiry
//	GET  /console/login, POST /console/login, POST /console/logout
//
// A request authenticates with "Authorization: Bearer <key>", as the API,
// or with the cookie the login form sets from a key: agentmesh_console,
// HttpOnly, SameSite=Strict, Path=/console, Secure over TLS, holding the
// key itself (the gateway keeps no sessions). A key sees its own tenant
// only; a key whose id is in Config.OperatorKeys sees every tenant. A
// POST authenticated by the cookie must come from a page of the console:
// its Origin (or, without one, Sec-Fetch-Site: same-origin) must be the
// request's own host, on top of the cookie's SameSite=Strict. Every page
// is an html/template (every value escaped in its context), served with a
// Content-Security-Policy that allows only the console's own script and
// stylesheet (no inline script), nosniff and no framing.

//go:embed console
var consoleFS embed.FS

// consoleCookie is the console's login cookie.
const consoleCookie = "agentmesh_console"

// consoleCookieAge bounds a login.
const consoleCookieAge = 12 * time.Hour

// consoleCSP is every console answer's Content-Security-Policy.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Bounds of the console's query parameters.
const (
	consoleDefaultLimit = 50
	consoleMaxLimit     = 200
	consoleMaxParam     = 128 // a profile's or adapter's name
	consoleMaxDays      = 92
	consoleDefaultDays  = 14
	consoleMaxTenants   = 50 // an operator's spend chart
	consoleMaxListed    = 200
)

// console is what the console reads beside the gateway's client.
type console struct {
	index     *runIndex
	ledger    *ledger.Store
	ledgerKV  jetstream.KeyValue
	exports   *exports.Records
	js        jetstream.JetStream
	nc        *nats.Conn
	names     subject.Names
	operators map[string]bool
	pages     map[string]*template.Template
}

// validKeyID reports whether id is a Key.ID: 12 lowercase hex digits.
func validKeyID(id string) bool {
	if len(id) != 12 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// OperatorKeysVar is the variable that names the console's operator
// keys (Config.OperatorKeys); agentmesh up, which takes no other gateway
// variable, reads it with ParseKeyIDs.
const OperatorKeysVar = "AGENTMESH_GATEWAY_OPERATOR_KEYS"

// ParseKeyIDs splits a comma-separated list of key ids, as envconfig
// reads Config.OperatorKeys: spaces trimmed, empty entries dropped.
func ParseKeyIDs(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// EnableConsole serves the console (/console) from the mesh of js and nc:
// it starts the runs index (one watch of the runs bucket, until ctx ends)
// and returns once the index holds the bucket's current records, or with
// the first error. Until it is called the console answers 503.
func (g *Gateway) EnableConsole(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, names subject.Names) error {
	pages, err := consolePages()
	if err != nil {
		return err
	}
	c := &console{js: js, nc: nc, names: names, pages: pages, operators: map[string]bool{}}
	for _, id := range g.cfg.OperatorKeys {
		c.operators[id] = true
	}
	retention, err := jsretry.Await(ctx, nc, g.log, "console", func(ctx context.Context) (time.Duration, error) {
		retention, err := topology.RunRetention(ctx, js, names)
		if err != nil {
			return 0, fmt.Errorf("console: %w", err)
		}
		if c.ledger, err = ledger.Open(ctx, js, names); err != nil {
			return 0, fmt.Errorf("console: %w", err)
		}
		if c.ledgerKV, err = js.KeyValue(ctx, names.LedgerBucket()); err != nil {
			return 0, fmt.Errorf("console: open the ledger bucket: %w", err)
		}
		if c.exports, err = exports.Open(ctx, js, names); err != nil {
			return 0, fmt.Errorf("console: %w", err)
		}
		return retention, nil
	})
	if err != nil {
		return err
	}
	c.index = newRunIndex(retention)
	go watchRuns(ctx, js, names, c.index, g.log)
	for {
		c.index.mu.RLock()
		ready, werr := c.index.ready, c.index.err
		c.index.mu.RUnlock()
		if werr != nil {
			return fmt.Errorf("console: %w", werr)
		}
		if ready {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("console: load the runs index: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	g.console.Store(c)
	return nil
}

// consolePages parses each page with the layout.
func consolePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"ms":       consoleTime,
		"terminal": func(s any) bool { return terminalState(fmt.Sprint(s)) },
	}
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(consoleFS, "console/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	names, err := fs.Glob(consoleFS, "console/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "console/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(consoleFS, n)
		if err != nil {
			return nil, fmt.Errorf("console: page %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// consoleTime is how the console writes a time in ms since the epoch.
func consoleTime(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05Z")
}

func terminalState(s string) bool {
	switch s {
	case "succeeded", "failed", "cancelled", "timed_out", "rejected":
		return true
	}
	return false
}

// consoleWho is who a console request authenticated as.
type consoleWho struct {
	Key
	Operator bool
	cookie   bool // by the login cookie, not the header
}

// sees reports whether who may see tenant's runs.
func (w consoleWho) sees(tenant string) bool { return w.Operator || w.Tenant == tenant }

// consoleRoutes registers the console's routes on g's mux.
func (g *Gateway) consoleRoutes() {
	g.mux.Handle("GET /console/static/", g.consoleStatic())
	g.consoleHandle("GET /console/login", g.consoleLoginForm)
	g.consoleHandle("POST /console/login", g.consoleLogin)
	g.consoleHandle("POST /console/logout", g.consoleLogout)
	g.consoleHandle("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/runs", http.StatusSeeOther)
	})
	g.consoleRoute("GET /console/runs", g.consoleRuns)
	g.consoleRoute("GET /console/runs/live", g.consoleRunsLive)
	g.consoleRoute("GET /console/runs/{tenant}/{id}", g.consoleRun)
	g.consoleRoute("GET /console/runs/{tenant}/{id}/events", g.asRunsAPI("GET /console/runs/{tenant}/{id}/events", g.runEvents))
	g.consoleRoute("POST /console/runs/{tenant}/{id}/cancel", g.asRunsAPI("POST /console/runs/{tenant}/{id}/cancel", g.cancelRun))
	g.consoleRoute("GET /console/runs/{tenant}/{id}/artifacts/{name}", g.asRunsAPI("GET /console/runs/{tenant}/{id}/artifacts/{name}", g.getArtifact))
	g.consoleRoute("GET /console/conversations/{tenant}/{id}/history", g.consoleHistory)
	g.consoleRoute("GET /console/spend", g.consoleSpend)
	g.consoleRoute("GET /console/runners", g.consoleRunners)
	g.consoleRoute("GET /console/exports", g.consoleExports)
	g.consoleHandle("/console/", func(w http.ResponseWriter, r *http.Request) {
		g.consoleError(w, r, nil, apiErr(http.StatusNotFound, typeNotFound, "unknown_url", "", "no such console page: %s %s", r.Method, r.URL.Path))
	})
}

// consoleHeaders sets the security headers of every console answer.
func consoleHeaders(h http.Header) {
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// Not no-referrer: under it a browser posts the console's own forms
	// and fetches with "Origin: null", which sameOrigin must refuse.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// consoleHandle serves pattern with h, with the console's headers and a
// small body bound, counted like the API's routes.
func (g *Gateway) consoleHandle(pattern string, h http.HandlerFunc) {
	g.mux.Handle(pattern, g.counted(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		consoleHeaders(w.Header())
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		h(w, r)
	})))
}

// consoleRoute is consoleHandle for a page that needs a key: the header's
// or the cookie's, and for a POST by the cookie, a same-origin request.
func (g *Gateway) consoleRoute(pattern string, h func(w http.ResponseWriter, r *http.Request, c *console, who consoleWho)) {
	g.consoleHandle(pattern, func(w http.ResponseWriter, r *http.Request) {
		c := g.console.Load()
		if c == nil {
			g.consoleError(w, r, nil, apiErr(http.StatusServiceUnavailable, typeUnavailable, "console_unavailable", "", "this gateway serves no console"))
			return
		}
		who, ok := g.consoleAuth(w, r, c)
		if !ok {
			return
		}
		if r.Method == http.MethodPost && who.cookie {
			if e := sameOrigin(r); e != nil {
				g.consoleError(w, r, &who, e)
				return
			}
		}
		h(w, r, c, who)
	})
}

// consoleKey is the request's key: the Authorization header's, else the
// cookie's.
func consoleKey(r *http.Request) (key string, cookie bool) {
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, key, ok := strings.Cut(a, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(key), false
		}
		return "", false
	}
	if ck, err := r.Cookie(consoleCookie); err == nil {
		return ck.Value, true
	}
	return "", false
}

// consoleAuth authenticates r. A request without a key, or with a wrong
// one, is answered 401 with the login form (and a wrong cookie cleared).
func (g *Gateway) consoleAuth(w http.ResponseWriter, r *http.Request, c *console) (consoleWho, bool) {
	key, cookie := consoleKey(r)
	if key == "" {
		g.consoleLoginPage(w, r, http.StatusUnauthorized, "missing_api_key", "Sign in with an API key (agentmesh keys create makes one).")
		return consoleWho{}, false
	}
	k, err := g.keys.Lookup(r.Context(), key)
	switch {
	case errors.Is(err, ErrBadKey):
		if cookie {
			clearConsoleCookie(w, r)
		}
		g.consoleLoginPage(w, r, http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided.")
		return consoleWho{}, false
	case err != nil:
		g.log.Warn("console: api key lookup failed", "err", err)
		g.consoleError(w, r, nil, apiErr(http.StatusServiceUnavailable, typeUnavailable, "mesh_unavailable", "", "the API keys could not be read; try again"))
		return consoleWho{}, false
	}
	return consoleWho{Key: k, Operator: c.operators[k.ID], cookie: cookie}, true
}

// sameOrigin refuses a request that does not come from the console's own
// pages: its Origin must name the request's host, or, without an Origin,
// Sec-Fetch-Site must be same-origin.
func sameOrigin(r *http.Request) *APIError {
	refuse := func(why string) *APIError {
		return apiErr(http.StatusForbidden, "permission_error", "cross_origin", "Origin", "refused: %s (a console form or button posts from the console's own origin)", why)
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return refuse(fmt.Sprintf("Origin %q is not this console's", o))
		}
		return nil
	}
	if r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return nil
	}
	return refuse("no Origin header")
}

func setConsoleCookie(w http.ResponseWriter, r *http.Request, key string) {
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: key, Path: "/console", MaxAge: int(consoleCookieAge.Seconds()),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

func clearConsoleCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: "", Path: "/console", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

func (g *Gateway) consoleLoginForm(w http.ResponseWriter, r *http.Request) {
	g.consoleLoginPage(w, r, http.StatusOK, "", "")
}

// consoleLogin checks the form's key and sets the cookie.
func (g *Gateway) consoleLogin(w http.ResponseWriter, r *http.Request) {
	if e := sameOrigin(r); e != nil {
		g.consoleError(w, r, nil, e)
		return
	}
	if err := r.ParseForm(); err != nil {
		g.consoleError(w, r, nil, invalid("key", "the login form does not parse: %v", err))
		return
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	if key == "" {
		g.consoleLoginPage(w, r, http.StatusUnauthorized, "missing_api_key", "Enter an API key.")
		return
	}
	switch _, err := g.keys.Lookup(r.Context(), key); {
	case errors.Is(err, ErrBadKey):
		g.consoleLoginPage(w, r, http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided.")
		return
	case err != nil:
		g.consoleError(w, r, nil, apiErr(http.StatusServiceUnavailable, typeUnavailable, "mesh_unavailable", "", "the API keys could not be read; try again"))
		return
	}
	setConsoleCookie(w, r, key)
	http.Redirect(w, r, "/console/runs", http.StatusSeeOther)
}

func (g *Gateway) consoleLogout(w http.ResponseWriter, r *http.Request) {
	if e := sameOrigin(r); e != nil {
		g.consoleError(w, r, nil, e)
		return
	}
	clearConsoleCookie(w, r)
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// consoleStatic serves the embedded script and stylesheet.
func (g *Gateway) consoleStatic() http.Handler {
	sub, _ := fs.Sub(consoleFS, "console/static")
	files := http.StripPrefix("/console/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		consoleHeaders(w.Header())
		w.Header().Set("Cache-Control", "max-age=300")
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
}

// pageData is what the layout reads.
type pageData struct {
	Title string
	Nav   string
	Who   *consoleWho
	Page  any
}

// consoleRender renders page with data.
func (g *Gateway) consoleRender(w http.ResponseWriter, status int, page string, data pageData) {
	c := g.console.Load()
	var t *template.Template
	if c != nil {
		t = c.pages[page]
	}
	if t == nil {
		pages, err := consolePages()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		t = pages[page]
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout.html", data); err != nil {
		g.log.Warn("console: render", "page", page, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// consoleError renders e as a page with its status; the error's code and
// param are in the page and in the X-Agentmesh-Error-Code and
// X-Agentmesh-Error-Param headers.
func (g *Gateway) consoleError(w http.ResponseWriter, _ *http.Request, who *consoleWho, e *APIError) {
	if e.Code != nil {
		w.Header().Set("X-Agentmesh-Error-Code", *e.Code)
	}
	if e.Param != nil {
		w.Header().Set("X-Agentmesh-Error-Param", *e.Param)
	}
	g.consoleRender(w, e.Status, "error", pageData{Title: "Error", Who: who, Page: e})
}

func (g *Gateway) consoleLoginPage(w http.ResponseWriter, _ *http.Request, status int, code, msg string) {
	if code != "" {
		w.Header().Set("X-Agentmesh-Error-Code", code)
	}
	g.consoleRender(w, status, "login", pageData{Title: "Sign in", Page: msg})
}

// consoleQuery checks r's query: each parameter at most once, of the
// names allowed, at most consoleMaxParam*4 bytes.
func consoleQuery(r *http.Request, allowed ...string) (url.Values, *APIError) {
	if len(r.URL.RawQuery) > 2048 {
		return nil, invalid("", "the query is longer than 2048 bytes")
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, invalid("", "the query does not parse: %v", err)
	}
	for name, vs := range q {
		if !slices.Contains(allowed, name) {
			return nil, invalid(name, "unknown parameter %q: this page takes %s", name, strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return nil, invalid(name, "parameter %q is given %d times", name, len(vs))
		}
	}
	return q, nil
}

// tenantParam is the tenant a page is about: for an operator the
// parameter's ("" for every tenant), for any other key its own (the
// parameter, if given, must be it).
func tenantParam(q url.Values, who consoleWho) (string, *APIError) {
	t := q.Get("tenant")
	if t != "" {
		if err := subject.ValidToken("tenant", t); err != nil {
			return "", invalid("tenant", "%v", err)
		}
	}
	if who.Operator {
		return t, nil
	}
	if t != "" && t != who.Tenant {
		return "", apiErr(http.StatusForbidden, "permission_error", "wrong_tenant", "tenant", "this key sees tenant %q only", who.Tenant)
	}
	return who.Tenant, nil
}

// tenantAndInt checks a query of only tenant (tenantParam) and the
// integer parameter name (intParam).
func tenantAndInt(r *http.Request, who consoleWho, name string, lo, hi, def int) (string, int, *APIError) {
	q, e := consoleQuery(r, "tenant", name)
	if e != nil {
		return "", 0, e
	}
	tenant, e := tenantParam(q, who)
	if e != nil {
		return "", 0, e
	}
	n, e := intParam(q, name, lo, hi, def)
	return tenant, n, e
}

// intParam reads an integer parameter in [lo, hi], def when absent.
func intParam(q url.Values, name string, lo, hi, def int) (int, *APIError) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, invalid(name, "%s must be a whole number from %d to %d, got %q", name, lo, hi, s)
	}
	return n, nil
}

// nameParam reads a profile's or adapter's name: printable, bounded.
func nameParam(q url.Values, name string) (string, *APIError) {
	s := q.Get(name)
	if len(s) > consoleMaxParam {
		return "", invalid(name, "%s is longer than %d bytes", name, consoleMaxParam)
	}
	for _, c := range s {
		if c < 0x21 || c == 0x7f {
			return "", invalid(name, "%s holds a space or a control character", name)
		}
	}
	return s, nil
}
