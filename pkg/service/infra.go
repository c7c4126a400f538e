package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/service/telemetry"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Infra is what a service process runs on: its NATS connection, the
// topology, its metrics registry and its HTTP server. Build it with Start
// and release it with Close.
type Infra struct {
	// Deps are handed to the service's components.
	Deps Deps
	// Registry holds the mesh metrics and the Go and process collectors.
	Registry *prometheus.Registry

	cfg    Config
	http   *HTTPServer   // nil when HTTP is disabled
	closed chan struct{} // closed when the connection is closed

	once     sync.Once
	closeErr error
}

// Start sets up tracing from the OTEL_* environment (telemetry.Setup: off
// unless it configures an exporter), connects to cfg.NatsURL as client
// name, waiting while no server is reachable, ensures the topology,
// waiting while the cluster forms or recovers (topology.Ensure, logged as
// waiting for JetStream), registers the metrics and, unless
// cfg.HTTPAddr is empty, serves /metrics, /healthz and /readyz on it.
// With more than one server in cfg.NatsURL it watches the connection's
// JetStream (Deps.Quorum, QuorumWatch) unless cfg.NatsFailoverAfter is 0.
// Readiness is what the components add to Deps.Health. On error, whatever
// was started has been released. It blocks until all of that is done or
// ctx ends.
func Start(ctx context.Context, name string, cfg Config, log *slog.Logger) (_ *Infra, err error) {
	tracing, err := telemetry.Setup(ctx, name, log)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer func() {
		if err != nil {
			_ = tracing.Shutdown(ctx)
		}
	}()
	nc, js, err := connect(ctx, cfg, name, log)
	if err != nil {
		return nil, err
	}
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	topo := cfg.Topology()
	topo.Log = log
	if err := topology.Ensure(ctx, js, topo); err != nil {
		nc.Close()
		return nil, fmt.Errorf("ensure topology: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	i := &Infra{
		Deps: Deps{
			NC: nc, JS: js, Names: cfg.Topology().Names, Log: log,
			Metrics: NewMetrics(reg), Health: &Health{},
			Tracing: tracing,
		},
		Registry: reg,
		cfg:      cfg,
		closed:   closed,
	}
	if cfg.NatsFailoverAfter > 0 && ServerCount(cfg.NatsURL) > 1 {
		i.Deps.Quorum = WatchQuorum(nc, js, log, i.Deps.Metrics, cfg.NatsFailoverAfter)
	}
	if cfg.HTTPAddr == "" {
		log.Info("http disabled")
		return i, nil
	}
	if i.http, err = ServeHTTP(cfg.HTTPAddr, reg, i.Deps.Health, log); err != nil {
		i.Deps.Quorum.Stop()
		nc.Close()
		return nil, err
	}
	return i, nil
}

// HTTPAddr is the address /metrics is served on, or "" when disabled.
func (i *Infra) HTTPAddr() string {
	if i.http == nil {
		return ""
	}
	return i.http.Addr()
}

// Close stops the HTTP server, drains and closes the connection, then
// exports the spans still buffered, all within cfg.ShutdownTimeout; past
// it the connection is closed at once. It
// blocks until done, is idempotent and returns the same error every time.
// Call it after the components built on Deps have returned.
func (i *Infra) Close() error {
	i.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), i.cfg.ShutdownTimeout)
		defer cancel()
		var errs []error
		i.Deps.Quorum.Stop() // no forced reconnect while draining
		if i.http != nil {
			if err := i.http.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("shut down http: %w", err))
			}
		}
		if err := i.Deps.NC.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, fmt.Errorf("drain nats connection: %w", err))
			i.Deps.NC.Close()
		}
		select {
		case <-i.closed:
		case <-ctx.Done():
			i.Deps.NC.Close()
			errs = append(errs, fmt.Errorf("drain nats connection: %w", ctx.Err()))
		}
		if err := i.Deps.Tracing.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
		i.closeErr = errors.Join(errs...)
	})
	return i.closeErr
}

// connect is ConnectConfig that waits while no server is reachable (a
// node not started yet, or restarting): that is logged as "waiting for the
// NATS server", at once and then at most every jsretry.WaitLogEvery
// (jsretry.Waiting), and dialled again with backoff until ctx ends. Any
// other failure, such as credentials or TLS refused, is returned at once.
func connect(ctx context.Context, cfg Config, name string, log *slog.Logger) (*nats.Conn, jetstream.JetStream, error) {
	w := jsretry.Waiting{Log: log, Msg: "waiting for the NATS server", Attrs: []any{"url", RedactURL(cfg.NatsURL)}}
	b := jsretry.StartBackoff()
	for {
		nc, js, err := ConnectConfig(cfg, name, log)
		switch {
		case err == nil:
			w.Done()
			return nc, js, nil
		case !unreachable(err):
			return nil, nil, err
		}
		w.Note(err)
		if werr := b.Wait(ctx); werr != nil {
			return nil, nil, fmt.Errorf("%w; last attempt: %w", werr, err)
		}
	}
}

// unreachable reports whether err, of nats.Connect, is that no server
// answered: every one refused the connection or could not be dialled, or
// none sent its greeting in time.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) ||
		(errors.As(err, &op) && op.Op == "dial")
}
