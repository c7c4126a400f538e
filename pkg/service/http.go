package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Health aggregates readiness checks. /healthz answers 200 while the process
// serves HTTP; /readyz answers 200 only when every check passes. Safe for
// concurrent use.
type Health struct {
	mu     sync.Mutex
	checks map[string]func() error
}

// Add registers a named readiness check, replacing one of the same name.
func (h *Health) Add(name string, check func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.checks == nil {
		h.checks = map[string]func() error{}
	}
	h.checks[name] = check
}

// Ready runs every check and joins their failures.
func (h *Health) Ready() error {
	h.mu.Lock()
	names := make([]string, 0, len(h.checks))
	for n := range h.checks {
		names = append(names, n)
	}
	checks := h.checks
	h.mu.Unlock()
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		if err := checks[n](); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
		}
	}
	if len(names) == 0 {
		errs = append(errs, errors.New("no service started"))
	}
	return errors.Join(errs...)
}

// DefaultHTTPPorts are the services' default ports of /metrics, /healthz
// and /readyz, by the name their main passes to Main, bound to 127.0.0.1
// when AGENTMESH_HTTP_ADDR is unset: one block, so that a host running
// one of each needs no configuration. `agentmesh up`, which serves all of
// them on one registry, has the next (its --http flag).
var DefaultHTTPPorts = map[string]int{
	"router":            9460,
	"subprocess-runner": 9461,
	"remote-runner":     9462,
	"sweeper":           9463,
	"exporter":          9464,
	"up":                9465,
	"gateway":           9466,
}

// DefaultHTTPAddr is the HTTP address of the service named name when
// AGENTMESH_HTTP_ADDR is unset: 127.0.0.1 and its DefaultHTTPPorts port,
// or a random port for a name without one.
func DefaultHTTPAddr(name string) string {
	return fmt.Sprintf("127.0.0.1:%d", DefaultHTTPPorts[name])
}

// HTTPServer serves /metrics, /healthz and /readyz.
type HTTPServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// ServeHTTP listens on addr and serves in the background until Shutdown.
func ServeHTTP(addr string, g prometheus.Gatherer, h *Health, log *slog.Logger) (*HTTPServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := h.Ready(); err != nil {
			http.Error(w, strings.ReplaceAll(err.Error(), "\n", "; "), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	s := &HTTPServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, done: make(chan error, 1)}
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	log.Info("http listening", "addr", ln.Addr().String())
	return s, nil
}

// Addr is the address the server listens on.
func (s *HTTPServer) Addr() string { return s.ln.Addr().String() }

// Shutdown stops the server and waits for its goroutine.
func (s *HTTPServer) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	return errors.Join(err, <-s.done)
}
