package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	// An idle exporter moves no family of its own: build info only.
	for _, tc := range []struct{ enabled, want, metric string }{
		{"", "disabled", "agentmesh_build_info"}, {"0", "disabled", "agentmesh_build_info"}, {"1", "enabled", "agentmesh_export_lag_seconds"},
	} {
		t.Run("enabled="+tc.enabled, func(t *testing.T) {
			if tc.enabled != "" {
				t.Setenv(exports.EnvEnabled, tc.enabled)
			}
			_, nc, p := servicetest.Serve(t, nil, run)
			if got := servicetest.CheckMicro(t, nc, "agentmesh-exporter").Metadata["export"]; got != tc.want {
				t.Errorf("micro metadata export = %q, want %q", got, tc.want)
			}
			p.CheckHTTP(t, tc.metric)
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
		cfg := servicetest.LoadSpec[Config](t, s.ClientURL(), nil)
		err := run(context.Background(), cfg, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), exports.EnvEnabled) {
			t.Errorf("%s=%q: run = %v, want an error naming the variable", exports.EnvEnabled, v, err)
		}
	}
}

func TestConfig(t *testing.T) {
	servicetest.CheckSpecs[Config](t, []servicetest.ConfigCase{
		{Name: "defaults", Env: nil, Want: ""},
		{Name: "workers", Env: map[string]string{"AGENTMESH_EXPORTER_WORKERS": "-1"}, Want: "AGENTMESH_EXPORTER_WORKERS: must be > 0"},
		{Name: "ack wait", Env: map[string]string{"AGENTMESH_EXPORTER_ACK_WAIT": "10ms"}, Want: "AGENTMESH_EXPORTER_ACK_WAIT: must be at least 1s"},
	})
}
