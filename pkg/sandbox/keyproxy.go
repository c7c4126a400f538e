package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
)

// The ways a model API takes its key (KeyedAPI.Header).
const (
	// HeaderAPIKey is Anthropic's: x-api-key: KEY.
	HeaderAPIKey = "x-api-key"
	// HeaderBearer is OpenAI's and most others': Authorization: Bearer KEY.
	HeaderBearer = "bearer"
	// HeaderGoogAPIKey is Gemini's: x-goog-api-key: KEY.
	HeaderGoogAPIKey = "x-goog-api-key"
)

// Placeholder is what a confined run's key variable holds when the
// runner's proxy holds the real key (KeyedAPI): no secret, just a value
// the CLIs accept as a key, which the proxy replaces on every request.
const Placeholder = "agentmesh-placeholder-key-held-by-the-runner"

// credentialHeaders are the request headers that carry a credential to
// one model API or another; the proxy drops each one an agent sends
// before it adds the real key.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "X-Api-Key", "X-Goog-Api-Key", "Api-Key", "Cookie"}

// A KeyedAPI is a model API whose key the runner holds in a run's place.
// The run reaches it only over plain HTTP at ProxyURL(URL), a listener
// inside its sandbox; the runner's proxy drops any credential the request
// carries, adds Key as Header says, and forwards it to URL's host (TLS
// when URL is https), under URL's path only. The run's environment holds
// Placeholder in KeyVar and the proxy's URL in BaseURLVar.
type KeyedAPI struct {
	// URL is the API's real base URL, http or https.
	URL string
	// Header is how the API takes the key: HeaderAPIKey, HeaderBearer or
	// HeaderGoogAPIKey.
	Header string
	// Key is the credential.
	Key secret.String
	// KeyVar and BaseURLVar name the child's variables that carry the key
	// and the base URL; either may be empty (a CLI that reads its base
	// URL from a config file, which its adapter rewrites to ProxyURL).
	KeyVar, BaseURLVar string
}

// keyed is a checked KeyedAPI.
type keyed struct {
	KeyedAPI
	target   *url.URL // the API's scheme and host
	base     string   // the URL's path, without a trailing slash
	endpoint Endpoint
}

// apiURL checks a keyed API's base URL: http or https, a host an egress
// endpoint may name, no user info, query or fragment.
func apiURL(raw string) (*url.URL, string, Endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", Endpoint{}, fmt.Errorf("API URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, "", Endpoint{}, errors.New("API URL: the scheme must be http or https")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, "", Endpoint{}, errors.New("API URL: want scheme://host[:port][/path], without user info, query or fragment")
	}
	hp, err := EgressOf(u.Scheme + "://" + u.Host)
	if err != nil {
		return nil, "", Endpoint{}, fmt.Errorf("API URL: %v", err)
	}
	eps, err := ParseEgress([]string{hp})
	if err != nil {
		return nil, "", Endpoint{}, fmt.Errorf("API URL: %v", err)
	}
	base := strings.TrimRight(u.EscapedPath(), "/")
	if hasDotSegment(base) {
		return nil, "", Endpoint{}, errors.New("API URL: the path has a . or .. segment")
	}
	return &url.URL{Scheme: u.Scheme, Host: u.Host}, base, eps[0], nil
}

// ProxyURL is the base URL a confined run reaches the keyed API at
// apiURL through: plain http to the API's own host and port, which the
// sandbox's /etc/hosts resolves to a loopback listener of the runner's
// proxy, and the API's path ("https://api.anthropic.com" is
// "http://api.anthropic.com:443"). The same in every run.
func ProxyURL(apiURLString string) (string, error) {
	_, base, ep, err := apiURL(apiURLString)
	if err != nil {
		return "", err
	}
	return "http://" + ep.String() + base, nil
}

// parseKeyed checks a policy's keyed APIs: one per endpoint.
func parseKeyed(apis []KeyedAPI) ([]*keyed, error) {
	var out []*keyed
	seen := map[Endpoint]bool{}
	for _, a := range apis {
		switch a.Header {
		case HeaderAPIKey, HeaderBearer, HeaderGoogAPIKey:
		default:
			return nil, fmt.Errorf("keyed API %s: header %q is not %s, %s or %s", a.URL, a.Header, HeaderAPIKey, HeaderBearer, HeaderGoogAPIKey)
		}
		if a.Key.Empty() {
			return nil, fmt.Errorf("keyed API %s: no key", a.URL)
		}
		target, base, ep, err := apiURL(a.URL)
		if err != nil {
			return nil, err
		}
		if seen[ep] {
			return nil, fmt.Errorf("keyed API %s: another keyed API is at %s", a.URL, ep)
		}
		seen[ep] = true
		out = append(out, &keyed{KeyedAPI: a, target: target, base: base, endpoint: ep})
	}
	return out, nil
}

// keyEnv is a run's environment with each keyed API's key variable set
// to Placeholder and its base-URL variable to its ProxyURL; any other
// value that holds a key (of 8 bytes or more) has it replaced by
// Placeholder, so no key enters the sandbox.
func keyEnv(env []string, apis []*keyed) []string {
	if len(apis) == 0 {
		return append([]string(nil), env...)
	}
	set := map[string]string{}
	for _, a := range apis {
		if a.KeyVar != "" {
			set[a.KeyVar] = Placeholder
		}
		if a.BaseURLVar != "" {
			set[a.BaseURLVar] = "http://" + a.endpoint.String() + a.base
		}
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok {
			continue
		}
		for _, a := range apis {
			if key := a.Key.Reveal(); len(key) >= 8 {
				v = strings.ReplaceAll(v, key, Placeholder)
			}
		}
		out = append(out, k+"="+v)
	}
	for _, a := range apis {
		for _, k := range []string{a.KeyVar, a.BaseURLVar} {
			if v, ok := set[k]; ok {
				out = append(out, k+"="+v)
				delete(set, k)
			}
		}
	}
	return out
}

// upstreamRoots are the certificates the proxy trusts on an https API:
// nil, the system's. Tests set it (export_test.go).
var upstreamRoots *x509.CertPool

// keyProxy is one run's HTTP proxy for its keyed APIs. The run's egress
// proxy (forward) hands it each connection to a keyed endpoint; it serves
// HTTP/1.1 on it and forwards each admitted request to that API with the
// key added, streaming the response back as it arrives.
type keyProxy struct {
	srv   *http.Server
	apis  map[string]*apiProxy // by endpoint
	queue chan *keyedConn
	done  chan struct{}
	once  sync.Once
}

// apiProxy is one keyed API's forwarding.
type apiProxy struct {
	k  *keyed
	rp *httputil.ReverseProxy
	tr *http.Transport
}

// keyedConn is a connection handed to the key proxy; closed is closed
// once the server is done with it (its handler returned), or, when a
// handler took it over for an upgraded protocol (a WebSocket), once that
// handler closed it.
type keyedConn struct {
	net.Conn
	api      *apiProxy
	closed   chan struct{}
	once     sync.Once
	hijacked atomic.Bool
}

func (kc *keyedConn) done() { kc.once.Do(func() { close(kc.closed) }) }

// Close closes the connection; a hijacked one is then done.
func (kc *keyedConn) Close() error {
	err := kc.Conn.Close()
	if kc.hijacked.Load() {
		kc.done()
	}
	return err
}

type apiCtxKey struct{}

func newKeyProxy(apis []*keyed) *keyProxy {
	p := &keyProxy{apis: map[string]*apiProxy{}, queue: make(chan *keyedConn), done: make(chan struct{})}
	quiet := log.New(io.Discard, "", 0)
	for _, k := range apis {
		a := &apiProxy{k: k, tr: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: upstreamRoots},
			TLSHandshakeTimeout:   10 * time.Second,
			ForceAttemptHTTP2:     true,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
		}}
		a.rp = &httputil.ReverseProxy{Rewrite: a.rewrite, Transport: a.tr, FlushInterval: -1, ErrorLog: quiet,
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
				http.Error(w, fmt.Sprintf("agentmesh key proxy: %s: %v", k.target.Host, err), http.StatusBadGateway)
			}}
		p.apis[k.endpoint.String()] = a
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          quiet,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, apiCtxKey{}, c.(*keyedConn).api)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			switch kc := c.(*keyedConn); st {
			case http.StateClosed:
				kc.done()
			case http.StateHijacked:
				kc.hijacked.Store(true)
			}
		},
	}
	return p
}

// serve serves the connections handed to the proxy until close.
func (p *keyProxy) serve() { _ = p.srv.Serve(p) }

// handle serves c, a connection to endpoint, if endpoint is a keyed
// API's, and returns once the proxy is done with it; false if it is not.
func (p *keyProxy) handle(c net.Conn, endpoint string) bool {
	a := p.apis[endpoint]
	if a == nil {
		return false
	}
	kc := &keyedConn{Conn: c, api: a, closed: make(chan struct{})}
	select {
	case p.queue <- kc:
		<-kc.closed
	case <-p.done:
	}
	return true
}

// close ends the proxy and every connection it serves; closeIdle, once
// no handler runs, closes its connections to the APIs.
func (p *keyProxy) close() { _ = p.srv.Close() }

func (p *keyProxy) closeIdle() {
	for _, a := range p.apis {
		a.tr.CloseIdleConnections()
	}
}

// Accept, Close and Addr make the proxy the server's listener.
func (p *keyProxy) Accept() (net.Conn, error) {
	select {
	case c := <-p.queue:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *keyProxy) Close() error {
	p.once.Do(func() { close(p.done) })
	return nil
}

func (p *keyProxy) Addr() net.Addr { return &net.UnixAddr{Name: "agentmesh-key-proxy", Net: "unix"} }

// ServeHTTP admits a request for its connection's API and forwards it.
func (p *keyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a, _ := r.Context().Value(apiCtxKey{}).(*apiProxy)
	if a == nil {
		http.Error(w, "agentmesh key proxy: no API on this connection", http.StatusInternalServerError)
		return
	}
	if code, why := a.k.admit(r); code != 0 {
		http.Error(w, "agentmesh key proxy: "+why, code)
		return
	}
	a.rp.ServeHTTP(w, r)
}

// admit refuses, with a status and why, what is not a request for the
// API's own base URL: CONNECT, a request naming another host (in Host
// or as an absolute URL), a path outside the API's.
func (k *keyed) admit(r *http.Request) (int, string) {
	inside := k.endpoint.String()
	if r.Method == http.MethodConnect {
		return http.StatusMethodNotAllowed, "CONNECT is refused: this proxy forwards only to " + inside
	}
	if r.URL.Host != "" && !k.sameHost(r.URL.Host) {
		return http.StatusForbidden, fmt.Sprintf("a request for %s is refused: this proxy forwards only to %s", r.URL.Host, inside)
	}
	if !k.sameHost(r.Host) {
		return http.StatusMisdirectedRequest, fmt.Sprintf("a request for host %q is refused: this proxy forwards only to %s", r.Host, inside)
	}
	p := r.URL.EscapedPath()
	if !strings.HasPrefix(p, "/") || hasDotSegment(p) {
		return http.StatusBadRequest, "the path must be absolute, without . or .. segments"
	}
	if k.base != "" && p != k.base && !strings.HasPrefix(p, k.base+"/") {
		return http.StatusForbidden, "the path is outside the API's base path " + k.base
	}
	return 0, ""
}

// sameHost reports whether host (a Host header, or an absolute URL's
// host) names the API's endpoint inside the sandbox.
func (k *keyed) sameHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if h, port, err := net.SplitHostPort(host); err == nil {
		return strings.TrimSuffix(h, ".") == k.endpoint.Host && port == strconv.Itoa(k.endpoint.Port)
	}
	return host == k.endpoint.Host && k.endpoint.Port == 80
}

// rewrite sends an admitted request to the API: its scheme and host, the
// request's path, no credential of the agent's and the key.
func (a *apiProxy) rewrite(pr *httputil.ProxyRequest) {
	out := pr.Out
	out.URL.Scheme, out.URL.Host, out.URL.User = a.k.target.Scheme, a.k.target.Host, nil
	out.Host = ""
	for _, h := range credentialHeaders {
		out.Header.Del(h)
	}
	if q := out.URL.Query(); q.Has("key") {
		q.Del("key") // Google's APIs take a key as ?key= too
		out.URL.RawQuery = q.Encode()
	}
	key := a.k.Key.Reveal()
	switch a.k.Header {
	case HeaderAPIKey:
		out.Header.Set("X-Api-Key", key)
	case HeaderBearer:
		out.Header.Set("Authorization", "Bearer "+key)
	case HeaderGoogAPIKey:
		out.Header.Set("X-Goog-Api-Key", key)
	}
}

// hasDotSegment reports whether an escaped path has a "." or ".."
// segment (also escaped, %2e).
func hasDotSegment(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if s, err := url.PathUnescape(seg); err != nil || s == "." || s == ".." {
			return true
		}
	}
	return false
}
