package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
)

// ErrConfig marks a configuration problem; its message names the variable.
var ErrConfig = errors.New("config")

// Problems collects configuration problems, each naming its variable, so
// that a service reports all of them at once.
type Problems []error

// Add records a problem with variable, as "config: <variable>: <problem>".
func (p *Problems) Add(variable, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%w: %s: %s", ErrConfig, variable, fmt.Sprintf(format, args...)))
}

// Err joins the problems, or is nil when there are none.
func (p Problems) Err() error { return errors.Join(p...) }

// RunFunc runs a service until ctx ends and returns once everything it
// started has stopped.
type RunFunc func(ctx context.Context, log *slog.Logger) error

// Main is the whole of a service's main function and returns its exit code.
// It reads spec (a pointer to the service's Config, which embeds the
// service.Config that common points to) from the AGENTMESH_* environment,
// runs spec's Validate method if it has one, builds a JSON logger on stderr
// at AGENTMESH_LOG_LEVEL and calls run with a context that ends on SIGINT or
// SIGTERM. -h or --help prints the variables instead.
//
// Exit codes: 0 after a clean shutdown or help, 1 when run fails, 2 for a
// bad argument or configuration, reported as "<name>: config: <problem
// naming the variable>".
func Main(name string, spec any, common *service.Config, run RunFunc) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runMain(ctx, name, os.Args[1:], os.Stderr, spec, common, run)
}

func runMain(ctx context.Context, name string, args []string, stderr io.Writer, spec any, common *service.Config, run RunFunc) int {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help":
			if err := service.Usage(spec); err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", name, err)
				return 1
			}
			return 0
		}
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q; it is configured by AGENTMESH_* environment variables (see -h)\n", name, args[0])
		return 2
	}
	log, err := load(name, spec, common, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if err := run(ctx, log); err != nil {
		log.Error("exiting", "err", err)
		return 1
	}
	return 0
}

// load fills spec from the environment, checks it and returns the logger it
// configures.
func load(name string, spec any, common *service.Config, stderr io.Writer) (*slog.Logger, error) {
	if err := LoadConfig(spec, common); err != nil {
		return nil, err
	}
	log, err := NewLogger(stderr, common.LogLevel)
	if err != nil {
		return nil, err
	}
	return log.With("service", name), nil
}

// LoadConfig fills spec (a pointer to a service's Config, which embeds the
// service.Config common points to) from the AGENTMESH_* environment and
// checks it: the common variables, the log level, and spec's Validate
// method if it has one. Every error names the variable.
func LoadConfig(spec any, common *service.Config) error {
	if err := service.Load(spec); err != nil {
		return err // "config: envconfig.Process: assigning AGENTMESH_X to ..."
	}
	var errs []error
	errs = append(errs, CheckCommon(*common))
	if _, err := NewLogger(io.Discard, common.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if v, ok := spec.(interface{ Validate() error }); ok {
		errs = append(errs, v.Validate())
	}
	return errors.Join(errs...)
}

// NewLogger returns a JSON logger on w at level (debug, info, warn, error,
// or a level like "info+2"); a bad level is an ErrConfig naming
// AGENTMESH_LOG_LEVEL.
func NewLogger(w io.Writer, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w: AGENTMESH_LOG_LEVEL: %q is not debug, info, warn or error", ErrConfig, level)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), nil
}

// CheckCommon checks the values of the common configuration that its
// consumers would otherwise reject later without naming the variable.
func CheckCommon(c service.Config) error {
	var bad Problems
	if c.NatsURL == "" {
		bad.Add("AGENTMESH_NATS_URL", "must not be empty")
	}
	if c.Prefix != "" && subject.ValidToken("prefix", c.Prefix) != nil {
		bad.Add("AGENTMESH_PREFIX", "%q is not a subject token [A-Za-z0-9_-]{1,64}", c.Prefix)
	}
	if c.ShutdownTimeout <= 0 {
		bad.Add("AGENTMESH_SHUTDOWN_TIMEOUT", "must be > 0, got %s", c.ShutdownTimeout)
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		bad.Add("AGENTMESH_REPLICAS", "must be 1 to 5, got %d", c.Replicas)
	}
	if c.EventsMaxAge < 2*time.Minute {
		bad.Add("AGENTMESH_EVENTS_MAX_AGE", "must be at least 2m (the events dedupe window), got %s", c.EventsMaxAge)
	}
	if c.WorkQueueMax < 1 {
		bad.Add("AGENTMESH_WORK_QUEUE_MAX", "must be > 0, got %d", c.WorkQueueMax)
	}
	if c.WorkQueueTenantMax < 0 || c.WorkQueueTenantMax > c.WorkQueueMax {
		bad.Add("AGENTMESH_WORK_QUEUE_TENANT_MAX", "must be in [1, AGENTMESH_WORK_QUEUE_MAX %d] (or 0 for the default), got %d", c.WorkQueueMax, c.WorkQueueTenantMax)
	}
	if c.LeaseTTL < time.Second {
		bad.Add("AGENTMESH_LEASE_TTL", "must be at least 1s, got %s", c.LeaseTTL)
	}
	if c.RunRetention < time.Second || c.RunRetention < c.EventsMaxAge {
		bad.Add("AGENTMESH_RUN_RETENTION", "must be at least 1s and at least AGENTMESH_EVENTS_MAX_AGE %s (a run id is free again once its record expired), got %s", c.EventsMaxAge, c.RunRetention)
	}
	return bad.Err()
}
