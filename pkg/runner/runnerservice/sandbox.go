package runnerservice

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/sandbox"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// Sandbox settings: AGENTMESH_SANDBOX turns it on or off.
const (
	SandboxOn  = "on"
	SandboxOff = "off"
)

// SandboxSettings are a runner's sandbox variables (pkg/sandbox). They
// matter to a runner that hosts a CLI adapter.
type SandboxSettings struct {
	SandboxMode       string        `envconfig:"SANDBOX" default:"on" desc:"on: every CLI run is confined to its sandbox and the runner refuses to start where it cannot build one; off: the CLIs run with the runner's authority, and every run's status says so"`
	SandboxMemory     int64         `split_words:"true" default:"4294967296" desc:"memory a sandboxed CLI run may use, in bytes (0: no limit)"`
	SandboxProcs      int           `split_words:"true" default:"1024" desc:"processes and threads a sandboxed CLI run may have (0: no limit)"`
	SandboxWallTime   time.Duration `split_words:"true" default:"2h" desc:"how long a sandboxed CLI run may run before it is killed (0: no limit)"`
	SandboxCgroup     string        `split_words:"true" desc:"a delegated cgroup v2 directory (memory and pids enabled) under which each run gets its own (default: found, else rlimits)"`
	SandboxRuntimeDir string        `split_words:"true" desc:"directory of the runs' proxy sockets and mount points (default: <temp dir>/agentmesh-sandbox-<uid>)"`
	SandboxInit       string        `split_words:"true" desc:"the agentmesh-sandbox-init binary each run starts as its pid 1 (default: the one next to this runner's executable, else on PATH, else the runner re-executes itself, about 20 ms slower a run)"`
	SandboxUIDBase    int           `envconfig:"SANDBOX_UID_BASE" default:"1800000000" desc:"a root runner's runs each lease a host uid and gid (the same number) from this one up, as their uid and gid 0, so that no run is host root and no two runs at once share one; runners on one host share the range safely (locks in /run/agentmesh-sandbox). A runner that is not root maps its own uid"`
	SandboxUIDCount   int           `envconfig:"SANDBOX_UID_COUNT" default:"4096" desc:"how many host uids from AGENTMESH_SANDBOX_UID_BASE a root runner's runs lease (at most that many runs at once)"`
}

// check names each bad sandbox variable.
func (s SandboxSettings) check(bad *service.Problems) {
	if s.SandboxMode != "" && s.SandboxMode != SandboxOn && s.SandboxMode != SandboxOff {
		bad.Add("AGENTMESH_SANDBOX", "must be %q or %q, got %q", SandboxOn, SandboxOff, s.SandboxMode)
	}
	if s.SandboxMemory < 0 {
		bad.Add("AGENTMESH_SANDBOX_MEMORY", "must be >= 0, got %d", s.SandboxMemory)
	}
	if s.SandboxProcs < 0 {
		bad.Add("AGENTMESH_SANDBOX_PROCS", "must be >= 0, got %d", s.SandboxProcs)
	}
	if s.SandboxUIDBase < 0 || s.SandboxUIDCount < 0 || int64(s.SandboxUIDBase)+int64(s.SandboxUIDCount) > 1<<32-2 {
		bad.Add("AGENTMESH_SANDBOX_UID_BASE", "with AGENTMESH_SANDBOX_UID_COUNT must name host uids up to 4294967294 (0: the default), got %d and %d", s.SandboxUIDBase, s.SandboxUIDCount)
	}
	if s.SandboxWallTime < 0 {
		bad.Add("AGENTMESH_SANDBOX_WALL_TIME", "must be >= 0, got %s", s.SandboxWallTime)
	}
}

// sandbox sets c up to confine its CLI runs, when it hosts a CLI adapter
// and the sandbox is on: it checks the machine can build the sandbox and
// hides the runner's own files, and hidden, from every run. With the
// sandbox off it marks the runs' statuses instead.
func (c *Config) sandbox(log *slog.Logger, hidden ...string) (prometheus.Gauge, error) {
	cli := slices.ContainsFunc(c.RunnerAdapters, func(n string) bool {
		t, _ := catalog.Transport(n)
		return t == wire.TransportSubprocess
	})
	if !cli {
		return nil, nil
	}
	enabled := prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentmesh_sandbox_enabled",
		Help: "1 when this runner confines its CLI runs to the sandbox, 0 when the operator turned it off (AGENTMESH_SANDBOX=off)."})
	if c.SandboxMode == SandboxOff {
		log.Warn("AGENTMESH_SANDBOX=off: the agent CLIs run with this runner's authority, unconfined; every run's status says so")
		c.Runner.Unsandboxed = true
		return enabled, nil
	}
	sc := sandbox.Config{
		Limits:     sandbox.Limits{Memory: c.SandboxMemory, Procs: c.SandboxProcs, WallTime: c.SandboxWallTime},
		RuntimeDir: c.SandboxRuntimeDir, Cgroup: c.SandboxCgroup, Init: sandbox.InitPath(c.SandboxInit),
		UIDBase: c.SandboxUIDBase, UIDCount: c.SandboxUIDCount,
	}
	for _, p := range append([]string{c.StateDir, c.WorkspaceRoot, c.NatsCreds, c.NatsNkey, c.NatsTLSKey, c.ProfilesDir}, hidden...) {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", service.ErrConfig, p, err)
		}
		sc.Hidden = append(sc.Hidden, abs)
	}
	m, err := sandbox.Check(sc)
	if err != nil {
		return nil, fmt.Errorf("%w: AGENTMESH_SANDBOX=on: %v; set AGENTMESH_SANDBOX=off to run the CLIs unconfined (docs/operating.md: the sandbox)", service.ErrConfig, err)
	}
	init := sc.Init
	if init == "" {
		init = "this runner, re-executed"
	}
	log.Info("sandbox on", "init", init, "limits", m.Limits, "cgroup", m.Cgroup, "memory", c.SandboxMemory, "procs", c.SandboxProcs, "wall_time", c.SandboxWallTime,
		"run_ids", m.IDs, "landlock_abi", m.Landlock)
	if m.Landlock == 0 {
		log.Warn("sandbox: no Landlock on this kernel, the runs' file view rests on its mounts alone", "why", m.NoLandlock)
	}
	c.Dirs.Sandbox = &sc
	enabled.Set(1)
	return enabled, nil
}
