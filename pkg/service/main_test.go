package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// errTest is the sentinel of testComponent's config.
var errTest = errors.New("invalid test config")

// testComponent stands for a component's Config (a router's, ...): it
// checks its own fields and reports a bad one as a FieldError.
type testComponent struct {
	Workers  int    `split_words:"true"`
	Adapters string `split_words:"true" default:"fixture"`
}

func (c testComponent) Validate() error {
	bad := FieldErrors{Sentinel: errTest}
	if c.Workers < 0 {
		bad.Add("Workers", "must be > 0, got %d", c.Workers)
	}
	if c.Adapters != "fixture" {
		bad.Add("Adapters", "unknown adapter %q", c.Adapters)
	}
	return bad.Err()
}

type testConfig struct {
	Config
	Test testComponent `split_words:"true"`
}

func (c testConfig) Validate() error { return c.Test.Validate() }

func TestRunMain(t *testing.T) {
	errRun := errors.New("run failed")
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		runErr   error
		stopped  bool // the process is stopped (SIGTERM) before run returns
		wantCode int
		wantErr  string // in stderr
		wantRun  bool
	}{
		{name: "ok", wantCode: 0, wantRun: true},
		{name: "run fails", runErr: errRun, wantCode: 1, wantErr: "run failed", wantRun: true},
		{name: "stopped while waiting for the cluster", stopped: true, runErr: fmt.Errorf("ensure topology: %w; last attempt: no responders", context.Canceled),
			wantCode: 0, wantErr: `"level":"INFO","msg":"stopped while starting"`, wantRun: true},
		{name: "cancelled, not stopped", runErr: fmt.Errorf("ensure topology: %w", context.Canceled), wantCode: 1, wantErr: `"level":"ERROR","msg":"exiting"`, wantRun: true},
		{name: "help", args: []string{"-h"}, wantCode: 0},
		{name: "argument", args: []string{"serve"}, wantCode: 2, wantErr: `svc: unexpected argument "serve"`},
		{name: "log level", env: map[string]string{"AGENTMESH_LOG_LEVEL": "loud"}, wantCode: 2, wantErr: "svc: config: AGENTMESH_LOG_LEVEL"},
		{name: "unparsable", env: map[string]string{"AGENTMESH_LEASE_TTL": "soon"}, wantCode: 2, wantErr: "AGENTMESH_LEASE_TTL"},
		{name: "common", env: map[string]string{"AGENTMESH_REPLICAS": "7"}, wantCode: 2, wantErr: "AGENTMESH_REPLICAS"},
		{name: "failover too eager", env: map[string]string{"AGENTMESH_NATS_FAILOVER_AFTER": "100ms"}, wantCode: 2,
			wantErr: "AGENTMESH_NATS_FAILOVER_AFTER: must be 0 (off) or at least 300ms, got 100ms"},
		{name: "retention unparsable", env: map[string]string{"AGENTMESH_RUN_RETENTION": "a week"}, wantCode: 2, wantErr: "AGENTMESH_RUN_RETENTION"},
		{name: "retention below events", env: map[string]string{"AGENTMESH_RUN_RETENTION": "1h"}, wantCode: 2, wantErr: "AGENTMESH_RUN_RETENTION: must be at least 1s and at least AGENTMESH_EVENTS_MAX_AGE 24h0m0s"},
		{name: "misspelt", env: map[string]string{"AGENTMESH_LEASE_TLL": "3s"}, wantCode: 2,
			wantErr: "svc: config: AGENTMESH_LEASE_TLL: unknown variable; nothing in this build reads it (did you mean AGENTMESH_LEASE_TTL?)"},
		{name: "misspelt and a bad value", env: map[string]string{"AGENTMESH_LEASE_TLL": "3s", "AGENTMESH_REPLICAS": "7"}, wantCode: 2,
			wantErr: "(did you mean AGENTMESH_LEASE_TTL?)\nconfig: AGENTMESH_REPLICAS: must be 1 to 5, got 7"},
		{name: "validate", env: map[string]string{"AGENTMESH_TEST_ADAPTERS": "nope"}, wantCode: 2, wantErr: `svc: config: AGENTMESH_TEST_ADAPTERS: unknown adapter "nope"`},
		{name: "every field named", env: map[string]string{"AGENTMESH_TEST_ADAPTERS": "nope", "AGENTMESH_TEST_WORKERS": "-1"}, wantCode: 2,
			wantErr: "config: AGENTMESH_TEST_WORKERS: must be > 0, got -1\nconfig: AGENTMESH_TEST_ADAPTERS: unknown adapter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var cfg testConfig
			var stderr bytes.Buffer
			ran := false
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			if tt.stopped {
				stop()
			}
			code := runMain(ctx, "svc", tt.args, &stderr, &cfg, &cfg.Config, func(ctx context.Context, log *slog.Logger) error {
				ran = true
				log.Info("running")
				return tt.runErr
			})
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.wantCode, &stderr)
			}
			if ran != tt.wantRun {
				t.Errorf("ran = %t, want %t", ran, tt.wantRun)
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", &stderr, tt.wantErr)
			}
			if tt.wantRun && !strings.Contains(stderr.String(), `"service":"svc"`) {
				t.Errorf("stderr = %q, want JSON logs with service svc", &stderr)
			}
		})
	}
}

// TestLoadConfigNamesTheVariable: a component's FieldError is reported
// under the variable that sets its field, and still matches both ErrConfig
// and the component's sentinel.
func TestLoadConfigNamesTheVariable(t *testing.T) {
	t.Setenv("AGENTMESH_TEST_WORKERS", "-2")
	var cfg testConfig
	err := LoadConfig(&cfg, &cfg.Config)
	if err == nil || err.Error() != "config: AGENTMESH_TEST_WORKERS: must be > 0, got -2" {
		t.Fatalf("LoadConfig = %v, want the problem under AGENTMESH_TEST_WORKERS", err)
	}
	var fe *FieldError
	if !errors.Is(err, ErrConfig) || !errors.Is(err, errTest) || !errors.As(err, &fe) || fe.Field != "Workers" {
		t.Errorf("LoadConfig = %#v, want it to match ErrConfig, errTest and a FieldError of Workers", err)
	}
}

// TestNameVariablesKeepsAmbiguousNames: a Go name two fields share is not
// guessed at.
func TestNameVariablesKeepsAmbiguousNames(t *testing.T) {
	var spec struct {
		A testComponent `split_words:"true"`
		B testComponent `split_words:"true"`
	}
	bad := FieldErrors{Sentinel: errTest}
	bad.Add("Workers", "must be > 0, got -1")
	err := nameVariables(&spec, bad.Err())
	if want := "invalid test config: Workers must be > 0, got -1"; err == nil || err.Error() != want {
		t.Fatalf("nameVariables = %v, want %q", err, want)
	}
}

// TestCommon: a service's Config reaches the common variables it embeds
// through Common, which Main hands to LoadConfig.
func TestCommon(t *testing.T) {
	var cfg testConfig
	if got := (&cfg).Common(); got != &cfg.Config {
		t.Errorf("Common() = %p, want the embedded Config %p", got, &cfg.Config)
	}
}

// TestMainDefaultHTTPAddr: with AGENTMESH_HTTP_ADDR unset a service gets
// its own port on the loopback; set, the value is kept, empty included
// (HTTP disabled).
func TestMainDefaultHTTPAddr(t *testing.T) {
	for _, tt := range []struct {
		name, svc string
		env       *string
		want      string
	}{
		{name: "unset", svc: "sweeper", want: "127.0.0.1:9463"},
		{name: "unset, unknown service", svc: "svc", want: "127.0.0.1:0"},
		{name: "empty disables", svc: "sweeper", env: new(""), want: ""},
		{name: "set", svc: "router", env: new("0.0.0.0:9999"), want: "0.0.0.0:9999"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AGENTMESH_HTTP_ADDR", "") // restored after the test
			if tt.env == nil {
				if err := os.Unsetenv("AGENTMESH_HTTP_ADDR"); err != nil {
					t.Fatal(err)
				}
			} else {
				t.Setenv("AGENTMESH_HTTP_ADDR", *tt.env)
			}
			var cfg testConfig
			var stderr bytes.Buffer
			code := runMain(context.Background(), tt.svc, nil, &stderr, &cfg, &cfg.Config, func(context.Context, *slog.Logger) error { return nil })
			if code != 0 || cfg.HTTPAddr != tt.want {
				t.Errorf("exit %d, HTTPAddr %q; want 0 and %q; stderr:\n%s", code, cfg.HTTPAddr, tt.want, &stderr)
			}
		})
	}
}
