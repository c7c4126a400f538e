package safehttp

import (
	"net/netip"
)

// rangeRule refuses the addresses of one prefix, giving why.
type rangeRule struct {
	prefix   netip.Prefix
	why      string
	loopback bool // allowed under Policy.AllowLoopback
}

// v4Rules is the IPv4 table of doc.go, most specific first where prefixes
// nest (the metadata addresses before their link-local range).
var v4Rules = []rangeRule{
	{prefix: netip.MustParsePrefix("0.0.0.0/32"), why: "unspecified address"},
	{prefix: netip.MustParsePrefix("0.0.0.0/8"), why: `"this network" (0.0.0.0/8)`},
	{prefix: netip.MustParsePrefix("10.0.0.0/8"), why: "private (10.0.0.0/8)"},
	{prefix: netip.MustParsePrefix("100.100.100.200/32"), why: "cloud metadata address (Alibaba Cloud)"},
	{prefix: netip.MustParsePrefix("100.64.0.0/10"), why: "shared address space, carrier-grade NAT (100.64.0.0/10)"},
	{prefix: netip.MustParsePrefix("127.0.0.0/8"), why: "loopback (127.0.0.0/8)", loopback: true},
	{prefix: netip.MustParsePrefix("169.254.169.254/32"), why: "cloud metadata address"},
	{prefix: netip.MustParsePrefix("169.254.170.2/32"), why: "cloud metadata address (ECS task metadata)"},
	{prefix: netip.MustParsePrefix("169.254.0.0/16"), why: "link-local (169.254.0.0/16)"},
	{prefix: netip.MustParsePrefix("172.16.0.0/12"), why: "private (172.16.0.0/12)"},
	{prefix: netip.MustParsePrefix("192.0.0.0/24"), why: "IETF protocol assignments (192.0.0.0/24)"},
	{prefix: netip.MustParsePrefix("192.0.2.0/24"), why: "documentation (192.0.2.0/24)"},
	{prefix: netip.MustParsePrefix("192.88.99.0/24"), why: "deprecated 6to4 relay anycast (192.88.99.0/24)"},
	{prefix: netip.MustParsePrefix("192.168.0.0/16"), why: "private (192.168.0.0/16)"},
	{prefix: netip.MustParsePrefix("198.18.0.0/15"), why: "benchmarking (198.18.0.0/15)"},
	{prefix: netip.MustParsePrefix("198.51.100.0/24"), why: "documentation (198.51.100.0/24)"},
	{prefix: netip.MustParsePrefix("203.0.113.0/24"), why: "documentation (203.0.113.0/24)"},
	{prefix: netip.MustParsePrefix("224.0.0.0/4"), why: "multicast (224.0.0.0/4)"},
	{prefix: netip.MustParsePrefix("255.255.255.255/32"), why: "limited broadcast"},
	{prefix: netip.MustParsePrefix("240.0.0.0/4"), why: "reserved (240.0.0.0/4)"},
}

// v6Rules is the IPv6 table of doc.go for addresses that embed no IPv4
// address worth judging.
var v6Rules = []rangeRule{
	{prefix: netip.MustParsePrefix("::/128"), why: "unspecified address"},
	{prefix: netip.MustParsePrefix("::1/128"), why: "loopback (::1)", loopback: true},
	{prefix: netip.MustParsePrefix("64:ff9b:1::/48"), why: "local-use NAT64 (64:ff9b:1::/48)"},
	{prefix: netip.MustParsePrefix("100::/64"), why: "discard-only (100::/64)"},
	{prefix: netip.MustParsePrefix("2001::/32"), why: "Teredo (2001::/32)"},
	{prefix: netip.MustParsePrefix("2001:2::/48"), why: "benchmarking (2001:2::/48)"},
	{prefix: netip.MustParsePrefix("2001:10::/28"), why: "deprecated ORCHID (2001:10::/28)"},
	{prefix: netip.MustParsePrefix("2001:db8::/32"), why: "documentation (2001:db8::/32)"},
	{prefix: netip.MustParsePrefix("3fff::/20"), why: "documentation (3fff::/20)"},
	{prefix: netip.MustParsePrefix("fd00:ec2::254/128"), why: "cloud metadata address (EC2 IPv6)"},
	{prefix: netip.MustParsePrefix("fc00::/7"), why: "unique local, private (fc00::/7)"},
	{prefix: netip.MustParsePrefix("fec0::/10"), why: "deprecated site-local (fec0::/10)"},
	{prefix: netip.MustParsePrefix("fe80::/10"), why: "link-local (fe80::/10)"},
	{prefix: netip.MustParsePrefix("ff00::/8"), why: "multicast (ff00::/8)"},
}

// Forms that carry an IPv4 address in their last (or, for 6to4, second
// and third) 32 bits.
var (
	compat4   = netip.MustParsePrefix("::/96")
	translat4 = netip.MustParsePrefix("::ffff:0:0:0/96")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Refused reports whether ip may not be dialed under p, and if so why. An
// invalid address is refused; a zone is ignored. It is a pure function, safe
// for concurrent use. See the package documentation for the ranges.
func Refused(ip netip.Addr, p Policy) (bool, string) {
	if !ip.IsValid() {
		return true, "invalid address"
	}
	ip = ip.WithZone("")
	if ip.Is4In6() {
		// Go dials ::ffff:a.b.c.d as the IPv4 address itself, so it is
		// judged exactly as that address, loopback included.
		if bad, why := refused4(ip.Unmap(), p); bad {
			return true, "IPv4-mapped form of " + ip.Unmap().String() + ": " + why
		}
		return false, ""
	}
	if ip.Is4() {
		return refused4(ip, p)
	}
	for _, r := range v6Rules {
		if r.prefix.Contains(ip) {
			if r.loopback && p.AllowLoopback {
				return false, ""
			}
			return true, r.why
		}
	}
	b := ip.As16()
	switch {
	case compat4.Contains(ip):
		// :: and ::1 matched above. Deprecated by RFC 4291 and never a
		// legitimate destination, whatever it embeds.
		return true, "IPv4-compatible form of " + embedded(b[12:16]).String() + " (deprecated)"
	case translat4.Contains(ip):
		return judgeEmbedded("IPv4-translated form", embedded(b[12:16]))
	case nat64.Contains(ip):
		return judgeEmbedded("NAT64 form", embedded(b[12:16]))
	case sixToFour.Contains(ip):
		return judgeEmbedded("6to4 form", embedded(b[2:6]))
	}
	return false, ""
}

func embedded(b []byte) netip.Addr { return netip.AddrFrom4([4]byte(b)) }

// judgeEmbedded judges an IPv4 address carried inside a translation or
// tunnel form. Loopback is never allowed through one: such a form does not
// reach this host's loopback.
func judgeEmbedded(form string, v4 netip.Addr) (bool, string) {
	if bad, why := refused4(v4, Policy{}); bad {
		return true, form + " of " + v4.String() + ": " + why
	}
	return false, ""
}

func refused4(ip netip.Addr, p Policy) (bool, string) {
	for _, r := range v4Rules {
		if r.prefix.Contains(ip) {
			if r.loopback && p.AllowLoopback {
				return false, ""
			}
			return true, r.why
		}
	}
	return false, ""
}
