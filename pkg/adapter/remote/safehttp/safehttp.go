package safehttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Policy says which destinations a client may reach. The zero Policy
// refuses loopback and resolves names with net.DefaultResolver.
type Policy struct {
	// AllowLoopback permits 127.0.0.0/8, ::1 and the name localhost, for a
	// profile that says allow_loopback (Ollama, a local fixture server). It
	// opens no private range and no metadata address.
	AllowLoopback bool
	// Resolver resolves names at dial time; nil means net.DefaultResolver.
	// Tests inject a fake.
	Resolver *net.Resolver
}

// ErrRefused is matched, with errors.Is, by every refusal: a URL CheckURL
// rejects, a redirect that is not followed, and a connection the dialer
// will not make.
var ErrRefused = errors.New("destination refused")

// MaxRedirects is how many redirects a client from NewClient follows; the
// next one fails with ErrRefused.
const MaxRedirects = 5

// dialTimeout bounds one connection attempt, so a black-holed address
// cannot hang a request whose client has no overall timeout.
const dialTimeout = 30 * time.Second

// CheckURL validates a base or agent URL before any client exists and
// returns it parsed: the scheme is http or https, there is a host, there is
// no userinfo, the port (if any) is 1-65535, and the host is not a refused
// address in any spelling (see the package documentation) nor a refused
// name. Other names are allowed here; they are judged again, by address,
// when they are dialed. Every error wraps ErrRefused. It does no I/O and is
// safe for concurrent use.
func CheckURL(raw string, p Policy) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the bare reason, without echoing the URL
		}
		return nil, fmt.Errorf("%w: malformed url: %v", ErrRefused, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: scheme %q is not http or https", ErrRefused, u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, fmt.Errorf("%w: url has no host", ErrRefused)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: url carries userinfo", ErrRefused)
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: port %q out of range", ErrRefused, port)
		}
	}
	addr, name, isAddr, err := parseHost(u.Hostname())
	if err != nil {
		return nil, err
	}
	bracketed := strings.HasPrefix(u.Host, "[")
	if bracketed != (isAddr && addr.Is6()) {
		// An IPv6 literal must be bracketed and only one may be.
		return nil, fmt.Errorf("%w: malformed host %q", ErrRefused, u.Hostname())
	}
	if isAddr {
		if bad, why := Refused(addr, p); bad {
			return nil, fmt.Errorf("%w: %s (%s)", ErrRefused, addr, why)
		}
		return u, nil
	}
	if bad, why := refusedName(name, p); bad {
		return nil, fmt.Errorf("%w: %s (%s)", ErrRefused, name, why)
	}
	return u, nil
}

// NewClient returns an *http.Client for one logical request. Its transport
// never uses a proxy (the environment's HTTP_PROXY, HTTPS_PROXY and
// NO_PROXY are ignored), dials through a dialer that reads numeric hosts as
// addresses, resolves names with p.Resolver and refuses, in the dialer's
// Control hook, any address Refused refuses, and uses the default TLS
// configuration (HTTP/2 when the server offers it). Before a redirect is
// followed its URL must pass CheckURL and must not step down from https to
// http; at most MaxRedirects are followed; and a redirect to another origin
// loses every header that may carry a credential. timeout is the client's
// overall Timeout; 0 means none.
//
// It does no I/O. The client is safe for concurrent use, but is meant for
// one logical request (its retries included): the caller closes it with
// CloseIdleConnections when the request is done, on every path.
func NewClient(p Policy, timeout time.Duration) *http.Client {
	d := &dialer{policy: p}
	tr := &http.Transport{
		Proxy:                 nil, // never from the environment: a proxy would dial for us, unchecked
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true, // a custom DialContext otherwise turns HTTP/2 off
		MaxIdleConns:          8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return checkRedirect(req, via, p)
		},
	}
}

// checkRedirect decides whether the client follows a redirect to req. It
// refuses more than MaxRedirects, a URL CheckURL refuses, and a step from
// https down to http. On a redirect away from the first request's origin
// it removes every header that may carry a credential: net/http removes
// Authorization and Cookie there, but not a provider's own key header such
// as X-Api-Key.
func checkRedirect(req *http.Request, via []*http.Request, p Policy) error {
	if len(via) > MaxRedirects {
		return fmt.Errorf("%w: more than %d redirects", ErrRefused, MaxRedirects)
	}
	if _, err := CheckURL(req.URL.String(), p); err != nil {
		return fmt.Errorf("redirect: %w", err)
	}
	if via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme == "http" {
		return fmt.Errorf("%w: redirect from https to http", ErrRefused)
	}
	if !sameOrigin(via[0].URL, req.URL) {
		for k := range req.Header {
			if credentialHeader(k) {
				req.Header.Del(k)
			}
		}
	}
	return nil
}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if u.Scheme == "https" {
			return "443"
		}
		return "80"
	}
	return a.Scheme == b.Scheme && port(a) == port(b) &&
		strings.EqualFold(strings.TrimSuffix(a.Hostname(), "."), strings.TrimSuffix(b.Hostname(), "."))
}

// credentialHeader reports whether a header's name suggests it may carry
// a credential (Authorization, X-Api-Key, X-Goog-Api-Key, Cookie, an
// access token, a signature...). It errs towards removing.
func credentialHeader(name string) bool {
	name = strings.ToLower(name)
	for _, s := range []string{"auth", "key", "token", "secret", "cookie", "session", "signature", "credential", "password"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// dialer makes the transport's connections under a Policy.
type dialer struct {
	policy Policy
}

// Test hooks, nil outside tests. dialGuard runs in the Control hook after
// an address passed the policy and may veto it, so a test can prove no
// connection to anything but loopback is ever attempted, even if the
// policy had a bug. onRefused is told each address the Control hook
// refused.
var (
	dialGuard func(netip.AddrPort) error
	onRefused func(netip.AddrPort)
)

// DialContext dials addr ("host:port"): a literal host in any spelling is
// judged, then dialed as the address it denotes; a name is refused if
// refusedName says so and is otherwise resolved by the Policy's resolver
// inside net.Dialer, which tries each address in turn; and every address
// actually dialed passes the Control hook before it connects.
func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("%w: network %q", ErrRefused, network)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial address %q: %v", ErrRefused, addr, err)
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil || pn == 0 {
		return nil, fmt.Errorf("%w: dial port %q", ErrRefused, port)
	}
	ip, name, isAddr, err := parseHost(host)
	if err != nil {
		return nil, err
	}
	if isAddr {
		// Judged before a socket exists (a zone naming no interface would
		// otherwise fail first), then dialed in its canonical spelling: net
		// never sees 0x7f.1 or 2130706433, so no resolver can read it as a
		// name or as anything else. The Control hook judges it again.
		ap := netip.AddrPortFrom(ip, uint16(pn))
		if err := d.check(ap); err != nil {
			return nil, err
		}
		addr = ap.String()
	} else {
		if bad, why := refusedName(name, d.policy); bad {
			return nil, fmt.Errorf("%w: %s (%s)", ErrRefused, name, why)
		}
		addr = net.JoinHostPort(name, port)
	}
	nd := &net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: 30 * time.Second,
		Resolver:  d.policy.Resolver, // nil: net.DefaultResolver
		Control:   d.control,
	}
	return nd.DialContext(ctx, network, addr)
}

// control runs after the socket for one resolved address exists and before
// it connects: the last point at which no packet has been sent.
func (d *dialer) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unreadable dial address %q", ErrRefused, address)
	}
	return d.check(ap)
}

// check judges one address about to be dialed.
func (d *dialer) check(ap netip.AddrPort) error {
	if bad, why := Refused(ap.Addr(), d.policy); bad {
		if onRefused != nil {
			onRefused(ap)
		}
		return fmt.Errorf("%w: %s (%s)", ErrRefused, ap.Addr(), why)
	}
	if dialGuard != nil {
		return dialGuard(ap)
	}
	return nil
}
