package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/runner/runnerservice"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/serviceconfig"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
)

// UpConfig is the configuration of every service agentmesh up runs, each
// read from the environment as that service's binary reads it
// (LoadUpConfig): the same types, defaults and checks.
type UpConfig struct {
	Router   serviceconfig.Router
	Runner   runnerservice.Config // as subprocess-runner and remote-runner read it
	Sweeper  serviceconfig.Sweeper
	Exporter serviceconfig.Exporter
	Gateway  serviceconfig.Gateway
	// Export is the operator's export settings (exports.LoadSettings),
	// which the router, sweeper and exporter read.
	Export exports.Settings
}

// upTransports are the transports of the adapters up's runner may host:
// every one, where each runner binary hosts some.
var upTransports = []wire.Transport{wire.TransportSubprocess, wire.TransportRemote, wire.TransportInProcess}

// LoadUpConfig reads each service's configuration from the AGENTMESH_*
// environment as its binary does (service.LoadService) and checks it,
// the runner's for a runner that may host every transport (the runner
// binaries differ only in the adapters they may host). Every problem
// names its variable and matches service.ErrConfig.
func LoadUpConfig() (UpConfig, error) {
	var c UpConfig
	runner := runnerservice.Service{Name: runnerservice.Subprocess.Name, Transports: upTransports}.NewSpec()
	err := errors.Join(
		service.LoadService("router", &c.Router, c.Router.Common()),
		service.LoadService(runnerservice.Subprocess.Name, runner, runner.Common()),
		service.LoadService("sweeper", &c.Sweeper, c.Sweeper.Common()),
		service.LoadService("exporter", &c.Exporter, c.Exporter.Common()),
		service.LoadService("gateway", &c.Gateway, c.Gateway.Common()),
	)
	c.Runner = runner.Config
	if err != nil {
		return c, dedupe(err)
	}
	if c.Export, err = exports.LoadSettings(os.LookupEnv); err != nil {
		return c, fmt.Errorf("%w: %w", service.ErrConfig, err)
	}
	return c, nil
}

// dedupe drops repeats from err, a join of the services' errors: each
// service reports a problem of a common variable.
func dedupe(err error) error {
	var out []error
	seen := map[string]bool{}
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok && joined(err, j.Unwrap()) {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if !seen[err.Error()] {
			seen[err.Error()] = true
			out = append(out, err)
		}
	}
	walk(err)
	return errors.Join(out...)
}

// joined reports whether err is errs joined (errors.Join), not an error
// of its own that wraps them.
func joined(err error, errs []error) bool {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return err.Error() == strings.Join(msgs, "\n")
}

// UpOptions are agentmesh up's own settings, its flags: the embedded
// server's and the choice of services. Everything else is UpConfig.
type UpOptions struct {
	// Listen is the host:port of the NATS client listener (port 0: any
	// free port).
	Listen string
	// DataDir is the JetStream store's directory, locked while up runs
	// (LockDataDir).
	DataDir string
	// HTTP is the address of /metrics, /healthz and /readyz ("" disables).
	HTTP string
	// Gateway is the HTTP gateway's address ("" runs no gateway); Console
	// serves the web console on it.
	Gateway string
	Console bool
	// RunnerAdapters are the adapters up's own runner hosts: nil for every
	// profile's, empty for none (no runner).
	RunnerAdapters []string
	// ProfilesDir, FixtureDir and WorkspaceRoot, when set, replace
	// AGENTMESH_PROFILES_DIR, _FIXTURE_DIR and _WORKSPACE_ROOT for every
	// service.
	ProfilesDir, FixtureDir, WorkspaceRoot string
	// Sync is the embedded server's sync policy (ParseSync): "" or
	// "always" (DefaultSync) fsyncs every write before it is
	// acknowledged; a duration is how often the server fsyncs what it has
	// acknowledged (its own default, 2m, is what a power cut can take).
	Sync string
	// Verbose logs the embedded server's notices and debug output.
	Verbose bool
	// Ready, if set, is called with the server's client URL and up's own
	// connection once the services run.
	Ready func(natsURL string, d service.Deps)
}

// ErrDataDirInUse is the error of a data directory another process holds
// (DataDirInUseError).
var ErrDataDirInUse = errors.New("data directory in use")

// DataDirInUseError is a data directory whose lock another process holds.
type DataDirInUseError struct {
	Dir string
	// PID is the holder's, as it wrote it in the lock file (0: unknown,
	// the holder is still starting or wrote none).
	PID int
}

func (e *DataDirInUseError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("%v: %s is held by %s (%s); stop it, or give this one another --data-dir", ErrDataDirInUse, e.Dir, holder, filepath.Join(e.Dir, LockFile))
}

// Unwrap returns ErrDataDirInUse.
func (e *DataDirInUseError) Unwrap() error { return ErrDataDirInUse }

// LockFile is the file in a data directory whose lock (flock) its up
// holds, with the holder's pid in it.
const LockFile = "up.lock"

// LockDataDir takes dir's lock without waiting and writes this process's
// pid in it, or returns a *DataDirInUseError naming the holder's. release
// gives the lock up. The lock is the kernel's: it goes with the process,
// however that ends.
func LockDataDir(dir string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
		return nil, &DataDirInUseError{Dir: dir, PID: pid}
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() {
		_ = f.Truncate(0)
		f.Close()
	}, nil
}

// Up runs the mesh in this process: it locks o.DataDir, starts an
// embedded JetStream server on it and runs every service c configures on
// that server, each on a connection of its own, until ctx ends. Then it
// stops the services, its connection and the server, in that order. The
// services connect to the embedded server, which asks for no credentials,
// so the NATS URL, credential and TLS variables are not for them (they
// stay hidden from every sandboxed run). Problems of the configuration or
// options match service.ErrConfig.
func Up(ctx context.Context, c UpConfig, o UpOptions, log *slog.Logger) (err error) {
	c.override(o)
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("%w: --data-dir: %w", service.ErrConfig, err)
	}
	dir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	release, err := LockDataDir(dir)
	if err != nil {
		return err
	}
	defer release()
	profiles, err := c.Router.Profiles()
	if err != nil {
		return fmt.Errorf("%w: --profiles-dir: %w", service.ErrConfig, err)
	}
	adapters, err := c.Router.Registry(profiles)
	if err != nil {
		return fmt.Errorf("%w: %w", service.ErrConfig, err)
	}
	withoutRunner := o.RunnerAdapters != nil && len(o.RunnerAdapters) == 0
	c.Runner.RunnerAdapters = o.RunnerAdapters
	if o.RunnerAdapters == nil {
		c.Runner.RunnerAdapters = adapters.Names()
	}
	hosted := adapters
	var sandboxGauge prometheus.Gauge
	if !withoutRunner {
		for _, n := range o.RunnerAdapters {
			if _, ok := catalog.Transport(n); !ok {
				return fmt.Errorf("%w: --runner-adapters: unknown adapter %q (known: %s)", service.ErrConfig, n, strings.Join(catalog.Names(), ", "))
			}
		}
		if hosted, sandboxGauge, err = c.Runner.Prepare(upTransports, profiles, log, dir); err != nil {
			return err
		}
	}

	s, err := startServer(o, dir, log)
	if err != nil {
		return err
	}
	defer func() {
		s.Shutdown()
		s.WaitForShutdown()
		log.Info("nats server stopped")
	}()
	common := c.Router.Config
	common.NatsURL, common.HTTPAddr, common.NATSAuth = s.ClientURL(), o.HTTP, service.NATSAuth{}
	infra, err := service.Start(ctx, "agentmesh-up", common, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, infra.Close()) }()
	if sandboxGauge != nil {
		infra.Deps.Metrics.Register(sandboxGauge)
	}
	log.Info("agentmesh up", "nats", s.ClientURL(), "data_dir", dir, "sync", ServerSync(s), "http", infra.HTTPAddr(),
		"registry_version", profiles.Version(), "profiles", profiles.Names(), "adapters", adapters.Names(),
		"runner_adapters", hosted.Names(), "own_runner", !withoutRunner, "sandbox", c.Runner.SandboxMode)
	if o.Ready != nil {
		o.Ready(s.ClientURL(), infra.Deps)
	}
	mc := c.Mesh(o, profiles)
	mc.WithoutRunner, mc.RunnerAdapters = withoutRunner, hosted
	// Each service on its own connection, as its binary would be.
	mc.Connect = func(name string) (service.Deps, error) {
		nc, js, err := service.Connect(s.ClientURL(), "agentmesh-"+name, log)
		return service.Deps{NC: nc, JS: js}, err
	}
	err = Run(ctx, infra.Deps, profiles, adapters, mc)
	log.Info("agentmesh shutting down")
	return err
}

// override puts o's directories, when set, in every service's
// configuration.
func (c *UpConfig) override(o UpOptions) {
	for _, d := range []*catalog.Dirs{&c.Router.Dirs, &c.Runner.Dirs} {
		if o.ProfilesDir != "" {
			d.ProfilesDir = o.ProfilesDir
		}
		if o.FixtureDir != "" {
			d.FixtureDir = o.FixtureDir
		}
		if o.WorkspaceRoot != "" {
			d.WorkspaceRoot = o.WorkspaceRoot
		}
	}
	if o.ProfilesDir != "" {
		c.Sweeper.ProfilesDir, c.Exporter.ProfilesDir, c.Gateway.ProfilesDir = o.ProfilesDir, o.ProfilesDir, o.ProfilesDir
	}
}

// Mesh is the configuration of the services Up runs from c, for
// profiles, with o's choice of gateway: each service's component
// configuration as its binary's run gives it (the runner's hosted
// adapters and connections are Up's).
func (c UpConfig) Mesh(o UpOptions, profiles *profile.Registry) Config {
	mc := Config{
		Topology: c.Router.Topology(),
		Router:   c.Router.Router,
		Runner:   c.Runner.Host(profiles),
		Sweeper:  c.Sweeper.Sweeper,
		Exporter: c.Exporter.Exporter,
		Export:   c.Export,
	}
	if o.Gateway != "" {
		gw := c.Gateway.Gateway
		gw.Addr, gw.Console = o.Gateway, o.Console
		mc.Gateway = &gw
	}
	return mc
}

// DefaultSync is the embedded server's sync policy unless UpOptions.Sync
// says otherwise: every write is on the disk before it is acknowledged.
// Up is one node, so nothing else holds a copy of what a power cut takes
// from the page cache (docs/operating.md, "Sync policy").
const DefaultSync = "always"

// SyncPolicy is a JetStream server's sync setting: Always, or an Interval
// between fsyncs of what the server has acknowledged.
type SyncPolicy struct {
	Always   bool
	Interval time.Duration
}

// String is the policy as ParseSync reads it.
func (p SyncPolicy) String() string {
	if p.Always {
		return "always"
	}
	return p.Interval.String()
}

// ParseSync reads a sync policy as nats-server's sync_interval does:
// "always", or a positive duration ("" is DefaultSync).
func ParseSync(v string) (SyncPolicy, error) {
	if v == "" {
		v = DefaultSync
	}
	if strings.EqualFold(v, "always") {
		return SyncPolicy{Always: true}, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return SyncPolicy{}, fmt.Errorf("want always or a positive duration such as 1s, got %q", v)
	}
	return SyncPolicy{Interval: d}, nil
}

// ServerSync is the sync policy a running server applies, read back from
// its JetStream configuration.
func ServerSync(s *server.Server) SyncPolicy {
	c := s.JetStreamConfig()
	if c == nil {
		return SyncPolicy{}
	}
	return SyncPolicy{Always: c.SyncAlways, Interval: c.SyncInterval}
}

// startServer starts the embedded JetStream server on dir and waits until
// it accepts connections.
func startServer(o UpOptions, dir string, log *slog.Logger) (*server.Server, error) {
	host, port, err := SplitListen(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("%w: --listen: %w", service.ErrConfig, err)
	}
	sync, err := ParseSync(o.Sync)
	if err != nil {
		return nil, fmt.Errorf("%w: --sync: %w", service.ErrConfig, err)
	}
	opts := &server.Options{
		ServerName: "agentmesh",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: sync.Always,
		NoSigs:     true, // up's caller handles the signals
		NoLog:      true, // its logging goes through serverLog
	}
	if !sync.Always {
		opts.SyncInterval = sync.Interval
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	sl := &serverLog{log: log.With("component", "nats-server"), verbose: o.Verbose, fatal: make(chan string, 1)}
	s.SetLoggerV2(sl, o.Verbose, false, false)
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
			return nil, fmt.Errorf("nats server on %s not ready within 15s", o.Listen)
		}
	}
	return s, nil
}

// SplitListen splits host:port into a host and a NATS server port, where
// port 0 becomes server.RANDOM_PORT.
func SplitListen(hostport string) (string, int, error) {
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
