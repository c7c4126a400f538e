package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentmesh/agentmesh/pkg/sandbox/sandboxinit"
)

// Capability numbers (linux/capability.h) the init keeps.
const (
	capSetpcap        = 8
	capNetBindService = 10
	capNetAdmin       = 12
	capSysChroot      = 18
	capSysAdmin       = 21
)

// Mechanism is what Check found: how runs are confined here.
type Mechanism struct {
	// Limits is how memory and processes are limited: "cgroup2",
	// "cgroup1" or "rlimit".
	Limits string
	// Cgroup is the directory each run's cgroup is made under (for
	// cgroup1, the pids hierarchy's), empty for rlimit.
	Cgroup string
	// IDs is what a run's uid and gid 0 are on the host: "host uids
	// B..E, one a run" for a root runner, else "this runner's uid N".
	IDs string
	// Landlock is the Landlock ABI version every run is fenced with, 0
	// where the kernel has none (NoLandlock says why).
	Landlock   int
	NoLandlock string
	cg         *cgroups
	runtime    string
}

var (
	checkMu   sync.Mutex
	checked   = map[string]Mechanism{}
	checkErrs = map[string]error{}
)

// Check reports whether this machine can build the sandbox, by starting
// a confined probe, and how it limits resources. The error wraps
// ErrUnavailable and names what is missing. A result is kept for the
// life of the process.
func Check(cfg Config) (Mechanism, error) {
	key := fmt.Sprint(cfg.RuntimeDir, "\x00", cfg.Cgroup, "\x00", cfg.Init, "\x00", cfg.UIDBase, "\x00", cfg.UIDCount)
	checkMu.Lock()
	defer checkMu.Unlock()
	if m, ok := checked[key]; ok {
		return m, checkErrs[key]
	}
	m, err := check(cfg)
	checked[key], checkErrs[key] = m, err
	return m, err
}

func check(cfg Config) (Mechanism, error) {
	var m Mechanism
	rt := cfg.RuntimeDir
	if rt == "" {
		rt = filepath.Join(os.TempDir(), fmt.Sprintf("agentmesh-sandbox-%d", os.Getuid()))
	}
	if err := os.MkdirAll(rt, 0o700); err != nil {
		return m, fmt.Errorf("%w: runtime directory %s: %v", ErrUnavailable, rt, err)
	}
	if err := os.Chmod(rt, 0o700); err != nil {
		return m, fmt.Errorf("%w: runtime directory %s: %v", ErrUnavailable, rt, err)
	}
	m.runtime = rt
	if mapsIDs() {
		base, count := cfg.idRange()
		m.IDs = fmt.Sprintf("host uids and gids %d..%d, one a run", base, base+count-1)
	} else {
		m.IDs = fmt.Sprintf("this runner's uid %d and gid %d", os.Getuid(), os.Getgid())
	}
	var err error
	if m.Landlock, err = sandboxinit.LandlockABI(); err != nil {
		m.NoLandlock = err.Error()
	}
	cg, err := findCgroups(cfg.Cgroup)
	if err != nil {
		return m, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	m.Limits = "rlimit"
	if cg != nil {
		m.cg, m.Limits, m.Cgroup = cg, cg.kind, cg.dirs[0]
	}
	// The probe: a confined run of the init's binary (the init binary, or
	// this one) that checks it is pid 1's child in a namespace of its own,
	// under the seccomp filter every run gets, so a kernel that cannot
	// load it fails here, not each run.
	filter, err := seccompFilter()
	if err != nil {
		return m, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	s := &Sandbox{cfg: Config{RuntimeDir: rt, Init: cfg.Init, UIDBase: cfg.UIDBase, UIDCount: cfg.UIDCount}, runtime: rt, filter: filter}
	ws, err := os.MkdirTemp(rt, "probe-")
	if err != nil {
		return m, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer os.RemoveAll(ws)
	self := cfg.Init
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return m, fmt.Errorf("%w: find this program: %v", ErrUnavailable, err)
		}
	} else if fi, err := os.Stat(self); err != nil || !fi.Mode().IsRegular() {
		return m, fmt.Errorf("%w: the init binary %s: not a file (%v)", ErrUnavailable, self, err)
	}
	cmd := &exec.Cmd{Path: self, Args: []string{sandboxinit.ProbeName}, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	run, err := s.Confine(cmd)
	if err != nil {
		return m, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer run.Release()
	if err := cmd.Start(); err != nil {
		return m, fmt.Errorf("%w: cannot create the namespaces (%v): unprivileged user namespaces may be off "+
			"(sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces, or an AppArmor/seccomp profile)", ErrUnavailable, err)
	}
	if err := run.Started(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return m, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		err = <-done
		err = fmt.Errorf("timed out: %v", err)
	}
	if err != nil {
		return m, fmt.Errorf("%w: the probe failed (%v): %s", ErrUnavailable, err, strings.TrimSpace(stderr.String()))
	}
	return m, nil
}

// cgroups are where runs get a cgroup each.
type cgroups struct {
	kind string   // cgroup2 or cgroup1
	dirs []string // cgroup2: one; cgroup1: pids, then memory
}

const cgroup2Magic = 0x63677270

// findCgroups finds a cgroup directory runs can be placed under: dir if
// given (it must be a delegated cgroup v2 directory), else this process's
// own cgroup v2 directory when it enables memory and pids for its
// children, else its cgroup v1 pids and memory directories when this
// process may make cgroups in them; nil when there is none.
func findCgroups(dir string) (*cgroups, error) {
	if dir != "" {
		if err := usableV2(dir); err != nil {
			return nil, fmt.Errorf("AGENTMESH_SANDBOX_CGROUP %s: %v", dir, err)
		}
		return &cgroups{kind: "cgroup2", dirs: []string{dir}}, nil
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, nil
	}
	var st syscall.Statfs_t
	if p, ok := own[""]; ok && syscall.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == cgroup2Magic {
		d := filepath.Join("/sys/fs/cgroup", p)
		if usableV2(d) == nil && probeMkdir(d) {
			return &cgroups{kind: "cgroup2", dirs: []string{d}}, nil
		}
	}
	pids, okp := own["pids"]
	mem, okm := own["memory"]
	if okp && okm {
		dp, dm := filepath.Join("/sys/fs/cgroup/pids", pids), filepath.Join("/sys/fs/cgroup/memory", mem)
		if probeMkdir(dp) && probeMkdir(dm) {
			return &cgroups{kind: "cgroup1", dirs: []string{dp, dm}}, nil
		}
	}
	return nil, nil
}

func usableV2(d string) error {
	b, err := os.ReadFile(filepath.Join(d, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	f := strings.Fields(string(b))
	for _, c := range []string{"memory", "pids"} {
		if !slices.Contains(f, c) {
			return fmt.Errorf("its cgroup.subtree_control does not enable %s", c)
		}
	}
	return nil
}

func probeMkdir(d string) bool {
	p := filepath.Join(d, fmt.Sprintf("agentmesh-probe-%d", os.Getpid()))
	if err := os.Mkdir(p, 0o755); err != nil {
		return false
	}
	return syscall.Rmdir(p) == nil
}

// ownCgroups reads /proc/self/cgroup: controller (or "" for v2) → path.
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

// place makes the run's cgroup(s), sets its limits and moves pid in.
func (c *cgroups) place(name string, pid int, l Limits) ([]string, error) {
	var made []string
	fail := func(err error) ([]string, error) { return made, fmt.Errorf("cgroup: %v", err) }
	for i, parent := range c.dirs {
		d := filepath.Join(parent, "agentmesh-"+name)
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail(err)
		}
		made = append(made, d)
		var files map[string]string
		switch {
		case c.kind == "cgroup2":
			files = map[string]string{"pids.max": limit(int64(l.Procs)), "memory.max": limit(l.Memory)}
			if l.Memory > 0 {
				files["memory.swap.max"] = "0"
			}
		case i == 0:
			files = map[string]string{"pids.max": limit(int64(l.Procs))}
		default:
			files = map[string]string{}
			if l.Memory > 0 {
				files["memory.limit_in_bytes"] = strconv.FormatInt(l.Memory, 10)
			}
		}
		for f, v := range files {
			if err := os.WriteFile(filepath.Join(d, f), []byte(v), 0); err != nil && !(f == "memory.swap.max" && errors.Is(err, os.ErrNotExist)) {
				return fail(fmt.Errorf("%s: %v", f, err))
			}
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fail(err)
		}
	}
	return made, nil
}

func limit(v int64) string {
	if v <= 0 {
		return "max"
	}
	return strconv.FormatInt(v, 10)
}

// removeCgroups removes a run's cgroups once its processes are gone
// (the kernel may take a moment to let the last one go).
func removeCgroups(dirs []string) {
	for _, d := range dirs {
		for i := 0; i < 50; i++ {
			if err := syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
