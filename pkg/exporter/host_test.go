package exporter_test

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exporter"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
)

// StartHost starts on good settings and profiles; a bad export setting
// fails before anything connects, and profiles it cannot load release the
// connection it made.
func TestStartHost(t *testing.T) {
	srv := natstest.RunJetStream(t)
	var cfg service.Config
	servicetest.Load(t, &cfg, &cfg, srv.ClientURL(), nil)
	log := slog.New(slog.DiscardHandler)
	profiles := filepath.Join(servicetest.RepoRoot(), "profiles")

	t.Setenv(exports.EnvEnabled, "1")
	h, err := exporter.StartHost(t.Context(), "host-under-test", cfg, profiles, log)
	if err != nil {
		t.Fatalf("StartHost: %v", err)
	}
	if !h.Export.Enabled || h.Profiles.Version() == "" {
		t.Errorf("StartHost: export enabled %v, registry version %q; want the settings and profiles read", h.Export.Enabled, h.Profiles.Version())
	}
	if _, err := h.OpenStore(t.Context()); err != nil {
		t.Errorf("OpenStore: %v", err)
	}
	if err := h.Infra.Close(); err != nil {
		t.Fatal(err)
	}

	t.Setenv(exports.EnvEnabled, "yes")
	if _, err := exporter.StartHost(t.Context(), "host-under-test", cfg, profiles, log); err == nil || !strings.Contains(err.Error(), exports.EnvEnabled) {
		t.Errorf("StartHost with %s=yes: %v, want an error naming the variable", exports.EnvEnabled, err)
	}
	t.Setenv(exports.EnvEnabled, "0")
	if _, err := exporter.StartHost(t.Context(), "host-under-test", cfg, filepath.Join(t.TempDir(), "absent"), log); !errors.Is(err, profile.ErrInvalid) {
		t.Errorf("StartHost with no profiles directory: %v, want profile.ErrInvalid", err)
	}
	natstest.Eventually(t, 5*time.Second, func() error {
		if n := srv.NumClients(); n != 0 {
			return fmt.Errorf("%d connections still open", n)
		}
		return nil
	})
}
