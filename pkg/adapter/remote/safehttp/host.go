package safehttp

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// parseHost reads a URL or dial host (brackets removed). It returns the
// address the host denotes when it is a literal in any spelling (ok true),
// the lower-cased name when it is a name (ok false), or an error wrapping
// ErrRefused when it is neither: a malformed literal, a host that looks
// numeric but does not parse, or a name with characters a DNS name cannot
// hold. Every caller judges a host through this one function, so CheckURL
// and the dialer cannot disagree about what a host means.
func parseHost(host string) (addr netip.Addr, name string, ok bool, err error) {
	if host == "" {
		return netip.Addr{}, "", false, fmt.Errorf("%w: empty host", ErrRefused)
	}
	if strings.Contains(host, ":") {
		// Only an IPv6 literal holds a colon; netip reads zones and
		// embedded dotted quads, case-insensitively.
		a, perr := netip.ParseAddr(host)
		if perr != nil {
			return netip.Addr{}, "", false, fmt.Errorf("%w: malformed IPv6 host %q", ErrRefused, host)
		}
		return a, "", true, nil
	}
	h := strings.ToLower(host)
	a, numeric, perr := parseIPv4(h)
	switch {
	case perr != nil:
		return netip.Addr{}, "", false, fmt.Errorf("%w: host %q looks numeric but is not an address: %v", ErrRefused, host, perr)
	case numeric:
		return a, "", true, nil
	}
	if err := validName(h); err != nil {
		return netip.Addr{}, "", false, fmt.Errorf("%w: host %q: %v", ErrRefused, host, err)
	}
	return netip.Addr{}, strings.TrimSuffix(h, "."), false, nil
}

// parseIPv4 reads s (lower case) as the WHATWG URL standard's IPv4 parser
// and inet_aton(3) do. numeric is false when s is a name: its last label is
// not a number. When the last label is a number, s is an address or it is
// malformed (err non-nil); it is never a name.
func parseIPv4(s string) (addr netip.Addr, numeric bool, err error) {
	parts := strings.Split(s, ".")
	if parts[len(parts)-1] == "" && len(parts) > 1 {
		parts = parts[:len(parts)-1] // one trailing dot, as in a fully qualified name
	}
	last := parts[len(parts)-1]
	if !isNumberLabel(last) {
		return netip.Addr{}, false, nil
	}
	if len(parts) > 4 {
		return netip.Addr{}, true, fmt.Errorf("%d parts", len(parts))
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, true, fmt.Errorf("part %q is not a number", p)
		}
		nums[i] = n
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, true, fmt.Errorf("part %d exceeds 255", i+1)
		}
		v |= n << (8 * (3 - i))
	}
	// The last part fills the bytes the others left: 4 of them alone,
	// 3 after one part, and so on.
	n := nums[len(nums)-1]
	if n >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, true, fmt.Errorf("last part exceeds its %d bytes", 5-len(nums))
	}
	v |= n
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true, nil
}

// isNumberLabel reports whether a label is a number for the WHATWG "ends in
// a number" rule: all decimal digits (even ones that are not valid octal,
// such as 09), or a valid hexadecimal or octal number.
func isNumberLabel(l string) bool {
	if l == "" {
		return false
	}
	if strings.Trim(l, "0123456789") == "" {
		return true
	}
	_, ok := parseIPv4Number(l)
	return ok
}

// parseIPv4Number reads one part: 0x or 0X then hexadecimal (possibly
// empty, meaning 0), a leading 0 then octal, otherwise decimal.
func parseIPv4Number(p string) (uint64, bool) {
	base := 10
	switch {
	case p == "":
		return 0, false
	case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
		p, base = p[2:], 16
		if p == "" {
			return 0, true
		}
	case len(p) > 1 && p[0] == '0':
		p, base = p[1:], 8
	}
	for _, c := range p {
		// strconv would accept a sign or underscores; the standard does not.
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(p, base, 64)
	return n, err == nil
}

// validName accepts what a resolver may be handed: ASCII letters, digits,
// hyphens and underscores in non-empty labels of at most 63 bytes, at most
// 253 bytes in all, and one optional trailing dot. Anything else (non-ASCII,
// percent signs, empty labels) is refused so that no resolver or IDNA
// mapping can read the name differently from us.
func validName(h string) error {
	h = strings.TrimSuffix(h, ".")
	if len(h) > 253 {
		return fmt.Errorf("name longer than 253 bytes")
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("empty or overlong label")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if c >= 0x80 {
				return fmt.Errorf("non-ASCII name (use its punycode form)")
			}
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("character %q not allowed in a name", c)
			}
		}
	}
	return nil
}

// refusedNames are names refused whatever they resolve to: cloud instance
// metadata services (they resolve to link-local addresses the dialer
// refuses anyway; refusing the name says why before any lookup).
var refusedNames = map[string]string{
	"metadata":                   "cloud metadata name, GCE short form",
	"metadata.google.internal":   "cloud metadata name, GCE",
	"metadata.goog":              "cloud metadata name, GCE",
	"instance-data":              "cloud metadata name, EC2",
	"instance-data.ec2.internal": "cloud metadata name, EC2",
	"metadata.tencentyun.com":    "cloud metadata name, Tencent Cloud",
}

// refusedName judges a name from parseHost (lower case, no trailing dot).
func refusedName(name string, p Policy) (bool, string) {
	if why, ok := refusedNames[name]; ok {
		return true, why
	}
	if !p.AllowLoopback && (name == "localhost" || strings.HasSuffix(name, ".localhost")) {
		return true, "loopback name, RFC 6761"
	}
	return false, ""
}
