package safehttp

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// guardHits counts dials the test guard vetoed: addresses the policy let
// through that are not loopback. The tests never send a packet anywhere
// but loopback, even if the policy under test had a bug.
var guardHits atomic.Int64

// refusedDials records the addresses the dialer refused (tests that read
// it do not run in parallel).
var (
	refusedMu    sync.Mutex
	refusedDials []netip.AddrPort
)

func TestMain(m *testing.M) {
	dialGuard = func(ap netip.AddrPort) error {
		if ap.Addr().Unmap().IsLoopback() {
			return nil
		}
		guardHits.Add(1)
		return fmt.Errorf("test guard: will not dial non-loopback %s", ap)
	}
	onRefused = func(ap netip.AddrPort) {
		refusedMu.Lock()
		defer refusedMu.Unlock()
		refusedDials = append(refusedDials, ap)
	}
	goleak.VerifyTestMain(m)
}

// watchDials fails the test if the guard vetoes a dial during it, and
// returns a function reporting the addresses refused since the call.
func watchDials(t *testing.T) func() []netip.AddrPort {
	t.Helper()
	hits := guardHits.Load()
	refusedMu.Lock()
	refusedDials = nil
	refusedMu.Unlock()
	t.Cleanup(func() {
		if got := guardHits.Load() - hits; got != 0 {
			t.Errorf("%d dial(s) to non-loopback addresses got past the policy", got)
		}
	})
	return func() []netip.AddrPort {
		refusedMu.Lock()
		defer refusedMu.Unlock()
		return slices.Clone(refusedDials)
	}
}

// countingServer is an httptest server on 127.0.0.1 that counts the
// connections it accepts and the requests it serves.
type countingServer struct {
	*httptest.Server
	conns, reqs atomic.Int64
}

func newCountingServer(t *testing.T, h http.Handler) *countingServer {
	t.Helper()
	cs := &countingServer{}
	if h == nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello") })
	}
	cs.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.reqs.Add(1)
		h.ServeHTTP(w, r)
	}))
	cs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			cs.conns.Add(1)
		}
	}
	cs.Start()
	t.Cleanup(cs.Close)
	return cs
}

// port is the server's port.
func (cs *countingServer) port() string {
	return fmt.Sprint(netip.MustParseAddrPort(cs.Listener.Addr().String()).Port())
}
