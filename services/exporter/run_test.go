package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/serve/servetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	for _, tc := range []struct{ enabled, want string }{{"", "disabled"}, {"0", "disabled"}, {"1", "enabled"}} {
		t.Run("enabled="+tc.enabled, func(t *testing.T) {
			s := natstest.RunJetStream(t)
			nc, _ := natstest.Connect(t, s)
			if tc.enabled != "" {
				t.Setenv(exports.EnvEnabled, tc.enabled)
			}
			var cfg Config
			servetest.Load(t, &cfg, &cfg.Config, s.ClientURL(), nil)
			p := servetest.Start(t, func(ctx context.Context, log *slog.Logger) error { return run(ctx, cfg, log) })
			if got := servetest.CheckMicro(t, nc, "agentmesh-exporter").Metadata["export"]; got != tc.want {
				t.Errorf("micro metadata export = %q, want %q", got, tc.want)
			}
			p.CheckHTTP(t, "agentmesh_export_lag_seconds")
			p.Stop(t)
		})
	}
}

// TestEnablementRefused: anything but 0 or 1 fails start-up, naming the
// variable.
func TestEnablementRefused(t *testing.T) {
	s := natstest.RunJetStream(t)
	for _, v := range []string{"yes", "true", " 1", ""} {
		t.Setenv(exports.EnvEnabled, v)
		var cfg Config
		servetest.Load(t, &cfg, &cfg.Config, s.ClientURL(), nil)
		err := run(context.Background(), cfg, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), exports.EnvEnabled) {
			t.Errorf("%s=%q: run = %v, want an error naming the variable", exports.EnvEnabled, v, err)
		}
	}
}

func TestConfig(t *testing.T) {
	var cfg Config
	t.Setenv("AGENTMESH_EXPORTER_WORKERS", "0")
	servetest.CheckConfig(t, &cfg, &cfg.Config, "AGENTMESH_EXPORTER_WORKERS")
}
