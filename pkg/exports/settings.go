// Package exports keeps the records of exported trajectories in the
// agentmesh_exports bucket and sweeps the expired ones in two phases
// (docs/contract.md §7): list the expired records, delete their bytes, then delete
// the records. It also reads the operator's export settings.
package exports

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The operator's export variables. They are not AGENTMESH_-prefixed: they
// are the design's own names, shared with single-host installs.
const (
	EnvEnabled      = "AGENT_TRAJECTORY_EXPORT_ENABLED"
	EnvArtifactRoot = "AGENT_ARTIFACT_ROOT"
	EnvRetention    = "AGENT_TRAJECTORY_RETENTION"
)

// DefaultRetention is how long an exported trajectory is kept when
// AGENT_TRAJECTORY_RETENTION is unset: 30 days.
const DefaultRetention = 30 * 24 * time.Hour

// ErrInvalidSetting is returned by LoadSettings; the message names the
// variable.
var ErrInvalidSetting = errors.New("invalid export setting")

// Settings are the operator's export settings.
type Settings struct {
	// Enabled is AGENT_TRAJECTORY_EXPORT_ENABLED=1. Disabled (the default),
	// the router stamps no run and the exporter exports nothing, whatever
	// the principals granted.
	Enabled bool
	// ArtifactRoot, when set, stores trajectories in this local directory
	// instead of the agentmesh_trajectories object store.
	ArtifactRoot string
	// Retention is how long an export is kept.
	Retention time.Duration
}

// LoadSettings reads the settings through lookup (os.LookupEnv). The
// enablement accepts exactly "0" or "1": anything else, an empty value
// included, is an error naming the variable.
func LoadSettings(lookup func(string) (string, bool)) (Settings, error) {
	s := Settings{Retention: DefaultRetention}
	var bad []error
	if v, ok := lookup(EnvEnabled); ok {
		switch v {
		case "0":
		case "1":
			s.Enabled = true
		default:
			bad = append(bad, fmt.Errorf("%w: %s must be 0 or 1, got %q", ErrInvalidSetting, EnvEnabled, v))
		}
	}
	if v, ok := lookup(EnvArtifactRoot); ok {
		if strings.TrimSpace(v) == "" {
			bad = append(bad, fmt.Errorf("%w: %s is set but empty; unset it to use the object store", ErrInvalidSetting, EnvArtifactRoot))
		}
		s.ArtifactRoot = v
	}
	if v, ok := lookup(EnvRetention); ok {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			bad = append(bad, fmt.Errorf("%w: %s must be a duration such as 720h, got %q", ErrInvalidSetting, EnvRetention, v))
		case d < time.Second:
			bad = append(bad, fmt.Errorf("%w: %s must be at least 1s, got %s", ErrInvalidSetting, EnvRetention, d))
		default:
			s.Retention = d
		}
	}
	return s, errors.Join(bad...)
}
