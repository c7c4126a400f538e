package safehttp

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

// refusedSpellings are destinations that must be refused, each a spelling
// of a refused address or a refused name. Every one is refused by CheckURL
// and, fetched through NewClient's client without CheckURL, by the dialer,
// before any packet is sent and without any DNS query.
var refusedSpellings = []struct {
	name          string
	in            string
	allowLoopback bool
}{
	// Loopback in every spelling inet_aton and browsers accept.
	{name: "loopback dotted", in: "http://127.0.0.1/"},
	{name: "loopback trailing dot", in: "http://127.0.0.1./"},
	{name: "loopback decimal", in: "http://2130706433/"},
	{name: "loopback octal whole", in: "http://017700000001/"},
	{name: "loopback hex whole", in: "http://0x7f000001/"},
	{name: "loopback hex uppercase", in: "http://0X7F000001/"},
	{name: "loopback hex first part", in: "http://0x7f.0.0.1/"},
	{name: "loopback octal first part", in: "http://0177.0.0.1/"},
	{name: "loopback octal parts", in: "http://0177.00.00.01/"},
	{name: "loopback leading zeros", in: "http://127.000.000.001/"},
	{name: "loopback short 2 parts", in: "http://127.1/"},
	{name: "loopback short 3 parts", in: "http://127.0.1/"},
	{name: "loopback mixed hex short", in: "http://0x7f.1/"},
	{name: "loopback mixed octal hex", in: "http://0177.0x0.1/"},
	{name: "loopback other address", in: "http://127.255.255.254:8080/"},
	{name: "loopback v6", in: "http://[::1]/"},
	{name: "loopback v6 long", in: "http://[0:0:0:0:0:0:0:1]:8080/"},
	{name: "loopback v4-mapped", in: "http://[::ffff:127.0.0.1]/"},
	{name: "loopback v4-mapped hex", in: "http://[::FFFF:7F00:1]/"},
	{name: "localhost", in: "http://localhost/"},
	{name: "localhost uppercase trailing dot", in: "http://LOCALHOST./"},
	{name: "localhost subdomain", in: "http://api.localhost:11434/"},

	// Unspecified and "this network".
	{name: "unspecified", in: "http://0.0.0.0/"},
	{name: "unspecified decimal", in: "http://0/"},
	{name: "unspecified hex", in: "http://0x0/"},
	{name: "unspecified v6", in: "http://[::]/"},
	{name: "this network", in: "http://0.1.2.3/"},

	// Private ranges.
	{name: "10/8", in: "http://10.0.0.1/"},
	{name: "10/8 short", in: "http://10.1/"},
	{name: "10/8 octal", in: "http://012.0.0.1/"},
	{name: "10/8 decimal", in: "http://167772161/"},
	{name: "10/8 hex", in: "http://0xa000001/"},
	{name: "172.16/12", in: "http://172.16.0.1/"},
	{name: "172.16/12 top", in: "http://172.31.255.255/"},
	{name: "192.168/16", in: "http://192.168.0.1/"},
	{name: "192.168/16 short", in: "http://192.168.1/"},
	{name: "192.168/16 decimal", in: "http://3232235777/"},
	{name: "unique local", in: "http://[fc00::1]/"},
	{name: "unique local fd", in: "http://[fd12:3456:789a::1]/"},
	{name: "CGNAT", in: "http://100.64.0.1/"},
	{name: "CGNAT Alibaba metadata", in: "http://100.100.100.200/"},

	// Link-local and cloud metadata.
	{name: "metadata", in: "http://169.254.169.254/latest/meta-data/"},
	{name: "metadata trailing dot", in: "http://169.254.169.254./"},
	{name: "metadata decimal", in: "http://2852039166/"},
	{name: "metadata hex", in: "http://0xa9fea9fe/"},
	{name: "metadata octal parts", in: "http://0251.0376.0251.0376/"},
	{name: "metadata hex parts", in: "http://0xA9.0xFE.0xA9.0xFE/"},
	{name: "metadata short", in: "http://169.254.43518/"},
	{name: "metadata v4-mapped", in: "http://[::ffff:169.254.169.254]/"},
	{name: "metadata v4-mapped hex", in: "http://[::ffff:a9fe:a9fe]/"},
	{name: "metadata EC2 v6", in: "http://[fd00:ec2::254]/"},
	{name: "metadata EC2 v6 uppercase", in: "http://[FD00:EC2::254]/"},
	{name: "metadata ECS task", in: "http://169.254.170.2/v2/credentials"},
	{name: "metadata GCE name", in: "http://metadata.google.internal/computeMetadata/v1/"},
	{name: "metadata GCE name upper dot", in: "http://METADATA.GOOGLE.INTERNAL./"},
	{name: "metadata GCE short name", in: "http://metadata/"},
	{name: "metadata goog name", in: "http://metadata.goog/"},
	{name: "metadata EC2 name", in: "http://instance-data/"},
	{name: "link-local v4", in: "http://169.254.1.1/"},
	{name: "link-local v6", in: "http://[fe80::1]/"},
	{name: "link-local v6 zone", in: "http://[fe80::1%25eth0]/"},
	{name: "link-local v6 zone port", in: "http://[FE80::A9FE:A9FE%25lo]:8080/"},

	// Multicast, broadcast, reserved, documentation, benchmarking.
	{name: "multicast", in: "http://224.0.0.1/"},
	{name: "multicast SSDP", in: "http://239.255.255.250:1900/"},
	{name: "broadcast", in: "http://255.255.255.255/"},
	{name: "broadcast decimal", in: "http://4294967295/"},
	{name: "reserved", in: "http://240.0.0.1/"},
	{name: "multicast v6", in: "http://[ff02::1]/"},
	{name: "TEST-NET-1", in: "http://192.0.2.1/"},
	{name: "TEST-NET-2", in: "http://198.51.100.7/"},
	{name: "TEST-NET-3", in: "http://203.0.113.9/"},
	{name: "benchmarking", in: "http://198.18.0.1/"},
	{name: "documentation v6", in: "http://[2001:db8::1]/"},

	// IPv6 forms that embed a refused IPv4 address.
	{name: "compatible loopback", in: "http://[::127.0.0.1]/"},
	{name: "compatible private", in: "http://[::10.0.0.1]/"},
	{name: "compatible metadata hex", in: "http://[::a9fe:a9fe]/"},
	{name: "translated private", in: "http://[::ffff:0:10.0.0.1]/"},
	{name: "NAT64 private", in: "http://[64:ff9b::10.0.0.1]/"},
	{name: "NAT64 metadata hex", in: "http://[64:ff9b::a9fe:a9fe]/"},
	{name: "NAT64 loopback even with loopback allowed", in: "http://[64:ff9b::127.0.0.1]/", allowLoopback: true},
	{name: "NAT64 local-use", in: "http://[64:ff9b:1::a00:1]/"},
	{name: "6to4 metadata", in: "http://[2002:a9fe:a9fe::1]/"},
	{name: "6to4 loopback even with loopback allowed", in: "http://[2002:7f00:1::]/", allowLoopback: true},
	{name: "6to4 private", in: "http://[2002:c0a8:101::1]/"},
	{name: "Teredo", in: "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/"},

	// AllowLoopback opens loopback only.
	{name: "allow loopback: private", in: "http://10.0.0.1/", allowLoopback: true},
	{name: "allow loopback: metadata", in: "http://169.254.169.254/", allowLoopback: true},
	{name: "allow loopback: metadata decimal", in: "http://2852039166/", allowLoopback: true},
	{name: "allow loopback: metadata name", in: "http://metadata.google.internal/", allowLoopback: true},
	{name: "allow loopback: EC2 v6 metadata", in: "http://[fd00:ec2::254]/", allowLoopback: true},
	{name: "allow loopback: mapped private", in: "http://[::ffff:192.168.0.1]/", allowLoopback: true},
	{name: "allow loopback: compatible loopback", in: "http://[::127.0.0.1]/", allowLoopback: true},
	{name: "allow loopback: unspecified", in: "http://0.0.0.0/", allowLoopback: true},

	// Hosts that look numeric but are no address: refused, never resolved.
	{name: "invalid octal", in: "http://1.2.3.09/"},
	{name: "five parts", in: "http://1.2.3.4.5/"},
	{name: "first part over 255", in: "http://256.0.0.1/"},
	{name: "last part over 255", in: "http://1.2.3.256/"},
	{name: "decimal over 32 bits", in: "http://4294967296/"},
	{name: "hex over 32 bits", in: "http://0x100000000/"},
	{name: "numeric last label", in: "http://example.123/"},
	{name: "full-width digits", in: "http://１２７.０.０.１/"},
}

// refusedForms are URLs refused for their form rather than their address.
var refusedForms = []struct {
	name string
	in   string
}{
	{name: "file scheme", in: "file:///etc/passwd"},
	{name: "gopher scheme", in: "gopher://example.com:70/"},
	{name: "ftp scheme", in: "ftp://example.com/"},
	{name: "javascript scheme", in: "javascript:alert(1)"},
	{name: "no scheme", in: "//example.com/"},
	{name: "opaque", in: "http:example.com"},
	{name: "no host", in: "http:///path"},
	{name: "userinfo", in: "http://user:secret@example.com/"},
	{name: "userinfo user only", in: "https://user@example.com/"},
	{name: "port 0", in: "http://example.com:0/"},
	{name: "port too large", in: "http://example.com:65536/"},
	{name: "bracketed v4", in: "http://[127.0.0.1]/"},
	{name: "unbracketed v6", in: "http://::1/"},
	{name: "percent-encoded host", in: "http://%31%32%37.0.0.1/"},
	{name: "space in host", in: "http://exa mple.com/"},
	{name: "empty label", in: "http://example..com/"},
	{name: "empty", in: ""},
}

func TestCheckURLRefusesSpellings(t *testing.T) {
	if len(refusedSpellings) < 30 {
		t.Fatalf("only %d refused spellings; acceptance asks for 30", len(refusedSpellings))
	}
	for _, tc := range refusedSpellings {
		t.Run(tc.name, func(t *testing.T) {
			u, err := CheckURL(tc.in, Policy{AllowLoopback: tc.allowLoopback})
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("CheckURL(%q) = %v, %v; want ErrRefused", tc.in, u, err)
			}
		})
	}
}

// TestDialRefusesSpellings fetches every refused spelling without
// CheckURL: the dialer alone must refuse it, before a socket connects
// (the test guard would veto any non-loopback dial) and without sending a
// single DNS query (numeric spellings are never resolved as names).
func TestDialRefusesSpellings(t *testing.T) {
	dns := newFakeDNS(t)
	for _, tc := range refusedSpellings {
		t.Run(tc.name, func(t *testing.T) {
			refused := watchDials(t)
			c := NewClient(Policy{AllowLoopback: tc.allowLoopback, Resolver: dns.resolver()}, 5*time.Second)
			defer c.CloseIdleConnections()
			resp, err := c.Get(tc.in)
			if err == nil {
				resp.Body.Close()
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("GET %q: %v; want ErrRefused", tc.in, err)
			}
			if n := dns.queries("", 0); n != 0 {
				t.Fatalf("GET %q sent %d DNS queries; want none", tc.in, n)
			}
			// A literal is refused by address in the dialer; a name, or a
			// host that is no address, before anything is resolved.
			if isLiteral(tc.in) && len(refused()) == 0 {
				t.Fatalf("GET %q: refused, but not by the dialer's address check", tc.in)
			}
		})
	}
}

// isLiteral reports whether raw's host is an address in some spelling.
func isLiteral(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	_, _, isAddr, err := parseHost(u.Hostname())
	return err == nil && isAddr
}

func TestCheckURLRefusesForms(t *testing.T) {
	for _, tc := range refusedForms {
		t.Run(tc.name, func(t *testing.T) {
			u, err := CheckURL(tc.in, Policy{AllowLoopback: true})
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("CheckURL(%q) = %v, %v; want ErrRefused", tc.in, u, err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error %q echoes the userinfo", err)
			}
		})
	}
}

func TestCheckURLAllows(t *testing.T) {
	tests := []struct {
		name          string
		in            string
		allowLoopback bool
		wantHost      string
	}{
		{name: "public literal", in: "http://93.184.216.34/", wantHost: "93.184.216.34"},
		{name: "public decimal", in: "http://16843009/", wantHost: "16843009"},
		{name: "public v6", in: "https://[2606:4700:4700::1111]:443/", wantHost: "[2606:4700:4700::1111]:443"},
		{name: "public v4-mapped", in: "http://[::ffff:93.184.216.34]/", wantHost: "[::ffff:93.184.216.34]"},
		{name: "NAT64 of public", in: "http://[64:ff9b::5db8:d822]/", wantHost: "[64:ff9b::5db8:d822]"},
		{name: "6to4 of public", in: "http://[2002:5db8:d822::1]/", wantHost: "[2002:5db8:d822::1]"},
		{name: "name", in: "https://api.openai.com/v1", wantHost: "api.openai.com"},
		{name: "name trailing dot", in: "https://api.anthropic.com./v1/messages", wantHost: "api.anthropic.com."},
		{name: "name with port and query", in: "http://example.com:8080/x?y=1", wantHost: "example.com:8080"},
		{name: "uppercase scheme and name", in: "HTTPS://Example.COM/", wantHost: "Example.COM"},
		{name: "name with numeric labels", in: "http://1.2.3.4.example/", wantHost: "1.2.3.4.example"},
		{name: "name with underscore", in: "http://my_service-1.internal/", wantHost: "my_service-1.internal"},
		{name: "name private-looking", in: "http://10.example.com/", wantHost: "10.example.com"},
		{name: "loopback allowed", in: "http://127.0.0.1:11434/", allowLoopback: true, wantHost: "127.0.0.1:11434"},
		{name: "loopback decimal allowed", in: "http://2130706433:8080/", allowLoopback: true, wantHost: "2130706433:8080"},
		{name: "loopback short hex allowed", in: "http://0x7f.1/", allowLoopback: true, wantHost: "0x7f.1"},
		{name: "loopback v6 allowed", in: "http://[::1]:8080/", allowLoopback: true, wantHost: "[::1]:8080"},
		{name: "loopback mapped allowed", in: "http://[::ffff:127.0.0.1]/", allowLoopback: true, wantHost: "[::ffff:127.0.0.1]"},
		{name: "localhost allowed", in: "http://localhost:11434/api/chat", allowLoopback: true, wantHost: "localhost:11434"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := CheckURL(tc.in, Policy{AllowLoopback: tc.allowLoopback})
			if err != nil {
				t.Fatalf("CheckURL(%q): %v", tc.in, err)
			}
			if u.Host != tc.wantHost {
				t.Fatalf("CheckURL(%q).Host = %q, want %q", tc.in, u.Host, tc.wantHost)
			}
		})
	}
}

func TestParseHostSpellings(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" for a name
	}{
		{"127.0.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"0X7F000001", "127.0.0.1"},
		{"0x7f.0.0.1", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"127.0.0.1.", "127.0.0.1"},
		{"10.1", "10.0.0.1"},
		{"169.254.43518", "169.254.169.254"},
		{"0xa9.0xfe.0xa9.0xfe", "169.254.169.254"},
		{"0x", "0.0.0.0"},
		{"0", "0.0.0.0"},
		{"00", "0.0.0.0"},
		{"4294967295", "255.255.255.255"},
		{"1.0x", "1.0.0.0"},
		{"fe80::1%eth0", "fe80::1%eth0"},
		{"::FFFF:7F00:1", "::ffff:127.0.0.1"},
		{"example.com", ""},
		{"1.2.3.4.example", ""},
		{"0x7g.1a", ""},
		{"metadata.google.internal.", ""},
	}
	for _, tc := range tests {
		addr, name, isAddr, err := parseHost(tc.in)
		if err != nil {
			t.Errorf("parseHost(%q): %v", tc.in, err)
			continue
		}
		switch {
		case tc.want == "" && isAddr:
			t.Errorf("parseHost(%q) = address %v, want a name", tc.in, addr)
		case tc.want == "" && name != strings.TrimSuffix(strings.ToLower(tc.in), "."):
			t.Errorf("parseHost(%q) name = %q", tc.in, name)
		case tc.want != "" && (!isAddr || addr != netip.MustParseAddr(tc.want)):
			t.Errorf("parseHost(%q) = %v (address %v), want %s", tc.in, addr, isAddr, tc.want)
		}
	}
}

func TestRefused(t *testing.T) {
	tests := []struct {
		in                 string
		want, wantLoopback bool   // refused under the zero Policy, under AllowLoopback
		why                string // part of the reason under the zero Policy
	}{
		{"93.184.216.34", false, false, ""},
		{"8.8.8.8", false, false, ""},
		{"2606:4700:4700::1111", false, false, ""},
		{"::ffff:8.8.8.8", false, false, ""},
		{"64:ff9b::808:808", false, false, ""},
		{"2002:808:808::", false, false, ""},
		{"127.0.0.1", true, false, "loopback"},
		{"127.8.9.10", true, false, "loopback"},
		{"::1", true, false, "loopback"},
		{"::ffff:127.0.0.1", true, false, "IPv4-mapped form of 127.0.0.1: loopback"},
		{"0.0.0.0", true, true, "unspecified"},
		{"::", true, true, "unspecified"},
		{"0.0.0.1", true, true, "this network"},
		{"10.255.255.255", true, true, "private"},
		{"172.16.0.0", true, true, "private"},
		{"172.32.0.0", false, false, ""},
		{"192.168.255.1", true, true, "private"},
		{"100.64.0.0", true, true, "carrier-grade NAT"},
		{"100.128.0.0", false, false, ""},
		{"169.254.169.254", true, true, "metadata"},
		{"169.254.0.1", true, true, "link-local"},
		{"224.0.0.251", true, true, "multicast"},
		{"255.255.255.255", true, true, "broadcast"},
		{"192.0.0.170", true, true, "IETF"},
		{"192.88.99.1", true, true, "6to4 relay"},
		{"fd00:ec2::254", true, true, "metadata"},
		{"fd00::1", true, true, "unique local"},
		{"fec0::1", true, true, "site-local"},
		{"fe80::1%eth0", true, true, "link-local"},
		{"ff05::2", true, true, "multicast"},
		{"100::1", true, true, "discard"},
		{"2001:2::1", true, true, "benchmarking"},
		{"2001:10::1", true, true, "ORCHID"},
		{"3fff::1", true, true, "documentation"},
		{"::10.0.0.1", true, true, "IPv4-compatible"},
		{"::8.8.8.8", true, true, "IPv4-compatible"},
		{"::ffff:0:a9fe:a9fe", true, true, "IPv4-translated form of 169.254.169.254"},
		{"64:ff9b::7f00:1", true, true, "NAT64 form of 127.0.0.1"},
		{"2002:a00:1::", true, true, "6to4 form of 10.0.0.1"},
		{"2001::1", true, true, "Teredo"},
	}
	for _, tc := range tests {
		ip := netip.MustParseAddr(tc.in)
		got, why := Refused(ip, Policy{})
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("Refused(%s) = %v, %q; want %v, reason containing %q", tc.in, got, why, tc.want, tc.why)
		}
		if got, why := Refused(ip, Policy{AllowLoopback: true}); got != tc.wantLoopback {
			t.Errorf("Refused(%s, AllowLoopback) = %v, %q; want %v", tc.in, got, why, tc.wantLoopback)
		}
	}
	if got, _ := Refused(netip.Addr{}, Policy{AllowLoopback: true}); !got {
		t.Errorf("Refused(invalid address) = false, want true")
	}
}

func TestDialerRefusesOtherNetworks(t *testing.T) {
	d := &dialer{policy: Policy{AllowLoopback: true}}
	for _, network := range []string{"udp", "unix", "ip4:icmp"} {
		if _, err := d.DialContext(context.Background(), network, "127.0.0.1:53"); !errors.Is(err, ErrRefused) {
			t.Errorf("DialContext(%q) = %v, want ErrRefused", network, err)
		}
	}
}

// FuzzCheckURL checks that CheckURL never accepts a URL whose host denotes
// a refused address, and that every error it returns is a refusal.
func FuzzCheckURL(f *testing.F) {
	for _, tc := range refusedSpellings {
		f.Add(tc.in, tc.allowLoopback)
	}
	for _, tc := range refusedForms {
		f.Add(tc.in, false)
	}
	f.Add("http://93.184.216.34/", false)
	f.Add("https://api.openai.com/v1", false)
	f.Fuzz(func(t *testing.T, raw string, allowLoopback bool) {
		p := Policy{AllowLoopback: allowLoopback}
		u, err := CheckURL(raw, p)
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("CheckURL(%q) error %v is not ErrRefused", raw, err)
			}
			return
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("CheckURL(%q) accepted scheme %q", raw, u.Scheme)
		}
		host := u.Hostname()
		if a, err := netip.ParseAddr(host); err == nil {
			if bad, why := Refused(a, p); bad {
				t.Fatalf("CheckURL(%q) accepted %s (%s)", raw, a, why)
			}
		}
		addr, _, isAddr, err := parseHost(host)
		if err != nil {
			t.Fatalf("CheckURL(%q) accepted host %q the dialer refuses: %v", raw, host, err)
		}
		if isAddr {
			if bad, why := Refused(addr, p); bad {
				t.Fatalf("CheckURL(%q) accepted %s (%s)", raw, addr, why)
			}
		}
	})
}
