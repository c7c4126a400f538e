package exports_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exports"
)

func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestLoadSettings(t *testing.T) {
	s, err := exports.LoadSettings(env(nil))
	if err != nil || s.Enabled || s.ArtifactRoot != "" || s.Retention != exports.DefaultRetention {
		t.Fatalf("defaults: %+v, %v; want disabled, object store, %s", s, err, exports.DefaultRetention)
	}
	s, err = exports.LoadSettings(env(map[string]string{exports.EnvEnabled: "1", exports.EnvArtifactRoot: "/var/lib/agentmesh", exports.EnvRetention: "48h"}))
	if err != nil || !s.Enabled || s.ArtifactRoot != "/var/lib/agentmesh" || s.Retention != 48*time.Hour {
		t.Fatalf("set: %+v, %v", s, err)
	}
	if s, err := exports.LoadSettings(env(map[string]string{exports.EnvEnabled: "0"})); err != nil || s.Enabled {
		t.Fatalf("0: %+v, %v", s, err)
	}
	for _, bad := range []string{"yes", "true", " 1", "1 ", "", "01", "on", "TRUE", "2", "-1"} {
		_, err := exports.LoadSettings(env(map[string]string{exports.EnvEnabled: bad}))
		if !errors.Is(err, exports.ErrInvalidSetting) || !strings.Contains(err.Error(), exports.EnvEnabled) {
			t.Errorf("%s=%q: %v, want ErrInvalidSetting naming the variable", exports.EnvEnabled, bad, err)
		}
	}
	for _, bad := range []string{"", "soon", "0s", "500ms", "-1h"} {
		_, err := exports.LoadSettings(env(map[string]string{exports.EnvRetention: bad}))
		if !errors.Is(err, exports.ErrInvalidSetting) || !strings.Contains(err.Error(), exports.EnvRetention) {
			t.Errorf("%s=%q: %v, want ErrInvalidSetting naming the variable", exports.EnvRetention, bad, err)
		}
	}
	if _, err := exports.LoadSettings(env(map[string]string{exports.EnvArtifactRoot: " "})); !errors.Is(err, exports.ErrInvalidSetting) {
		t.Errorf("empty artifact root: %v", err)
	}
}
