package sandbox

import (
	"bufio"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"go.uber.org/goleak"
)

const realKey = "sk-real-provider-key-0123456789"

// seen is what a model API double received.
type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (s *seen) add(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
}

func (s *seen) all() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

// modelAPI is a model API double that records each request and answers
// "ok"; tls serves it over https.
func modelAPI(t *testing.T, tls bool) (*httptest.Server, *seen) {
	t.Helper()
	s := &seen{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.add(r.Clone(context.Background()))
		_, _ = io.WriteString(w, "ok")
	})
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv, s
}

// startKeyProxy starts a key proxy for apis and returns a client whose
// every connection it serves as a connection to endpoint (as the run's
// listener for that endpoint would hand it over).
func startKeyProxy(t *testing.T, apis []KeyedAPI) (*keyProxy, func(endpoint string) *http.Client) {
	t.Helper()
	k, err := parseKeyed(apis)
	if err != nil {
		t.Fatal(err)
	}
	p := newKeyProxy(k)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.serve() }()
	var transports []*http.Transport
	t.Cleanup(func() {
		for _, tr := range transports {
			tr.CloseIdleConnections()
		}
		p.close()
		wg.Wait()
		p.closeIdle()
	})
	return p, func(endpoint string) *http.Client {
		tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
			return p.dial(&wg, endpoint), nil
		}}
		transports = append(transports, tr)
		return &http.Client{Transport: tr}
	}
}

// dial is a connection the proxy serves as one to endpoint.
func (p *keyProxy) dial(wg *sync.WaitGroup, endpoint string) net.Conn {
	a, b := net.Pipe()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer b.Close()
		if !p.handle(b, endpoint) {
			panic("no keyed API at " + endpoint)
		}
	}()
	return a
}

// TestKeyProxyHeaders: per provider, the API receives the real key in its
// header and none of the credentials the agent sent (its own headers, a
// ?key=), at the proxy's path and query, with its own Host.
func TestKeyProxyHeaders(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after every other cleanup
	for _, tc := range []struct {
		header, name, want string
	}{
		{HeaderAPIKey, "X-Api-Key", realKey},
		{HeaderBearer, "Authorization", "Bearer " + realKey},
		{HeaderGoogAPIKey, "X-Goog-Api-Key", realKey},
	} {
		t.Run(tc.header, func(t *testing.T) {
			api, got := modelAPI(t, false)
			_, client := startKeyProxy(t, []KeyedAPI{{URL: api.URL + "/v1", Header: tc.header, Key: secret.New(realKey)}})
			inside, err := ProxyURL(api.URL + "/v1")
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest("POST", inside+"/messages?beta=true&key="+Placeholder, strings.NewReader(`{"model":"m"}`))
			for _, h := range credentialHeaders {
				req.Header.Set(h, "agent-sent "+Placeholder)
			}
			req.Header.Set("Anthropic-Version", "2023-06-01")
			resp, err := client(strings.TrimPrefix(api.URL, "http://")).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "ok" {
				t.Fatalf("got %d %q, want 200 ok", resp.StatusCode, body)
			}
			reqs := got.all()
			if len(reqs) != 1 {
				t.Fatalf("the API got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if v := r.Header.Get(tc.name); v != tc.want {
				t.Errorf("%s = %q, want %q", tc.name, v, tc.want)
			}
			for _, h := range credentialHeaders {
				if h != tc.name && r.Header.Get(h) != "" {
					t.Errorf("the agent's %s reached the API: %q", h, r.Header.Get(h))
				}
			}
			if r.URL.Path != "/v1/messages" || r.URL.RawQuery != "beta=true" {
				t.Errorf("the API got %s?%s, want /v1/messages?beta=true", r.URL.Path, r.URL.RawQuery)
			}
			if r.Host != strings.TrimPrefix(api.URL, "http://") {
				t.Errorf("the API got Host %q, want its own %q", r.Host, strings.TrimPrefix(api.URL, "http://"))
			}
			if r.Header.Get("Anthropic-Version") != "2023-06-01" {
				t.Errorf("the agent's other headers did not pass: %v", r.Header)
			}
		})
	}
}

// TestKeyProxyStreams: an SSE response reaches the agent event by event:
// the API writes its second event only once the agent has read the first.
func TestKeyProxyStreams(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after every other cleanup
	read := make(chan struct{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: one\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-read:
		case <-time.After(10 * time.Second):
			return // the first event never reached the agent
		}
		_, _ = io.WriteString(w, "event: two\ndata: {}\n\n")
	}))
	defer api.Close()
	_, client := startKeyProxy(t, []KeyedAPI{{URL: api.URL, Header: HeaderAPIKey, Key: secret.New(realKey)}})
	resp, err := client(strings.TrimPrefix(api.URL, "http://")).Get(api.URL + "/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if l, err := br.ReadString('\n'); err != nil || l != "event: one\n" {
		t.Fatalf("first line %q, %v", l, err)
	}
	close(read)
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "event: two") {
		t.Fatalf("rest %q, %v: the second event did not follow", rest, err)
	}
}

// rawRequest writes raw on a connection the proxy serves as one to
// endpoint and returns the response's status and body.
func rawRequest(t *testing.T, p *keyProxy, endpoint, raw string) (int, string) {
	t.Helper()
	var wg sync.WaitGroup
	defer wg.Wait()
	c := p.dial(&wg, endpoint)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { _, _ = io.WriteString(c, raw) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestKeyProxyRefusesOtherHosts: CONNECT, an absolute URL or a Host of
// another host, a path outside the API's or with dot segments are each
// refused, and neither the API nor the other host gets a request.
func TestKeyProxyRefusesOtherHosts(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after every other cleanup
	api, got := modelAPI(t, false)
	other, otherGot := modelAPI(t, false)
	p, _ := startKeyProxy(t, []KeyedAPI{{URL: api.URL + "/v1", Header: HeaderBearer, Key: secret.New(realKey)}})
	ep := strings.TrimPrefix(api.URL, "http://")
	oh := strings.TrimPrefix(other.URL, "http://")
	for _, tc := range []struct {
		name, raw string
		code      int
	}{
		{"connect", "CONNECT " + oh + " HTTP/1.1\r\nHost: " + oh + "\r\n\r\n", http.StatusMethodNotAllowed},
		{"absolute url", "GET " + other.URL + "/v1/models HTTP/1.1\r\nHost: " + ep + "\r\n\r\n", http.StatusForbidden},
		{"absolute url and host", "GET " + other.URL + "/v1/models HTTP/1.1\r\nHost: " + oh + "\r\n\r\n", http.StatusForbidden},
		{"host", "GET /v1/models HTTP/1.1\r\nHost: " + oh + "\r\n\r\n", http.StatusMisdirectedRequest},
		{"host without port", "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", http.StatusMisdirectedRequest},
		{"path outside", "GET /admin HTTP/1.1\r\nHost: " + ep + "\r\n\r\n", http.StatusForbidden},
		{"dot segments", "GET /v1/../admin HTTP/1.1\r\nHost: " + ep + "\r\n\r\n", http.StatusBadRequest},
		{"escaped dot segments", "GET /v1/%2e%2e/admin HTTP/1.1\r\nHost: " + ep + "\r\n\r\n", http.StatusBadRequest},
	} {
		code, body := rawRequest(t, p, ep, tc.raw)
		if code != tc.code || !strings.HasPrefix(body, "agentmesh key proxy: ") {
			t.Errorf("%s: %d %q, want %d and the proxy's refusal", tc.name, code, body, tc.code)
		}
	}
	if n := len(got.all()); n != 0 {
		t.Errorf("the API got %d requests", n)
	}
	if n := len(otherGot.all()); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
	// The same connection's own request still goes through.
	if code, body := rawRequest(t, p, ep, "GET /v1/models HTTP/1.1\r\nHost: "+ep+"\r\nConnection: close\r\n\r\n"); code != 200 || body != "ok" {
		t.Errorf("the API's own request: %d %q", code, body)
	}
}

// TestKeyProxyHTTPS: the proxy speaks TLS to an https API, checking its
// certificate: refused while untrusted, forwarded once trusted.
func TestKeyProxyHTTPS(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after every other cleanup
	api, got := modelAPI(t, true)
	ep := strings.TrimPrefix(api.URL, "https://")
	inside, err := ProxyURL(api.URL)
	if err != nil || inside != "http://"+ep {
		t.Fatalf("ProxyURL(%s) = %q, %v, want http://%s", api.URL, inside, err, ep)
	}
	untrusted, _ := startKeyProxy(t, []KeyedAPI{{URL: api.URL, Header: HeaderAPIKey, Key: secret.New(realKey)}})
	if code, body := rawRequest(t, untrusted, ep, "GET /v1/models HTTP/1.1\r\nHost: "+ep+"\r\nConnection: close\r\n\r\n"); code != http.StatusBadGateway || !strings.Contains(body, "certificate") {
		t.Errorf("an untrusted certificate: %d %q, want 502 naming it", code, body)
	}
	roots := x509.NewCertPool()
	roots.AddCert(api.Certificate())
	TrustUpstream(roots)
	defer TrustUpstream(nil)
	_, client := startKeyProxy(t, []KeyedAPI{{URL: api.URL, Header: HeaderAPIKey, Key: secret.New(realKey)}})
	resp, err := client(ep).Get(inside + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	reqs := got.all()
	if len(reqs) != 1 || reqs[0].TLS == nil || reqs[0].Header.Get("X-Api-Key") != realKey {
		t.Fatalf("the API got %d requests (TLS %v), want one over TLS with the key", len(reqs), len(reqs) == 1 && reqs[0].TLS != nil)
	}
}

func TestParseKeyed(t *testing.T) {
	k := secret.New(realKey)
	for _, tc := range []struct {
		apis []KeyedAPI
		want string
	}{
		{[]KeyedAPI{{URL: "https://api.anthropic.com", Header: HeaderAPIKey, Key: k}, {URL: "http://127.0.0.1:4010/v1", Header: HeaderBearer, Key: k}}, ""},
		{[]KeyedAPI{{URL: "https://api.anthropic.com", Header: "basic", Key: k}}, "header"},
		{[]KeyedAPI{{URL: "https://api.anthropic.com", Header: HeaderAPIKey}}, "no key"},
		{[]KeyedAPI{{URL: "ftp://api.anthropic.com", Header: HeaderAPIKey, Key: k}}, "http or https"},
		{[]KeyedAPI{{URL: "https://u:p@api.anthropic.com", Header: HeaderAPIKey, Key: k}}, "user info"},
		{[]KeyedAPI{{URL: "https://api.anthropic.com/?x=1", Header: HeaderAPIKey, Key: k}}, "query"},
		{[]KeyedAPI{{URL: "http://10.0.0.5:11434", Header: HeaderBearer, Key: k}}, "loopback"},
		{[]KeyedAPI{{URL: "https://api.anthropic.com/a/../b", Header: HeaderAPIKey, Key: k}}, ". or .."},
		{[]KeyedAPI{{URL: "https://api.anthropic.com", Header: HeaderAPIKey, Key: k}, {URL: "https://api.anthropic.com:443/v1", Header: HeaderAPIKey, Key: k}}, "another keyed API"},
	} {
		_, err := parseKeyed(tc.apis)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("parseKeyed(%v) = %v, want %q", tc.apis, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), realKey) {
			t.Errorf("the error shows the key: %v", err)
		}
	}
	for in, want := range map[string]string{
		"https://api.anthropic.com":                  "http://api.anthropic.com:443",
		"https://generativelanguage.googleapis.com/": "http://generativelanguage.googleapis.com:443",
		"http://127.0.0.1:4010/v1/":                  "http://127.0.0.1:4010/v1",
		"https://gw.example:8443/openai/v1":          "http://gw.example:8443/openai/v1",
	} {
		if got, err := ProxyURL(in); err != nil || got != want {
			t.Errorf("ProxyURL(%s) = %q, %v, want %q", in, got, err, want)
		}
	}
}

// TestKeyEnv: the key variable holds the placeholder, the base-URL
// variable the proxy's URL (set even when the CLI's environment had
// none), and the key is nowhere else.
func TestKeyEnv(t *testing.T) {
	k, err := parseKeyed([]KeyedAPI{{URL: "https://api.anthropic.com", Header: HeaderAPIKey, Key: secret.New(realKey), KeyVar: "ANTHROPIC_API_KEY", BaseURLVar: "ANTHROPIC_BASE_URL"}})
	if err != nil {
		t.Fatal(err)
	}
	got := keyEnv([]string{"PATH=/bin", "ANTHROPIC_API_KEY=" + realKey, "OTHER=Bearer " + realKey}, k)
	want := []string{"PATH=/bin", "OTHER=Bearer " + Placeholder, "ANTHROPIC_API_KEY=" + Placeholder, "ANTHROPIC_BASE_URL=http://api.anthropic.com:443"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("keyEnv = %q, want %q", got, want)
	}
}

// TestConfinedKeyedAPI: a confined run reaches a keyed API through the
// URL its environment names, over plain HTTP; the API gets the real key,
// while the run's environment, /proc/self/environ and /proc/1/environ
// hold only the placeholder. A request naming another host is refused,
// and raw TLS to the endpoint gets nowhere.
func TestConfinedKeyedAPI(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after every other cleanup
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on this machine")
	}
	api, got := modelAPI(t, false)
	other, otherGot := modelAPI(t, false)
	s, err := New(Config{}, Policy{Keyed: []KeyedAPI{{URL: api.URL, Header: HeaderAPIKey, Key: secret.New(realKey), KeyVar: "ANTHROPIC_API_KEY", BaseURLVar: "ANTHROPIC_BASE_URL"}}})
	if err != nil {
		t.Fatal(err)
	}
	script := `echo "env: $ANTHROPIC_API_KEY $ANTHROPIC_BASE_URL"
for f in /proc/self/environ /proc/1/environ; do grep -q "` + realKey + `" $f 2>/dev/null && echo "$f has the key"; done; echo checked
curl -sS -H "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/v1/messages"; echo
curl -sS -o /dev/null -w "%{http_code}\n" -H "Host: ` + strings.TrimPrefix(other.URL, "http://") + `" "$ANTHROPIC_BASE_URL/v1/messages"
curl -sS -o /dev/null -w "%{http_code}\n" -x "$ANTHROPIC_BASE_URL" ` + other.URL + `/v1/messages
`
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=/usr/bin:/bin", "ANTHROPIC_API_KEY=" + realKey, "HOME=" + t.TempDir()}
	out := confinedOutput(t, s, cmd)
	lines := strings.Split(out, "\n")
	ep := strings.TrimPrefix(api.URL, "http://")
	if want := "env: " + Placeholder + " http://" + ep; lines[0] != want {
		t.Errorf("the run's environment: %q, want %q", lines[0], want)
	}
	if len(lines) < 2 || lines[1] != "checked" {
		t.Errorf("the key in /proc: %q", out)
	}
	if len(lines) < 5 || lines[2] != "ok" || lines[3] != "421" || lines[4] != "403" {
		t.Errorf("the run printed %q, want ok, then 421 and 403 for the other host", out)
	}
	reqs := got.all()
	if len(reqs) != 1 || reqs[0].Header.Get("X-Api-Key") != realKey {
		t.Errorf("the API got %d requests, want one with the real key", len(reqs))
	}
	if n := len(otherGot.all()); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
	if strings.Contains(out, realKey) {
		t.Errorf("the run saw the key: %q", out)
	}
}

// TestCredentialFiles: a credential file is in a run only when the
// policy names it, then read-only at its own path; one under a hidden
// path fails the run before it starts.
func TestCredentialFiles(t *testing.T) {
	dir := t.TempDir()
	cred := filepath.Join(dir, ".credentials.json")
	if err := os.WriteFile(cred, []byte(`{"token":"t"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	script := `cat "` + cred + `" 2>/dev/null || echo absent; echo; { echo changed >"` + cred + `"; } 2>/dev/null || echo refused`
	for _, tc := range []struct {
		files []string
		want  string
	}{
		{nil, "absent\n\nrefused\n"},
		{[]string{cred}, "{\"token\":\"t\"}\nrefused\n"},
	} {
		s, err := New(Config{}, Policy{CredentialFiles: tc.files})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Dir, cmd.Env = t.TempDir(), []string{"PATH=/usr/bin:/bin"}
		if got := confinedOutput(t, s, cmd); got != tc.want {
			t.Errorf("credential files %q: the run printed %q, want %q", tc.files, got, tc.want)
		}
	}
	if b, _ := os.ReadFile(cred); string(b) != `{"token":"t"}` {
		t.Errorf("the credential file is now %q", b)
	}
	hidden, err := New(Config{Hidden: []string{dir}}, Policy{CredentialFiles: []string{cred}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/true")
	cmd.Dir, cmd.Env = t.TempDir(), []string{"PATH=/usr/bin:/bin"}
	if _, err := hidden.Confine(cmd); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("Confine of a hidden credential file = %v, want a refusal naming %s", err, dir)
	}
	if _, err := New(Config{}, Policy{CredentialFiles: []string{"relative.json"}}); err == nil {
		t.Error("New took a relative credential file")
	}
}

// TestLoginFiles: a login file in a state directory is empty in a run,
// through its own path and a symlink to it, and what the run writes
// there is lost, while
// the rest of the directory stays the run's to read and write; a login
// the policy names as a credential file is bound read-only as it is. The
// host's file is never changed.
func TestLoginFiles(t *testing.T) {
	state := t.TempDir()
	login := filepath.Join(state, "auth.json")
	const token = `{"OPENAI_API_KEY":"sk-login-in-a-file"}`
	if err := os.WriteFile(login, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("auth.json", filepath.Join(state, "link.json")); err != nil {
		t.Fatal(err)
	}
	script := `cd "$STATE" && printf '[%s]' "$(cat auth.json)" "$(cat link.json)"; echo;
{ echo changed >auth.json; } 2>/dev/null; printf '[%s]\n' "$(cat auth.json)"
{ rm auth.json; } 2>/dev/null && echo removed || echo kept
{ mv auth.json moved.json; } 2>/dev/null && echo moved || echo stays
echo mine >other && cat other`
	for _, tc := range []struct {
		name string
		p    Policy
		want string
	}{
		{"masked", Policy{StateVars: []string{"STATE"}, LoginFiles: []string{login}}, "[][]\n[]\nkept\nstays\nmine\n"},
		{"through the symlink", Policy{StateVars: []string{"STATE"}, LoginFiles: []string{filepath.Join(state, "link.json")}},
			"[][]\n[]\nkept\nstays\nmine\n"},
		{"a credential file", Policy{StateVars: []string{"STATE"}, LoginFiles: []string{login}, CredentialFiles: []string{login}},
			"[" + token + "][" + token + "]\n[" + token + "]\nkept\nstays\nmine\n"},
	} {
		s, err := New(Config{}, tc.p)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Dir, cmd.Env = t.TempDir(), []string{"PATH=/usr/bin:/bin", "STATE=" + state}
		if got := confinedOutput(t, s, cmd); got != tc.want {
			t.Errorf("%s: the run printed %q, want %q", tc.name, got, tc.want)
		}
		if b, _ := os.ReadFile(login); string(b) != token {
			t.Fatalf("%s: the login file is now %q", tc.name, b)
		}
	}
	if _, err := New(Config{}, Policy{LoginFiles: []string{"auth.json"}}); err == nil {
		t.Error("New took a relative login file")
	}
}

// BenchmarkKeyProxyRequest times one request through the key proxy (a
// keep-alive connection, as a CLI holds one) against the same request
// made to the API directly: the difference is what the proxy adds.
func BenchmarkKeyProxyRequest(b *testing.B) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer api.Close()
	k, err := parseKeyed([]KeyedAPI{{URL: api.URL, Header: HeaderAPIKey, Key: secret.New(realKey)}})
	if err != nil {
		b.Fatal(err)
	}
	p := newKeyProxy(k)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.serve() }()
	ep := strings.TrimPrefix(api.URL, "http://")
	proxied := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return p.dial(&wg, ep), nil }}
	for name, c := range map[string]*http.Client{"direct": api.Client(), "proxied": {Transport: proxied}} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				resp, err := c.Post(api.URL+"/v1/messages", "application/json", strings.NewReader(`{"model":"m"}`))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	proxied.CloseIdleConnections()
	p.close()
	wg.Wait()
	p.closeIdle()
}

// TestKeyProxyUpgrade: an upgraded connection (a WebSocket, as a CLI may
// open one to its API) goes through with the key added, both ways, and
// ends when the API closes it.
func TestKeyProxyUpgrade(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after every other cleanup
	gotKey := make(chan string, 1)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey <- r.Header.Get("X-Api-Key")
		c, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		line, _ := brw.ReadString('\n')
		_, _ = io.WriteString(c, "echo "+line)
	}))
	t.Cleanup(api.Close)
	p, _ := startKeyProxy(t, []KeyedAPI{{URL: api.URL, Header: HeaderAPIKey, Key: secret.New(realKey)}})
	ep := strings.TrimPrefix(api.URL, "http://")
	var wg sync.WaitGroup
	defer wg.Wait()
	c := p.dial(&wg, ep)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		_, _ = io.WriteString(c, "GET /v1/responses HTTP/1.1\r\nHost: "+ep+"\r\nx-api-key: "+Placeholder+"\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
	}()
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, %v", resp, err)
	}
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		t.Fatal(err)
	}
	if l, err := br.ReadString('\n'); err != nil || l != "echo hello\n" {
		t.Fatalf("through the upgraded connection: %q, %v", l, err)
	}
	if k := <-gotKey; k != realKey {
		t.Errorf("the API got x-api-key %q, want the real key", k)
	}
	if _, err := br.ReadString('\n'); err != io.EOF {
		t.Errorf("after the API closed: %v, want EOF", err)
	}
}
