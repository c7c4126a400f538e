package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultAddr is where the gateway listens unless configured otherwise.
const DefaultAddr = "127.0.0.1:8080"

// DefaultMaxBodyBytes bounds a request body unless configured otherwise.
const DefaultMaxBodyBytes = 1 << 20

// MinMaxBodyBytes is the smallest body bound Config accepts.
const MinMaxBodyBytes = 1 << 10

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("invalid gateway config")

// Config configures a gateway. The gateway service reads it from its
// environment (AGENTMESH_GATEWAY_ADDR, AGENTMESH_GATEWAY_MAX_BODY_BYTES,
// AGENTMESH_GATEWAY_TLS_CERT, AGENTMESH_GATEWAY_TLS_KEY,
// AGENTMESH_GATEWAY_CONSOLE, AGENTMESH_GATEWAY_OPERATOR_KEYS).
type Config struct {
	// Addr is the host:port the HTTP API is served on (default
	// DefaultAddr; port 0 picks a free one).
	Addr string `desc:"host:port of the OpenAI-compatible HTTP API (default 127.0.0.1:8080)"`
	// MaxBodyBytes bounds a request body: a larger one is refused with a
	// 413 (default DefaultMaxBodyBytes, at least MinMaxBodyBytes).
	MaxBodyBytes int64 `split_words:"true" desc:"largest request body accepted, in bytes (default 1048576)"`
	// TLSCert and TLSKey, both set, are the PEM certificate (chain) and
	// key the API is served with over HTTPS; neither set, it is plain
	// HTTP (put it behind a TLS proxy, or on loopback only).
	TLSCert string `split_words:"true" desc:"PEM certificate file: with AGENTMESH_GATEWAY_TLS_KEY the API is served over HTTPS"`
	TLSKey  string `split_words:"true" desc:"PEM key file of AGENTMESH_GATEWAY_TLS_CERT"`
	// Console serves the console at /console (console.go): Open enables
	// it (EnableConsole). It reads more of the mesh than the API does
	// (a watch of the runs bucket, the ledger, the exports' and
	// artifacts' records, the runners' micro info and stats, the work
	// consumers' info): the gateway's NATS user needs those rights.
	Console bool `desc:"serve the web console at /console on the API's listener (the gateway's NATS user needs the console's read rights)"`
	// OperatorKeys are the ids (Key.ID, as agentmesh keys list shows
	// them) of the API keys that are operators in the console (/console):
	// they see and cancel every tenant's runs, spend and artifacts, and
	// the runner pools. Every other key sees its own tenant only. An
	// operator key is still its tenant's key in the API (/v1).
	OperatorKeys []string `split_words:"true" desc:"comma-separated ids of the API keys (agentmesh keys list) that are console operators: every tenant's runs, spend and artifacts"`
	// ShutdownTimeout bounds how long Run waits for requests in flight
	// once its context ends (default 10s).
	ShutdownTimeout time.Duration `ignored:"true"`
}

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
}

// Validate reports every bad field of c, defaults filled in, each a
// *service.FieldError wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	c.setDefaults()
	bad := service.FieldErrors{Sentinel: ErrInvalidConfig}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		bad.Add("Addr", "must be host:port, got %q: %v", c.Addr, err)
	}
	if c.MaxBodyBytes < MinMaxBodyBytes {
		bad.Add("MaxBodyBytes", "must be at least %d, got %d", MinMaxBodyBytes, c.MaxBodyBytes)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		field := "TLSKey"
		if c.TLSCert == "" {
			field = "TLSCert"
		}
		bad.Add(field, "must be set with the other of the TLS certificate and key, or neither")
	}
	if c.ShutdownTimeout < 0 {
		bad.Add("ShutdownTimeout", "must be >= 0, got %s", c.ShutdownTimeout)
	}
	for _, id := range c.OperatorKeys {
		if !validKeyID(id) {
			bad.Add("OperatorKeys", "%q is not a key id: want the 12 hex digits agentmesh keys list shows", id)
		}
	}
	return bad.Err()
}

// Gateway serves the HTTP API. It keeps no state of its own between
// requests: runs live in the mesh, keys in their bucket.
type Gateway struct {
	cfg      Config
	client   *client.Client
	keys     *Keys
	turns    *Turns
	profiles *profile.Registry
	log      *slog.Logger
	mux      *http.ServeMux
	// health, when set (Open), gets the gateway's readiness once it
	// listens: its NATS connection's (conn).
	health *service.Health
	conn   func() error
	nc     *nats.Conn  // set by Open: the gateway registers with micro on it
	tls    *tls.Config // nil: plain HTTP
	// metrics are the service's (Open), or New's own, unexported.
	metrics *service.Metrics
	// artifacts, when set (SetArtifacts, Open), serves runs' artifacts.
	artifacts *artifacts.Store
	// console, once EnableConsole is done, serves /console.
	console atomic.Pointer[console]
}

// New returns a gateway that submits runs through c, authenticates with
// keys, keeps the turns of its callers' conversations in turns and
// resolves models with profiles (the same documents the routers load, so
// a model it accepts is one they route).
func New(c *client.Client, keys *Keys, turns *Turns, profiles *profile.Registry, log *slog.Logger, cfg Config) (*Gateway, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, client: c, keys: keys, turns: turns, profiles: profiles, log: log, mux: http.NewServeMux(),
		metrics: service.NewMetrics(prometheus.NewRegistry())}
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, &service.FieldError{Err: ErrInvalidConfig, Field: "TLSCert", Problem: fmt.Sprintf("cannot load the certificate and key: %v", err)}
		}
		g.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	g.route("POST /v1/chat/completions", g.chatCompletions)
	g.route("POST /v1/responses", g.responses)
	g.route("GET /v1/models", g.models)
	g.route("POST /v1/runs", g.submitRun)
	g.route("GET /v1/runs/{id}", g.getRun)
	g.route("GET /v1/runs/{id}/events", g.runEvents)
	g.route("POST /v1/runs/{id}/cancel", g.cancelRun)
	g.route("POST /v1/runs/{id}/input", g.sessionInput)
	g.route("POST /v1/runs/{id}/permissions/{request}", g.answerPermission)
	g.route("GET /v1/runs/{id}/artifacts", g.listArtifacts)
	g.route("GET /v1/runs/{id}/artifacts/{name}", g.getArtifact)
	g.route("GET /v1/conversations/{id}/history", g.conversationHistory)
	g.consoleRoutes()
	g.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, apiErr(http.StatusNotFound, typeNotFound, "unknown_url", "", "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return g, nil
}

// Open is New on a service's deps: a client on d's connection and the
// key and turn stores of d's deployment. While JetStream is not ready (a
// cluster forming or recovering) it waits, logging that (jsretry.Await),
// until ctx ends.
func Open(ctx context.Context, d service.Deps, profiles *profile.Registry, cfg Config) (*Gateway, error) {
	type stores struct {
		keys      *Keys
		turns     *Turns
		artifacts *artifacts.Store
	}
	st, err := jsretry.Await(ctx, d.NC, d.Log, "gateway", func(ctx context.Context) (st stores, err error) {
		if st.keys, err = OpenKeys(ctx, d.JS, d.Names); err != nil {
			return st, err
		}
		if st.turns, err = OpenTurns(ctx, d.JS, d.Names); err != nil {
			return st, err
		}
		st.artifacts, err = artifacts.Open(ctx, d.JS, d.Names)
		return st, err
	})
	if err != nil {
		return nil, err
	}
	c, err := client.New(d.NC, d.Names)
	if err != nil {
		return nil, err
	}
	g, err := New(c, st.keys, st.turns, profiles, d.Log, cfg)
	if err != nil {
		return nil, err
	}
	g.SetArtifacts(st.artifacts)
	if cfg.Console {
		if err := g.EnableConsole(ctx, d.NC, d.JS, d.Names); err != nil {
			// Without the console's rights the API still serves.
			d.Log.Warn("gateway: no console", "err", err)
		}
	}
	g.health, g.conn, g.nc = d.Health, service.ConnCheck(d.NC), d.NC
	if d.Metrics != nil {
		g.metrics = d.Metrics
	}
	g.metrics.Register(g.metrics.GatewayRequests, g.metrics.GatewayDuration, g.metrics.GatewayFirstToken)
	return g, nil
}

// Handler is the gateway's HTTP handler; safe for concurrent use.
func (g *Gateway) Handler() http.Handler { return g.mux }

// Run listens on Config.Addr and serves until ctx ends (see Serve).
func (g *Gateway) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", g.cfg.Addr)
	if err != nil {
		return fmt.Errorf("gateway: listen on %s: %w", g.cfg.Addr, err)
	}
	return g.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then shuts the server down, waiting
// up to Config.ShutdownTimeout for requests in flight (a stream still
// open past it is cut). It closes ln and returns once every request has
// returned.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           g.mux,
		TLSConfig:         g.tls,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	if g.nc != nil {
		svc, err := service.Register(g.nc, "agentmesh-gateway", "serves the OpenAI-compatible HTTP API and the runs API",
			map[string]string{"addr": ln.Addr().String(), "tls": fmt.Sprint(g.tls != nil), "registry_version": g.profiles.Version()})
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("gateway: %w", err)
		}
		defer func() { _ = svc.Stop() }()
	}
	g.log.Info("gateway listening", "addr", ln.Addr().String(), "tls", g.tls != nil)
	if g.health != nil {
		g.health.Add("gateway", g.conn)
	}
	done := make(chan error, 1)
	go func() {
		if g.tls != nil {
			done <- srv.ServeTLS(ln, "", "")
			return
		}
		done <- srv.Serve(ln)
	}()
	select {
	case err := <-done:
		return fmt.Errorf("gateway: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("gateway: shut down: %w", err), srv.Close())
	}
	<-done
	return err
}

// caller is who a request authenticated as, and the request's endpoint
// and arrival (for the metrics).
type caller struct {
	Key
	endpoint string
	arrived  time.Time
}

// route serves pattern with h, authenticated (authed) and counted: every
// answer in agentmesh_gateway_requests_total and the request duration.
func (g *Gateway) route(pattern string, h func(w http.ResponseWriter, r *http.Request, who caller)) {
	g.mux.Handle(pattern, g.counted(pattern, g.authed(pattern, h)))
}

// counted is h counted in the request metrics under pattern, its
// arrival in the request's context (arrivedAt).
func (g *Gateway) counted(pattern string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), arrivedKey{}, arrived)))
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		g.metrics.GatewayRequests.WithLabelValues(pattern, strconv.Itoa(code)).Inc()
		g.metrics.GatewayDuration.WithLabelValues(pattern).Observe(time.Since(arrived).Seconds())
	})
}

// statusWriter notes the status code a handler answered with. It keeps
// the stream's flushes (Flush, and Unwrap for http.ResponseController).
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type arrivedKey struct{}

// arrivedAt is when the request reached route (now, if it did not).
func arrivedAt(r *http.Request) time.Time {
	if t, ok := r.Context().Value(arrivedKey{}).(time.Time); ok {
		return t
	}
	return time.Now()
}

// authed wraps h with authentication and the body bound. The key is
// never logged: a refusal logs nothing of it, an accepted request only
// its id.
func (g *Gateway) authed(endpoint string, h func(w http.ResponseWriter, r *http.Request, who caller)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
			writeError(w, apiErr(http.StatusUnauthorized, typeInvalidRequest, "missing_api_key", "",
				"no API key: send it as the header \"Authorization: Bearer <key>\" (agentmesh keys create makes one)"))
			return
		}
		k, err := g.keys.Lookup(r.Context(), strings.TrimSpace(key))
		switch {
		case errors.Is(err, ErrBadKey):
			writeError(w, apiErr(http.StatusUnauthorized, typeInvalidRequest, "invalid_api_key", "", "incorrect API key provided"))
			return
		case err != nil:
			g.log.Warn("gateway: api key lookup failed", "err", err)
			writeError(w, apiErr(http.StatusServiceUnavailable, typeUnavailable, "mesh_unavailable", "", "the API keys could not be read; try again"))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes)
		h(w, r, caller{Key: k, endpoint: endpoint, arrived: arrivedAt(r)})
	})
}

// models answers GET /v1/models: every profile, by name.
func (g *Gateway) models(w http.ResponseWriter, _ *http.Request, _ caller) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, name := range g.profiles.Names() {
		p, _ := g.profiles.Get(name)
		out.Data = append(out.Data, model{ID: name, Object: "model", OwnedBy: p.Adapter})
	}
	writeJSON(w, http.StatusOK, out, nil)
}
