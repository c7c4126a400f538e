// Package safehttp provides the SSRF-safe HTTP client that every remote
// adapter uses: URL checks before a client exists, and an address check at
// the moment each connection is dialed, so that no request reaches a
// private, loopback, link-local, metadata or otherwise refused address
// (docs/contract.md §4.9, "Remote safety").
//
// # Two checks
//
// CheckURL validates a base or agent URL before any client exists: http or
// https only, a host, no userinfo, and a host that is neither a refused
// literal address, in any numeric spelling, nor a refused name (cloud
// metadata names, and localhost unless the Policy allows loopback). A name
// is not resolved there: it is judged again when it is dialed.
//
// NewClient's dialer does the check that matters. It reads the host of every
// connection it is asked for the way CheckURL does; a numeric spelling such
// as 0x7f.1 or 2130706433 is taken as the address it denotes and never
// handed to a resolver as a name; it is judged before a socket exists.
// Names are resolved with Policy.Resolver, and the address actually being
// dialed is judged by Refused in the dialer's Control hook, after the socket
// exists and before connect(2), so a refused address never sees a packet.
// DNS answers that change between check and use (rebinding), redirects, and
// every address a name resolves to all pass through that hook. Proxies from
// the environment (HTTP_PROXY and friends) are never used.
//
// Redirects are checked with CheckURL before they are followed, at most
// MaxRedirects of them; a step from https down to http is refused; and a
// redirect to another origin drops every header whose name suggests a
// credential (Authorization, X-Api-Key, Cookie, ...), which net/http alone
// would forward for a provider's own key header.
//
// Every refusal, from CheckURL, from a redirect or from the dialer, matches
// ErrRefused with errors.Is.
//
// # Refused addresses
//
// Refused judges an address; its reason names the range:
//
//	0.0.0.0/8          "this network"; 0.0.0.0 is the unspecified address
//	10.0.0.0/8         private (RFC 1918)
//	100.64.0.0/10      shared address space, carrier-grade NAT (RFC 6598); holds 100.100.100.200, a cloud metadata address
//	127.0.0.0/8        loopback, allowed only with Policy.AllowLoopback
//	169.254.0.0/16     link-local; holds 169.254.169.254 and 169.254.170.2, cloud metadata addresses
//	172.16.0.0/12      private (RFC 1918)
//	192.0.0.0/24       IETF protocol assignments (DS-Lite, NAT64 discovery): never a public service
//	192.0.2.0/24       documentation (TEST-NET-1): never a real destination
//	192.88.99.0/24     deprecated 6to4 relay anycast (RFC 7526)
//	192.168.0.0/16     private (RFC 1918)
//	198.18.0.0/15      benchmarking (RFC 2544): lab networks
//	198.51.100.0/24    documentation (TEST-NET-2)
//	203.0.113.0/24     documentation (TEST-NET-3)
//	224.0.0.0/4        multicast
//	240.0.0.0/4        reserved; holds 255.255.255.255, the limited broadcast address
//	::                 unspecified
//	::1                loopback, allowed only with Policy.AllowLoopback
//	::/96              IPv4-compatible (deprecated by RFC 4291): refused whatever it embeds
//	::ffff:0:0/96      IPv4-mapped: judged as the IPv4 address it maps, loopback included
//	::ffff:0:0:0/96    IPv4-translated (SIIT): judged by the IPv4 address it embeds
//	64:ff9b::/96       NAT64: judged by the IPv4 address it embeds
//	64:ff9b:1::/48     local-use NAT64 (RFC 8215): a private translator
//	100::/64           discard-only (RFC 6666)
//	2001::/32          Teredo: its embedded addresses are obfuscated and not worth trusting
//	2001:2::/48        benchmarking (RFC 5180)
//	2001:10::/28       deprecated ORCHID, not routable
//	2001:db8::/32      documentation
//	2002::/16          6to4: judged by the IPv4 address it embeds
//	3fff::/20          documentation (RFC 9637)
//	fc00::/7           unique local (private); holds fd00:ec2::254, a cloud metadata address
//	fec0::/10          deprecated site-local (private)
//	fe80::/10          link-local
//	ff00::/8           multicast
//
// An IPv4 address embedded in a NAT64, 6to4, IPv4-translated or
// IPv4-compatible address is judged without AllowLoopback: such a form never
// reaches this host's loopback, so 64:ff9b::7f00:1 is refused even when
// 127.0.0.1 is allowed. AllowLoopback opens 127.0.0.0/8, ::1, their
// IPv4-mapped forms and the name localhost, and nothing else.
//
// # Numeric spellings
//
// A host whose last label is a number is an IPv4 address, read the way
// inet_aton(3) and the WHATWG URL standard read it: one to four parts, each
// decimal, octal with a leading 0, or hexadecimal with 0x, the last part
// filling the remaining bytes, one trailing dot allowed. So 2130706433,
// 017700000001, 0x7f000001, 0x7f.1, 0177.0.0.1, 127.1 and 127.0.0.1. all
// denote 127.0.0.1. A host that looks numeric but does not parse (1.2.3.09,
// 1.2.3.4.5, 256.1) is refused rather than resolved as a name. Hosts must be
// ASCII: a client converts an internationalized name to its punycode form
// before it checks it.
package safehttp
