package service

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/kelseyhightower/envconfig"
)

// Config is the environment configuration common to every service, read
// with the prefix AGENTMESH (AGENTMESH_NATS_URL, AGENTMESH_HTTP_ADDR, ...).
type Config struct {
	// Names come from split_words, never an envconfig tag: a tag would
	// also read the unprefixed variable (NATS_URL) when AGENTMESH_NATS_URL
	// is unset.
	NatsURL string `split_words:"true" default:"nats://127.0.0.1:4222"`
	// HTTPAddr has no default here: unset, Main sets the service's own
	// (DefaultHTTPAddr); set empty, HTTP is disabled.
	HTTPAddr        string        `split_words:"true" desc:"address of /metrics, /healthz and /readyz; empty disables (default: 127.0.0.1 and the service's port: router 9460, subprocess-runner 9461, remote-runner 9462, sweeper 9463, exporter 9464, gateway 9466)"`
	Prefix          string        `split_words:"true"`
	ShutdownTimeout time.Duration `split_words:"true" default:"20s"`
	Replicas        int           `split_words:"true" default:"1"`
	EventsMaxAge    time.Duration `split_words:"true" default:"24h"`
	WorkQueueMax    int64         `split_words:"true" default:"1024"`
	// WorkQueueTenantMax is one tenant's queue per adapter (0: 256, or
	// WorkQueueMax if smaller).
	WorkQueueTenantMax int64         `split_words:"true"`
	LeaseTTL           time.Duration `split_words:"true" default:"30s"`
	// RunRetention is how long an ended run's record is kept (at least
	// EventsMaxAge).
	RunRetention time.Duration `split_words:"true" default:"168h"`
	// ArtifactRetention is how long runs' artifacts, pushed workspace
	// snapshots and conversations' heads are kept (topology.Config).
	ArtifactRetention time.Duration `split_words:"true" default:"168h" desc:"how long runs' artifacts, pushed workspace snapshots and conversation heads are kept (at least 1m)"`
	LogLevel          string        `split_words:"true" default:"info"`
	// NatsFailoverAfter is QuorumWatch's threshold.
	NatsFailoverAfter time.Duration `split_words:"true" default:"3s" desc:"with more than one server in AGENTMESH_NATS_URL: how long JetStream may go unanswered on the connected server, while connected, before the service reconnects to another (a server cut off from its cluster keeps its clients); 0 disables"`

	// NATSAuth names the files of the connection's credentials and TLS,
	// AGENTMESH_NATS_CREDS ... AGENTMESH_NATS_TLS_SERVER_NAME (read at
	// start-up: ConnectConfig, LoadConfig).
	NATSAuth
}

// Topology is the topology configuration c describes.
func (c Config) Topology() topology.Config {
	return topology.Config{
		Names:              subject.Names{Prefix: c.Prefix},
		Replicas:           c.Replicas,
		EventsMaxAge:       c.EventsMaxAge,
		WorkQueueMax:       c.WorkQueueMax,
		WorkQueueTenantMax: c.WorkQueueTenantMax,
		LeaseTTL:           c.LeaseTTL,
		RunRetention:       c.RunRetention,
		ArtifactRetention:  c.ArtifactRetention,
	}
}

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

// FieldError is a bad value in one field of a component's Config (a
// router's, a runner's, ...). The component's Validate returns it, and
// LoadConfig reports it under the environment variable that sets the field,
// so that a component states its defaults and checks once and a service
// reading it from the environment still names the variable.
type FieldError struct {
	// Err is the component's sentinel, such as router.ErrInvalidConfig.
	Err error
	// Field is the Go name of the field, such as "AckWait".
	Field string
	// Problem says what is wrong, such as "must be at least 1s, got 10ms".
	Problem string
}

// FieldErrors collects the FieldErrors of one Config, so that its
// Validate reports every bad field at once.
type FieldErrors struct {
	// Sentinel is what every FieldError wraps.
	Sentinel error
	errs     []error
}

// Add records that field's value has problem (format and args).
func (f *FieldErrors) Add(field, format string, args ...any) {
	f.errs = append(f.errs, &FieldError{Err: f.Sentinel, Field: field, Problem: fmt.Sprintf(format, args...)})
}

// Err joins the FieldErrors, or is nil when there are none.
func (f *FieldErrors) Err() error { return errors.Join(f.errs...) }

func (e *FieldError) Error() string { return fmt.Sprintf("%v: %s %s", e.Err, e.Field, e.Problem) }

// Unwrap returns the component's sentinel.
func (e *FieldError) Unwrap() error { return e.Err }

// variableError is a FieldError named by its variable.
type variableError struct {
	key string
	fe  *FieldError
}

func (e *variableError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrConfig, e.key, e.fe.Problem)
}

// Unwrap returns ErrConfig and the FieldError.
func (e *variableError) Unwrap() []error { return []error{ErrConfig, e.fe} }

// LoadConfig fills spec (a pointer to a service's Config, which embeds the
// Config common points to) from the AGENTMESH_* environment and checks it:
// no AGENTMESH_* or AGENT_* variable this build does not read
// (CheckEnvironment), the common variables, the NATS credential and TLS
// files (read once here to check them, NATSAuth.Options), the log level,
// and spec's Validate method if it has one. Every error names the
// variable; a *FieldError that Validate returns is reported as "config:
// <variable>: <problem>" and still matches the component's sentinel with
// errors.Is.
func LoadConfig(spec any, common *Config) error {
	// A misspelt name would otherwise be ignored, its default used.
	unknown := CheckEnvironment(os.Environ(), spec)
	if err := Load(spec); err != nil {
		return errors.Join(unknown, err) // "config: envconfig.Process: assigning AGENTMESH_X to ..."
	}
	errs := []error{unknown, CheckCommon(*common)}
	if _, err := common.NATSAuth.Options(NATSAuthVariables); err != nil {
		errs = append(errs, err)
	}
	if _, err := NewLogger(io.Discard, common.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if v, ok := spec.(interface{ Validate() error }); ok {
		errs = append(errs, nameVariables(spec, v.Validate()))
	}
	return errors.Join(errs...)
}

// nameVariables replaces each *FieldError in err (a tree of errors.Join)
// by the variable of spec that sets its field. A field whose Go name spec
// holds twice keeps its Go name.
func nameVariables(spec any, err error) error {
	if err == nil {
		return nil
	}
	var b strings.Builder
	if envconfig.Usagef("AGENTMESH", spec, &b, "{{range .}}{{.Name}} {{.Key}}\n{{end}}") != nil {
		return err
	}
	keys := map[string]string{}
	for _, line := range strings.Split(b.String(), "\n") {
		if name, key, ok := strings.Cut(line, " "); ok {
			if _, twice := keys[name]; twice {
				key = ""
			}
			keys[name] = key
		}
	}
	var out []error
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *FieldError
		if errors.As(err, &fe) && keys[fe.Field] != "" {
			out = append(out, &variableError{key: keys[fe.Field], fe: fe})
			return
		}
		out = append(out, err)
	}
	walk(err)
	return errors.Join(out...)
}

// CheckCommon checks the values of the common configuration that its
// consumers would otherwise reject later without naming the variable.
func CheckCommon(c Config) error {
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
	if c.NatsFailoverAfter != 0 && c.NatsFailoverAfter < 300*time.Millisecond {
		bad.Add("AGENTMESH_NATS_FAILOVER_AFTER", "must be 0 (off) or at least 300ms, got %s", c.NatsFailoverAfter)
	}
	if c.ArtifactRetention < time.Minute {
		bad.Add("AGENTMESH_ARTIFACT_RETENTION", "must be at least 1m, got %s", c.ArtifactRetention)
	}
	return bad.Err()
}

// Load reads spec (a pointer to a struct that embeds Config) from the
// environment with the prefix AGENTMESH and returns an error naming the bad
// variable.
func Load(spec any) error {
	if err := envconfig.Process("AGENTMESH", spec); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// Usage prints the variables spec reads, with types and defaults.
func Usage(spec any) error { return envconfig.Usage("AGENTMESH", spec) }
