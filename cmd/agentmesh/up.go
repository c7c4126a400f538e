package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
)

// upOptions are the flags of agentmesh up.
type upOptions struct {
	listen     string // host:port of the NATS client listener; port 0 picks a free one
	dataDir    string // JetStream store
	http       string // metrics and health address; "" disables
	gateway    string // the HTTP gateway's address; "" disables
	fixtureDir string // the fixture adapter's scripts
	profiles   string // profile documents
	workspace  string // root of every CLI run's workspace
	// runnerAdapters are the adapters up's own runner hosts: nil for
	// every profile's, empty (--runner-adapters none) for none.
	runnerAdapters []string
	demo           bool // submit and print one demo run once up
	verbose        bool // log the NATS server's notices and debug output
}

// demoPrompt is the prompt of the --demo run.
const demoPrompt = "hello from agentmesh"

func parseUp(args []string, io *stdio) (upOptions, error) {
	var o upOptions
	fs := newFlagSet("up", "[flags]", io)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:4222", "NATS client address host:port (port 0: any free port)")
	fs.StringVar(&o.dataDir, "data-dir", ".agentmesh", "directory of the JetStream store")
	fs.StringVar(&o.http, "http", service.DefaultHTTPAddr("up"), `address of /metrics, /healthz and /readyz ("" disables)`)
	fs.StringVar(&o.gateway, "gateway", gateway.DefaultAddr, `address of the OpenAI-compatible HTTP gateway, host:port (port 0: any free port; "" disables)`)
	fs.StringVar(&o.fixtureDir, "fixture-dir", "testdata/fixture", "directory of the fixture adapter's scripts")
	fs.StringVar(&o.profiles, "profiles-dir", io.envOr("AGENTMESH_PROFILES_DIR", "profiles"), "directory of the profile documents (*.yaml)")
	fs.StringVar(&o.workspace, "workspace-root", io.envOr("AGENTMESH_WORKSPACE_ROOT", "."), "directory that contains every CLI run's workspace")
	fs.Func("runner-adapters", `comma-separated adapters up's own runner hosts, leaving the others' work to runners of their own (subprocess-runner, remote-runner); "none": it hosts none (default: every profile's)`, func(v string) error {
		o.runnerAdapters = []string{}
		if v == "none" {
			return nil
		}
		for n := range strings.SplitSeq(v, ",") {
			n = strings.TrimSpace(n)
			if n == "" || n == "none" || slices.Contains(o.runnerAdapters, n) {
				return fmt.Errorf("want adapter names, each once, or none; got %q", v)
			}
			o.runnerAdapters = append(o.runnerAdapters, n)
		}
		return nil
	})
	fs.BoolVar(&o.demo, "demo", false, "once up, submit one demo run of the fixture profile and print it")
	fs.BoolVar(&o.verbose, "verbose", false, "log the embedded NATS server's notices and debug output")
	pos, err := parse(fs, args)
	if err != nil {
		return o, err
	}
	if len(pos) > 0 {
		return o, usageErr("up: unexpected argument %q", pos[0])
	}
	if _, _, err := splitListen(o.listen); err != nil {
		return o, usageErr("up: --listen: %v", err)
	}
	if o.dataDir == "" {
		return o, usageErr("up: --data-dir must not be empty")
	}
	if o.gateway != "" {
		if err := (gateway.Config{Addr: o.gateway, OperatorKeys: gateway.ParseKeyIDs(os.Getenv(gateway.OperatorKeysVar))}).Validate(); err != nil {
			return o, usageErr("up: --gateway: %v", err)
		}
	}
	return o, nil
}

// splitListen splits host:port into a host and a NATS server port, where
// port 0 becomes server.RANDOM_PORT.
func splitListen(hostport string) (string, int, error) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not 0 to 65535", p)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

// cmdUp runs the mesh until ctx ends.
func cmdUp(ctx context.Context, args []string, io *stdio) error {
	o, err := parseUp(args, io)
	if err != nil {
		return err
	}
	return up(ctx, o, io, nil)
}

// up starts an embedded JetStream server and every service on it, calls
// ready (if not nil) with the server's client URL once they run, and serves
// until ctx ends. Then it stops the services, closes its connection and
// shuts the server down, in that order. The common AGENTMESH_* variables
// (timeouts, lease TTL, prefix, log level, ...) apply; the flags set the
// NATS and HTTP addresses.
func up(ctx context.Context, o upOptions, io *stdio, ready func(natsURL string)) (err error) {
	var cfg service.Config
	if err := service.LoadConfig(&cfg, &cfg); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	export, err := exports.LoadSettings(os.LookupEnv)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel)) // checked by LoadConfig
	log := slog.New(slog.NewTextHandler(io.stderr, &slog.HandlerOptions{Level: level}))

	s, err := startServer(o, log)
	if err != nil {
		return err
	}
	defer func() {
		s.Shutdown()
		s.WaitForShutdown()
		log.Info("nats server stopped")
	}()
	cfg.NatsURL, cfg.HTTPAddr = s.ClientURL(), o.http
	// The services connect to up's own server, which asks for no
	// credentials: AGENTMESH_NATS_CREDS, _NKEY and _TLS_* (checked by
	// LoadConfig, for the client commands in the same environment) are
	// not for it.
	if cfg.NATSAuth != (service.NATSAuth{}) {
		log.Info("agentmesh up: the NATS credential and TLS variables are left to the client commands; the services connect to the embedded server without them")
		cfg.NATSAuth = service.NATSAuth{}
	}
	infra, err := service.Start(ctx, "agentmesh-up", cfg, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, infra.Close()) }()

	ac := catalog.Dirs{ProfilesDir: o.profiles, FixtureDir: o.fixtureDir, WorkspaceRoot: o.workspace}
	profiles, err := ac.Profiles()
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("up: --profiles-dir: %w", err)}
	}
	if ac.StateDir, err = catalog.ReapProcessGroups(io.getenv("AGENTMESH_RUNNER_STATE_DIR"), log); err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("up: %w: AGENTMESH_RUNNER_STATE_DIR: %w", service.ErrConfig, err)}
	}
	// The CLIs run confined only when asked (AGENTMESH_SANDBOX=on): up
	// runs them under the operator's own HOME, whose CLI configuration a
	// sandbox keeps private. Unconfined, every CLI run's status says so.
	sandboxed := io.getenv("AGENTMESH_SANDBOX") == "on"
	if sandboxed {
		sc := sandboxConfig(io)
		for _, p := range []string{ac.StateDir, o.workspace, o.profiles, o.dataDir} {
			if abs, err := filepath.Abs(p); err == nil && p != "" {
				sc.Hidden = append(sc.Hidden, abs)
			}
		}
		if _, err := sandbox.Check(sc); err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("up: AGENTMESH_SANDBOX=on: %w", err)}
		}
		ac.Sandbox = &sc
	}
	adapters, err := ac.Registry(profiles)
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("up: %w", err)}
	}
	hosted := adapters
	if len(o.runnerAdapters) > 0 {
		if hosted, err = ac.Registry(profiles, o.runnerAdapters...); err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("up: --runner-adapters: %w", err)}
		}
	}
	log.Info("agentmesh up", "nats", s.ClientURL(), "data_dir", o.dataDir, "http", infra.HTTPAddr(),
		"registry_version", profiles.Version(), "profiles", profiles.Names(), "adapters", adapters.Names(),
		"runner_adapters", hosted.Names(), "own_runner", o.runnerAdapters == nil || len(o.runnerAdapters) > 0)

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // ends the demo, also when the mesh fails
	if o.demo {
		wg.Go(func() { demo(ctx, infra.Deps, io, log) })
	}
	if ready != nil {
		ready(s.ClientURL())
	}
	var gw *gateway.Config
	if o.gateway != "" {
		gw = &gateway.Config{Addr: o.gateway, Console: true, OperatorKeys: gateway.ParseKeyIDs(os.Getenv(gateway.OperatorKeysVar))}
	}
	err = mesh.Run(ctx, infra.Deps, profiles, adapters, mesh.Config{
		Gateway:  gw,
		Topology: cfg.Topology(),
		Runner:   runner.Config{MaxActive: catalog.MaxActive(profiles, nil), WorkspaceRoot: o.workspace, Unsandboxed: !sandboxed},
		// --runner-adapters none: every adapter's work is for other runners.
		WithoutRunner:  o.runnerAdapters != nil && len(o.runnerAdapters) == 0,
		RunnerAdapters: hosted,
		Export:         export,
		// Each service on its own connection, as its binary would be.
		Connect: func(name string) (service.Deps, error) {
			nc, js, err := service.Connect(s.ClientURL(), "agentmesh-"+name, log)
			return service.Deps{NC: nc, JS: js}, err
		},
	})
	log.Info("agentmesh shutting down")
	return err
}

// startServer starts the embedded JetStream server and waits until it
// accepts connections.
func startServer(o upOptions, log *slog.Logger) (*server.Server, error) {
	host, port, _ := splitListen(o.listen) // checked by parseUp
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("up: --data-dir: %w", err)}
	}
	dir, err := filepath.Abs(o.dataDir)
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(&server.Options{
		ServerName: "agentmesh",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true, // up handles the signals
		NoLog:      true, // its logging goes through serverLog
	})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	sl := &serverLog{log: log.With("component", "nats-server"), verbose: o.verbose, fatal: make(chan string, 1)}
	s.SetLoggerV2(sl, o.verbose, false, false)
	s.Start()
	for deadline := time.Now().Add(15 * time.Second); !s.ReadyForConnections(100 * time.Millisecond); {
		select {
		case msg := <-sl.fatal:
			s.Shutdown()
			s.WaitForShutdown()
			return nil, fmt.Errorf("nats server: %s", msg)
		default:
		}
		if time.Now().After(deadline) {
			s.Shutdown()
			s.WaitForShutdown()
			return nil, fmt.Errorf("nats server on %s not ready within 15s", o.listen)
		}
	}
	return s, nil
}

// serverLog routes the embedded server's log through slog: warnings and
// errors always, notices and debug output only when verbose. A fatal
// message is also handed to startServer, since the server does not exit.
type serverLog struct {
	log     *slog.Logger
	verbose bool
	fatal   chan string
}

func (l *serverLog) Noticef(format string, v ...any) {
	if l.verbose {
		l.log.Info(fmt.Sprintf(format, v...))
	}
}

func (l *serverLog) Warnf(format string, v ...any)  { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l *serverLog) Errorf(format string, v ...any) { l.log.Error(fmt.Sprintf(format, v...)) }

func (l *serverLog) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error(msg)
	select {
	case l.fatal <- msg:
	default:
	}
}

func (l *serverLog) Debugf(format string, v ...any) {
	if l.verbose {
		l.log.Debug(fmt.Sprintf(format, v...))
	}
}

func (l *serverLog) Tracef(format string, v ...any) {}

// demo submits one run of the fixture profile and prints its events to
// stdout, until the run ends or ctx does.
func demo(ctx context.Context, d service.Deps, io *stdio, log *slog.Logger) {
	c, err := client.New(d.NC, d.Names)
	if err != nil {
		log.Error("demo", "err", err)
		return
	}
	f := runFlags{clientFlags: clientFlags{tenant: "default", principal: "local"}, profile: "fixture"}
	req, err := f.request(demoPrompt)
	if err != nil {
		log.Error("demo", "err", err)
		return
	}
	runID, err := c.Submit(ctx, req)
	if err != nil {
		log.Error("demo: submit", "err", err)
		return
	}
	out := newHumanPrinter(io.stdout, io.color)
	for ev, err := range c.Events(ctx, req.Tenant, runID, 1) {
		if err != nil {
			if ctx.Err() == nil {
				log.Error("demo: follow", "run_id", runID, "err", err)
			}
			return
		}
		if err := out.event(ev); err != nil {
			log.Error("demo: print", "err", err)
			return
		}
		if ev.Terminal() && ev.Status.State == wire.StateSucceeded {
			log.Info("demo run done; the mesh keeps serving (Ctrl-C stops it)", "try",
				fmt.Sprintf("agentmesh run --server %s -p fixture %q", service.ConnectedURL(d.NC), "hi"))
		}
	}
}
