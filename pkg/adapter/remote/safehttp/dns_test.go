package safehttp

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// fakeDNS is an in-process DNS server on loopback UDP answering A and
// AAAA queries from a script, so tests resolve names without any real
// lookup. Each lookup of a name takes the next answer of its script (the
// last one repeats): a script of a public then a private answer is DNS
// rebinding.
type fakeDNS struct {
	pc   net.PacketConn
	done chan struct{}

	mu      sync.Mutex
	scripts map[string][][]netip.Addr
	asked   map[string]int // name/qtype -> queries answered
	total   int
}

const (
	typeA    = 1
	typeAAAA = 28
)

func newFakeDNS(t *testing.T) *fakeDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fake dns: %v", err)
	}
	f := &fakeDNS{pc: pc, done: make(chan struct{}), scripts: map[string][][]netip.Addr{}, asked: map[string]int{}}
	go f.serve()
	t.Cleanup(func() { pc.Close(); <-f.done })
	return f
}

// answer scripts name's successive lookups.
func (f *fakeDNS) answer(name string, lookups ...[]netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scripts[name] = lookups
}

// queries reports how many queries of qtype for name were answered; an
// empty name counts every query of any type.
func (f *fakeDNS) queries(name string, qtype uint16) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == "" {
		return f.total
	}
	return f.asked[key(name, qtype)]
}

func key(name string, qtype uint16) string {
	return fmt.Sprintf("%s/%d", name, qtype)
}

// resolver is a pure-Go resolver whose every DNS exchange goes to f.
func (f *fakeDNS) resolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", f.pc.LocalAddr().String())
		},
	}
}

func (f *fakeDNS) serve() {
	defer close(f.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := f.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := f.reply(buf[:n]); resp != nil {
			_, _ = f.pc.WriteTo(resp, from)
		}
	}
}

// reply answers one query: the scripted addresses of the query's type, or
// NXDOMAIN for a name with no script.
func (f *fakeDNS) reply(q []byte) []byte {
	if len(q) < 12 {
		return nil
	}
	i := 12
	var labels []string
	for {
		if i >= len(q) {
			return nil
		}
		l := int(q[i])
		i++
		if l == 0 {
			break
		}
		if l&0xc0 != 0 || i+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i:i+l]))
		i += l
	}
	if i+4 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i:])
	question := q[12 : i+4]
	name := strings.ToLower(strings.Join(labels, "."))

	f.mu.Lock()
	f.total++
	script, known := f.scripts[name]
	var addrs []netip.Addr
	if known && len(script) > 0 {
		k := key(name, qtype)
		n := min(f.asked[k], len(script)-1)
		f.asked[k]++
		for _, a := range script[n] {
			if (qtype == typeA && a.Is4()) || (qtype == typeAAAA && a.Is6()) {
				addrs = append(addrs, a)
			}
		}
	}
	f.mu.Unlock()

	resp := make([]byte, 12, 512)
	copy(resp, q[:2])                         // id
	flags := uint16(0x8000 | 0x0400 | 0x0080) // response, authoritative, recursion available
	flags |= uint16(q[2]&0x01) << 8           // recursion desired, echoed
	if !known {
		flags |= 3 // NXDOMAIN
	}
	binary.BigEndian.PutUint16(resp[2:], flags)
	binary.BigEndian.PutUint16(resp[4:], 1)
	binary.BigEndian.PutUint16(resp[6:], uint16(len(addrs)))
	resp = append(resp, question...)
	for _, a := range addrs {
		resp = append(resp, 0xc0, 0x0c) // the question's name
		resp = binary.BigEndian.AppendUint16(resp, qtype)
		resp = binary.BigEndian.AppendUint16(resp, 1) // class IN
		resp = binary.BigEndian.AppendUint32(resp, 0) // TTL
		b := a.AsSlice()
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(b)))
		resp = append(resp, b...)
	}
	return resp
}
