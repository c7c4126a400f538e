package safehttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"
)

var (
	public   = netip.MustParseAddr("93.184.216.34") // never dialed: the test guard would veto it
	loopback = netip.MustParseAddr("127.0.0.1")
)

// get fetches url with a fresh client and returns the body.
func get(t *testing.T, p Policy, rawURL string) (string, error) {
	t.Helper()
	c := NewClient(p, 5*time.Second)
	defer c.CloseIdleConnections()
	resp, err := c.Get(rawURL)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), err
}

func TestAllowLoopbackGET(t *testing.T) {
	watchDials(t)
	srv := newCountingServer(t, nil)
	dns := newFakeDNS(t)
	dns.answer("localhost", []netip.Addr{loopback}) // used only if /etc/hosts lacks it
	dns.answer("fixture.test", []netip.Addr{loopback})
	p := Policy{AllowLoopback: true, Resolver: dns.resolver()}
	for _, host := range []string{"127.0.0.1", "2130706433", "0x7f.1", "[::ffff:127.0.0.1]", "localhost", "fixture.test"} {
		target := "http://" + host + ":" + srv.port() + "/"
		if _, err := CheckURL(target, p); err != nil {
			t.Fatalf("CheckURL(%q): %v", target, err)
		}
		body, err := get(t, p, target)
		if err != nil || body != "hello" {
			t.Fatalf("GET %q = %q, %v; want hello", target, body, err)
		}
	}
}

// TestLoopbackRefusedAtDial fetches a live loopback server, spelled many
// ways, without AllowLoopback: every fetch is refused and the server
// accepts no connection.
func TestLoopbackRefusedAtDial(t *testing.T) {
	refused := watchDials(t)
	srv := newCountingServer(t, nil)
	dns := newFakeDNS(t)
	dns.answer("fixture.test", []netip.Addr{loopback})
	p := Policy{Resolver: dns.resolver()}
	for _, host := range []string{"127.0.0.1", "2130706433", "0x7f.1", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]", "１２７.０.０.１", "fixture.test"} {
		target := "http://" + host + ":" + srv.port() + "/"
		if _, err := get(t, p, target); !errors.Is(err, ErrRefused) {
			t.Fatalf("GET %q: %v, want ErrRefused", target, err)
		}
	}
	if n := srv.conns.Load(); n != 0 {
		t.Fatalf("server accepted %d connections, want 0", n)
	}
	want := netip.AddrPortFrom(loopback, mustPort(t, srv.port()))
	if got := refused(); len(got) != 8 || slices.IndexFunc(got, func(ap netip.AddrPort) bool { return ap.Addr().Unmap() != loopback || ap.Port() != want.Port() }) >= 0 {
		t.Fatalf("refused dials = %v, want %v eight times", got, want)
	}
}

// TestRebindingRefusedAtDial: a name answers a public address when it is
// checked and a refused one when it is dialed. CheckURL passes (it does not
// resolve), the check-time lookup sees the public address, and the dial
// is refused in the Control hook for the address actually dialed.
func TestRebindingRefusedAtDial(t *testing.T) {
	srv := newCountingServer(t, nil) // the loopback target: must see nothing
	dns := newFakeDNS(t)
	for i, second := range []string{"127.0.0.1", "10.0.0.1", "169.254.169.254", "fd00:ec2::254", "::ffff:10.0.0.1", "::1"} {
		t.Run(second, func(t *testing.T) {
			refused := watchDials(t)
			name := fmt.Sprintf("rebind%d.test", i)
			rebound := netip.MustParseAddr(second)
			dns.answer(name, []netip.Addr{public}, []netip.Addr{rebound})
			p := Policy{Resolver: dns.resolver()}
			target := "http://" + name + ":" + srv.port() + "/"

			if _, err := CheckURL(target, p); err != nil {
				t.Fatalf("CheckURL(%q): %v", target, err)
			}
			first, err := p.Resolver.LookupNetIP(context.Background(), "ip", name)
			if err != nil || len(first) != 1 || first[0] != public {
				t.Fatalf("check-time lookup = %v, %v; want [%v]", first, err, public)
			}
			if bad, _ := Refused(first[0], p); bad {
				t.Fatalf("check-time answer %v refused; the test needs a public one", first[0])
			}

			if _, err := get(t, p, target); !errors.Is(err, ErrRefused) {
				t.Fatalf("GET %q after rebinding to %v: %v, want ErrRefused", target, rebound, err)
			}
			got := refused()
			if len(got) != 1 || got[0].Addr().Unmap() != rebound.Unmap() {
				t.Fatalf("refused dials = %v, want one to %v", got, rebound)
			}
			if n := dns.queries(name, typeA) + dns.queries(name, typeAAAA); n != 4 {
				t.Fatalf("%d queries for %s, want 4 (A and AAAA at check and at dial)", n, name)
			}
			if n := srv.conns.Load(); n != 0 {
				t.Fatalf("loopback server accepted %d connections, want 0", n)
			}
		})
	}
}

// TestNameWithMixedAnswers: each resolved address is judged on its own at
// the Control hook, so a name with refused and allowed answers reaches only
// an allowed one (which the resolver's RFC 6724 sort tries first here),
// and a name whose every answer is refused is refused address by address.
func TestNameWithMixedAnswers(t *testing.T) {
	refused := watchDials(t)
	srv := newCountingServer(t, nil)
	dns := newFakeDNS(t)
	private, metadata := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("169.254.169.254")
	dns.answer("mixed.test", []netip.Addr{private, loopback})
	dns.answer("refused.test", []netip.Addr{private, metadata})
	p := Policy{AllowLoopback: true, Resolver: dns.resolver()}

	body, err := get(t, p, "http://mixed.test:"+srv.port()+"/")
	if err != nil || body != "hello" {
		t.Fatalf("GET mixed = %q, %v; want hello", body, err)
	}
	for _, ap := range refused() {
		if ap.Addr() != private {
			t.Fatalf("refused dial to %v, want only %v", ap, private)
		}
	}

	refused = watchDials(t)
	if _, err := get(t, p, "http://refused.test:"+srv.port()+"/"); !errors.Is(err, ErrRefused) {
		t.Fatalf("GET refused.test: %v, want ErrRefused", err)
	}
	got := refused()
	slices.SortFunc(got, func(a, b netip.AddrPort) int { return a.Compare(b) })
	if len(got) != 2 || got[0].Addr() != private || got[1].Addr() != metadata {
		t.Fatalf("refused dials = %v, want %v and %v", got, private, metadata)
	}
	if n := srv.conns.Load(); n != 1 {
		t.Fatalf("server accepted %d connections, want 1 (mixed.test only)", n)
	}
}

func TestRedirectsRefused(t *testing.T) {
	dns := newFakeDNS(t)
	dns.answer("private.test", []netip.Addr{netip.MustParseAddr("10.0.0.1")})
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	p := Policy{AllowLoopback: true, Resolver: dns.resolver()}
	tests := []struct {
		name      string
		to        string
		wantDial  string // the address refused at the dial, for a name the redirect check cannot judge
		wantQuery bool
	}{
		{name: "metadata", to: "http://169.254.169.254/latest/meta-data/"},
		{name: "private", to: "http://10.0.0.1/"},
		{name: "metadata decimal", to: "http://2852039166/"},
		{name: "metadata mapped", to: "http://[::ffff:a9fe:a9fe]/"},
		{name: "metadata name", to: "http://metadata.google.internal/"},
		{name: "NAT64 private", to: "http://[64:ff9b::a00:1]/"},
		{name: "file scheme", to: "file:///etc/passwd"},
		{name: "gopher scheme", to: "gopher://127.0.0.1:70/"},
		{name: "ftp scheme", to: "ftp://example.com/"},
		{name: "userinfo", to: "http://user:pw@127.0.0.1/"},
		{name: "name resolving to private", to: "http://private.test/", wantDial: "10.0.0.1:80", wantQuery: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			refused := watchDials(t)
			before := dns.queries("", 0)
			target := srv.URL + "/?to=" + url.QueryEscape(tc.to)
			if _, err := get(t, p, target); !errors.Is(err, ErrRefused) {
				t.Fatalf("GET redirecting to %q: %v, want ErrRefused", tc.to, err)
			}
			got := refused()
			switch {
			case tc.wantDial == "" && len(got) != 0:
				t.Fatalf("refused dials = %v, want none (refused before dialing)", got)
			case tc.wantDial != "" && (len(got) != 1 || got[0].String() != tc.wantDial):
				t.Fatalf("refused dials = %v, want [%s]", got, tc.wantDial)
			}
			if queried := dns.queries("", 0) > before; queried != tc.wantQuery {
				t.Fatalf("DNS queried: %v, want %v", queried, tc.wantQuery)
			}
		})
	}
}

func TestRedirectCap(t *testing.T) {
	watchDials(t)
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("hops"))
		if n > 0 {
			http.Redirect(w, r, "/?hops="+strconv.Itoa(n-1), http.StatusFound)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	p := Policy{AllowLoopback: true}
	if body, err := get(t, p, srv.URL+"/?hops=5"); err != nil || body != "hello" {
		t.Fatalf("5 redirects: %q, %v; want hello", body, err)
	}
	srv.reqs.Store(0)
	if _, err := get(t, p, srv.URL+"/?hops=6"); !errors.Is(err, ErrRefused) {
		t.Fatalf("6 redirects: %v, want ErrRefused", err)
	}
	if n := srv.reqs.Load(); n != 1+MaxRedirects {
		t.Fatalf("server saw %d requests, want %d", n, 1+MaxRedirects)
	}
}

// TestProxyFromEnvironmentIgnored points every proxy variable at a loopback
// listener and fetches a name (the environment's proxy would apply to it):
// the request goes direct and the proxy sees no connection.
func TestProxyFromEnvironmentIgnored(t *testing.T) {
	watchDials(t)
	proxy := newCountingServer(t, nil)
	direct := newCountingServer(t, nil)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		t.Setenv(k, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	dns := newFakeDNS(t)
	dns.answer("api.test", []netip.Addr{loopback})
	p := Policy{AllowLoopback: true, Resolver: dns.resolver()}

	if tr := NewClient(p, 0).Transport.(*http.Transport); tr.Proxy != nil {
		t.Fatalf("transport has a Proxy func")
	}
	body, err := get(t, p, "http://api.test:"+direct.port()+"/")
	if err != nil || body != "hello" {
		t.Fatalf("GET = %q, %v; want hello", body, err)
	}
	if n := proxy.conns.Load(); n != 0 {
		t.Fatalf("proxy accepted %d connections, want 0", n)
	}
	if n := direct.reqs.Load(); n != 1 {
		t.Fatalf("target served %d requests, want 1", n)
	}
}

func mustPort(t *testing.T, s string) uint16 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	return uint16(n)
}

// TestRedirectDropsCredentialsAcrossOrigins: a redirect within the origin
// keeps the request's headers; one to another origin loses every header
// that may carry a credential.
func TestRedirectDropsCredentialsAcrossOrigins(t *testing.T) {
	watchDials(t)
	seen := make(chan http.Header, 2)
	other := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
	}))
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusTemporaryRedirect)
			return
		}
		seen <- r.Header.Clone()
	}))
	dns := newFakeDNS(t)
	dns.answer("other.test", []netip.Addr{loopback})
	c := NewClient(Policy{AllowLoopback: true, Resolver: dns.resolver()}, 5*time.Second)
	defer c.CloseIdleConnections()
	credentials := []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "Cookie", "Proxy-Authorization"}

	for _, tc := range []struct {
		name     string
		to       string
		wantKept bool
	}{
		{name: "same origin", to: "/echo", wantKept: true},
		{name: "other origin", to: "http://other.test:" + other.port() + "/echo", wantKept: false},
	} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/?to="+url.QueryEscape(tc.to), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range credentials {
			req.Header.Set(k, "sekrit")
		}
		req.Header.Set("Accept", "text/event-stream")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		h := <-seen
		for _, k := range credentials {
			if kept := h.Get(k) != ""; kept != tc.wantKept {
				t.Errorf("%s: header %s kept=%v, want %v", tc.name, k, kept, tc.wantKept)
			}
		}
		if h.Get("Accept") != "text/event-stream" {
			t.Errorf("%s: Accept = %q, want it kept", tc.name, h.Get("Accept"))
		}
	}
}

func TestRedirectRefusesDowngrade(t *testing.T) {
	from, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1", nil)
	to, _ := http.NewRequest(http.MethodGet, "http://api.example.com/v1", nil)
	if err := checkRedirect(to, []*http.Request{from}, Policy{}); !errors.Is(err, ErrRefused) {
		t.Fatalf("https to http redirect: %v, want ErrRefused", err)
	}
	up, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1", nil)
	plain, _ := http.NewRequest(http.MethodGet, "http://api.example.com/v1", nil)
	if err := checkRedirect(up, []*http.Request{plain}, Policy{}); err != nil {
		t.Fatalf("http to https redirect: %v, want nil", err)
	}
}
