package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// RunFunc runs a service until ctx ends and returns once everything it
// started has stopped.
type RunFunc func(ctx context.Context, log *slog.Logger) error

// Spec is a service's configuration type C, through its pointer: a struct
// that embeds Config, so that Common (promoted from Config) returns the
// embedded common variables.
type Spec[C any] interface {
	*C
	Common() *Config
}

// Common returns c itself: the common variables of a service's Config that
// embeds this one.
func (c *Config) Common() *Config { return c }

// Main is the whole of a service's main function and returns its exit code.
// It reads the service's Config C from the AGENTMESH_* environment and
// checks it (LoadConfig), builds a JSON logger on stderr at
// AGENTMESH_LOG_LEVEL and calls run with that Config and a context that
// ends on SIGINT or SIGTERM. -h or --help prints the variables instead.
//
// Exit codes: 0 after a clean shutdown (also one while it waited for the
// cluster at start) or help, 1 when run fails, 2 for a
// bad argument or configuration, reported as "<name>: config: <problem
// naming the variable>".
func Main[C any, P Spec[C]](name string, run func(ctx context.Context, cfg C, log *slog.Logger) error) int {
	var cfg C
	return MainSpec(name, &cfg, P(&cfg).Common(), func(ctx context.Context, log *slog.Logger) error {
		return run(ctx, cfg, log)
	})
}

// MainSpec is Main for a spec that is not a plain Config type, such as one
// built at run time: spec (a pointer to the service's Config, which embeds
// the Config that common points to) is filled before run is called.
func MainSpec(name string, spec any, common *Config, run RunFunc) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runMain(ctx, name, os.Args[1:], os.Stderr, spec, common, run)
}

func runMain(ctx context.Context, name string, args []string, stderr io.Writer, spec any, common *Config, run RunFunc) int {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help":
			if err := Usage(spec); err != nil {
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
	err = run(ctx, log)
	switch {
	case err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled):
		// Stopped while it waited for the cluster: nothing failed.
		log.Info("stopped while starting", "err", err)
	case err != nil:
		log.Error("exiting", "err", err)
		return 1
	}
	return 0
}

// load fills spec from the environment, checks it and returns the logger it
// configures.
func load(name string, spec any, common *Config, stderr io.Writer) (*slog.Logger, error) {
	if err := LoadService(name, spec, common); err != nil {
		return nil, err
	}
	log, err := NewLogger(stderr, common.LogLevel)
	if err != nil {
		return nil, err
	}
	return log.With("service", name), nil
}

// LoadService fills spec (a pointer to the Config of the service named
// name, which embeds the Config common points to) from the AGENTMESH_*
// environment and checks it, as the service's binary does before it
// runs (Main): LoadConfig, then the service's own metrics address
// (DefaultHTTPAddr) when AGENTMESH_HTTP_ADDR is unset.
func LoadService(name string, spec any, common *Config) error {
	if err := LoadConfig(spec, common); err != nil {
		return err
	}
	if _, set := os.LookupEnv("AGENTMESH_HTTP_ADDR"); !set {
		common.HTTPAddr = DefaultHTTPAddr(name)
	}
	return nil
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
