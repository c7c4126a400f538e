package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/sandbox/sandboxinit"
	"golang.org/x/sys/unix"
)

// The system's read-only trees a CLI needs, and the files of /etc.
var (
	systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}
	etcFiles   = []string{"passwd", "group", "nsswitch.conf", "host.conf", "ssl", "ca-certificates", "ca-certificates.conf",
		"pki", "alternatives", "localtime", "timezone", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "os-release",
		"debian_version", "lsb-release", "gitconfig", "mime.types", "bash.bashrc", "profile", "inputrc", "protocols",
		"services", "terminfo", "magic"}
	devFiles = []string{"null", "zero", "full", "random", "urandom", "tty"}
	// stateEnv are the variables whose directories a child keeps its
	// state in on every CLI.
	stateEnv = []string{"HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"}
)

// Where the runner's proxy socket is inside a sandbox.
const insideSocketDir = "/run/agentmesh"

// Sandbox confines the runs of one adapter (a proc.Confiner). It is safe
// for concurrent use.
type Sandbox struct {
	cfg       Config
	egress    []Endpoint
	stateVars []string
	roVars    []string
	keyed     []*keyed
	credFiles []string
	logins    []string // LoginFiles, cleaned
	cg        *cgroups
	runtime   string
	filter    []sandboxinit.BPF // the CLI's seccomp filter
}

var _ proc.Confiner = (*Sandbox)(nil)

// New returns the sandbox of one adapter's runs. It fails, wrapping
// ErrUnavailable, when this machine cannot build it (Check).
func New(cfg Config, p Policy) (*Sandbox, error) {
	eps, err := ParseEgress(p.Egress)
	if err != nil {
		return nil, err
	}
	if cfg.Init != "" && !filepath.IsAbs(cfg.Init) {
		return nil, fmt.Errorf("%w: the init binary %q: want an absolute path", ErrUnavailable, cfg.Init)
	}
	mech, err := Check(cfg)
	if err != nil {
		return nil, err
	}
	filter, err := seccompFilter()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	s := &Sandbox{cfg: cfg, egress: eps, stateVars: slices.Clone(p.StateVars), roVars: slices.Clone(p.ReadOnlyVars), cg: mech.cg, runtime: mech.runtime,
		filter: filter}
	if err := s.withKeyed(p); err != nil {
		return nil, err
	}
	for i, h := range s.cfg.Hidden {
		if s.cfg.Hidden[i], err = filepath.Abs(h); err != nil {
			return nil, fmt.Errorf("hidden path %q: %v", h, err)
		}
	}
	return s, nil
}

// Egress returns the endpoints the sandbox's runs may reach.
func (s *Sandbox) Egress() []Endpoint { return slices.Clone(s.egress) }

// Confine rewrites cmd (proc.Confiner) to start the sandbox's init, which
// builds the run's view and then runs cmd's binary inside it.
func (s *Sandbox) Confine(cmd *exec.Cmd) (proc.Confinement, error) {
	env := envMap(cmd.Env)
	dir := cmd.Dir
	if dir == "" {
		dir = "."
	}
	ws, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %v", dir, err)
	}
	path, err := filepath.Abs(cmd.Path)
	if err != nil {
		return nil, fmt.Errorf("binary %q: %v", cmd.Path, err)
	}
	v := &view{hidden: s.cfg.Hidden}
	// The workspace: read-write, unless it is itself a hidden path (the
	// root of every run's workspace, when the run names none), which the
	// run gets as an empty directory of its own.
	if s.hiddenExactly(ws) {
		v.add(sandboxinit.Mount{Kind: "tmpfs", Dst: ws, Data: "mode=0755"})
	} else if err := v.bindWorkspace(ws); err != nil {
		return nil, err
	}
	for _, d := range systemDirs {
		if err := v.system(d); err != nil {
			return nil, err
		}
	}
	if err := v.install(path); err != nil {
		return nil, err
	}
	for _, d := range filepath.SplitList(env["PATH"]) {
		// A directory of PATH that does not exist is not there (install
		// would take it for a binary and bind its parent: all of ~/go for
		// a missing ~/go/bin).
		if fi, err := os.Stat(d); filepath.IsAbs(d) && err == nil && fi.IsDir() {
			if err := v.install(filepath.Join(d, ".")); err != nil {
				return nil, err
			}
		}
	}
	v.add(sandboxinit.Mount{Kind: "tmpfs", Dst: "/etc", Data: "mode=0755", RO: true})
	for _, f := range etcFiles {
		if err := v.system(filepath.Join("/etc", f)); err != nil {
			return nil, err
		}
	}
	v.add(sandboxinit.Mount{Kind: "tmpfs", Dst: "/dev", Data: "mode=0755", RO: true})
	for _, f := range devFiles {
		if _, err := os.Stat("/dev/" + f); err == nil {
			v.add(sandboxinit.Mount{Kind: "file", Src: "/dev/" + f, Dst: "/dev/" + f})
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		v.add(sandboxinit.Mount{Kind: "symlink", Dst: "/dev/" + name, Data: target})
	}
	v.add(sandboxinit.Mount{Kind: "tmpfs", Dst: "/dev/shm", Data: "mode=1777"})
	// A private pty (a shell tool in a pty, forkpty(3)): a devpts of the
	// run's own, its ptmx the one /dev/ptmx opens.
	v.add(sandboxinit.Mount{Kind: "devpts", Dst: "/dev/pts", Data: "newinstance,ptmxmode=0666,mode=0620"})
	v.add(sandboxinit.Mount{Kind: "symlink", Dst: "/dev/ptmx", Data: "pts/ptmx"})
	v.add(sandboxinit.Mount{Kind: "proc", Dst: "/proc"})
	v.add(sandboxinit.Mount{Kind: "tmpfs", Dst: "/tmp", Data: "mode=1777"})
	// The state directories: the runner's own HOME, TMPDIR and XDG
	// directories are private and empty inside, unless the policy names
	// the variable; one the adapter set is the CLI's, read-write.
	for _, name := range append(slices.Clone(stateEnv), s.stateVars...) {
		d := env[name]
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		d = filepath.Clean(d)
		if own := os.Getenv(name); own != "" && filepath.Clean(own) == d && !slices.Contains(s.stateVars, name) {
			v.add(sandboxinit.Mount{Kind: "tmpfs", Dst: d, Data: "mode=0700"})
			continue
		}
		fi, err := os.Stat(d)
		if errors.Is(err, fs.ErrNotExist) && slices.Contains(s.stateVars, name) {
			// A CLI makes its state directory when it first runs; made
			// here, where the run would write it, its state outlives the
			// run (a session a later run loads) instead of landing in
			// the run's private view.
			if err := os.MkdirAll(d, 0o700); err != nil {
				return nil, fmt.Errorf("%s: make the state directory: %w", name, err)
			}
			fi, err = os.Stat(d)
		}
		if err != nil || !fi.IsDir() {
			continue
		}
		if err := v.bind(d, true); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	// What the adapter gives the run to read (a settings file), read-only.
	for _, name := range s.roVars {
		for _, p := range filepath.SplitList(env[name]) {
			if p == "" || !filepath.IsAbs(p) {
				continue
			}
			if err := v.system(filepath.Clean(p)); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	if err := s.addCredentialFiles(v); err != nil {
		return nil, err
	}
	s.maskLogins(v)
	// A private home even when the child's environment names none.
	if home, err := os.UserHomeDir(); err == nil && env["HOME"] == "" {
		v.add(sandboxinit.Mount{Kind: "tmpfs", Dst: filepath.Clean(home), Data: "mode=0700"})
	}

	run, err := s.newRun()
	if err != nil {
		return nil, err
	}
	v.add(sandboxinit.Mount{Kind: "bind", Src: run.sockDir, Dst: insideSocketDir})
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost\n"
	cfg := sandboxinit.Config{V: sandboxinit.Version, Root: run.root, Socket: insideSocketDir + "/egress.sock", Dir: ws, Path: path,
		Args: slices.Clone(cmd.Args), Env: keyEnv(cmd.Env, s.keyed), WallTime: s.cfg.WallTime,
		Seccomp: s.filter}
	if len(cfg.Args) == 0 {
		cfg.Args = []string{path}
	}
	for i, e := range s.egress {
		addr := e.Host
		if net.ParseIP(e.Host) == nil {
			addr = fmt.Sprintf("127.0.1.%d", i+1)
			hosts += addr + "\t" + e.Host + "\n"
		}
		cfg.Listen = append(cfg.Listen, sandboxinit.Listener{Addr: net.JoinHostPort(addr, strconv.Itoa(e.Port)), Target: e.String()})
	}
	v.add(sandboxinit.Mount{Kind: "write", Dst: "/etc/hosts", Data: hosts})
	v.add(sandboxinit.Mount{Kind: "write", Dst: "/etc/hostname", Data: "agentmesh-sandbox\n"})
	if s.cg == nil {
		cfg.Procs, cfg.Memory = s.cfg.Procs, s.cfg.Memory
	}
	cfg.Mounts = v.sorted()

	var trees []*os.File
	if run.lease != nil {
		if trees, err = run.treesOf(cfg.Mounts); err != nil {
			run.Release()
			return nil, err
		}
	}

	r, w, err := os.Pipe()
	if err != nil {
		closeAll(trees)
		run.Release()
		return nil, fmt.Errorf("config pipe: %v", err)
	}
	run.cfgW, run.trees = w, trees
	// The config waits in the (empty) pipe for the init, which reads it
	// as soon as it runs, while Started places it in its cgroup; one too
	// big for the pipe's buffer goes in Started.
	b := sandboxinit.Encode(cfg)
	if size, err := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0); err == nil && len(b) < size {
		if _, err := w.Write(b); err != nil {
			run.Release()
			return nil, fmt.Errorf("send the init its config: %v", err)
		}
	} else {
		run.cfgB = b
	}
	attr := cmd.SysProcAttr
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
		syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
	if run.lease != nil {
		// A root runner's run: its 0 is a host id of its own, and it keeps
		// none of the runner's supplementary groups.
		id := run.lease.id
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: id, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: id, Size: 1}}
		attr.GidMappingsEnableSetgroups = true
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	} else {
		uid, gid := os.Getuid(), os.Getgid()
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// The init keeps what it needs to build the view; the CLI gets none.
		attr.AmbientCaps = []uintptr{capSysAdmin, capNetAdmin, capNetBindService, capSetpcap, capSysChroot}
	}
	cmd.SysProcAttr = attr
	cmd.Path = s.cfg.Init
	if cmd.Path == "" {
		cmd.Path = "/proc/self/exe"
	}
	cmd.Args = []string{sandboxinit.InitName, strconv.Itoa(len(trees))}
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = append([]*os.File{r}, trees...)
	if run.lease != nil && s.cfg.Init != "" {
		// The init starts as the run's host id, which may not reach the
		// binary by its path: it is exec'd by a descriptor (which it then
		// closes as inherited).
		if cmd.Path, err = execByFd(cmd, s.cfg.Init); err != nil {
			run.Release()
			return nil, err
		}
		run.trees = append(run.trees, cmd.ExtraFiles[len(cmd.ExtraFiles)-1])
	}
	run.cfgR = r
	return run, nil
}

func (s *Sandbox) hiddenExactly(p string) bool {
	return slices.Contains(s.cfg.Hidden, filepath.Clean(p))
}

// envMap reads KEY=VALUE pairs; a later one wins.
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// view collects a run's mounts.
type view struct {
	hidden []string
	mounts []sandboxinit.Mount
	seen   map[string]bool
}

func (v *view) add(m sandboxinit.Mount) {
	if v.seen == nil {
		v.seen = map[string]bool{}
	}
	if v.seen[m.Dst] {
		return
	}
	v.seen[m.Dst] = true
	v.mounts = append(v.mounts, m)
}

// covered reports whether p is already visible through a bind of one of
// its ancestors (each bind is at its own path).
func (v *view) covered(p string) bool {
	for _, m := range v.mounts {
		if (m.Kind == "bind" || m.Kind == "robind") && (p == m.Dst || strings.HasPrefix(p, m.Dst+"/")) {
			return true
		}
	}
	return false
}

// exposes names the hidden path a bind of p would show, if any: p
// itself, one under it, or one it is under (only the run's own workspace
// may lie under a hidden path, the workspace root: bindWorkspace).
func (v *view) exposes(p string) string {
	if h := v.contains(p); h != "" {
		return h
	}
	for _, h := range v.hidden {
		if strings.HasPrefix(p, h+"/") {
			return h
		}
	}
	return ""
}

// contains names a hidden path that is p or under it, if any.
func (v *view) contains(p string) string {
	for _, h := range v.hidden {
		if p == h || p == "/" || strings.HasPrefix(h, p+"/") {
			return h
		}
	}
	return ""
}

// bindWorkspace binds the run's workspace read-write: it may be under a
// hidden path (the workspace root), but may not contain one.
func (v *view) bindWorkspace(p string) error {
	if h := v.contains(p); h != "" {
		return fmt.Errorf("binding the workspace %s would expose %s, which no run may see", p, h)
	}
	v.add(sandboxinit.Mount{Kind: "bind", Src: p, Dst: p})
	return nil
}

func (v *view) bind(p string, rw bool) error {
	kind := "robind"
	if rw {
		kind = "bind"
	}
	return v.addVisible(sandboxinit.Mount{Kind: kind, Src: p, Dst: p})
}

// addVisible adds a mount that shows m.Dst, unless that would expose a
// hidden path.
func (v *view) addVisible(m sandboxinit.Mount) error {
	if h := v.exposes(m.Dst); h != "" {
		return fmt.Errorf("binding %s would expose %s, which no run may see", m.Dst, h)
	}
	v.add(m)
	return nil
}

// system adds a system path read-only: a directory or file bound, a
// symlink (merged /usr) recreated, nothing when it does not exist.
func (v *view) system(p string) error {
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		return nil
	case fi.Mode()&os.ModeSymlink != 0:
		t, err := os.Readlink(p)
		if err != nil {
			return err
		}
		v.add(sandboxinit.Mount{Kind: "symlink", Dst: p, Data: t})
		return nil
	case fi.IsDir():
		return v.bind(p, false)
	case fi.Mode().IsRegular():
		return v.addVisible(sandboxinit.Mount{Kind: "file", Src: p, Dst: p})
	}
	return nil
}

// install adds, read-only, the directory a binary (or a PATH entry) is
// in and the one its symlinks lead to, each widened to the whole of the
// node_modules tree it is part of (a package's dependencies sit beside
// it).
func (v *view) install(p string) error {
	var dirs []string
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		dirs = append(dirs, p)
	} else {
		dirs = append(dirs, filepath.Dir(p))
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		if fi, err := os.Stat(real); err == nil && fi.IsDir() {
			dirs = append(dirs, real)
		} else {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	for _, d := range dirs {
		if i := strings.Index(d+"/", "/node_modules/"); i >= 0 {
			d = d[:i] + "/node_modules"
		}
		real, err := filepath.EvalSymlinks(d)
		if err != nil || real == "/" {
			continue
		}
		if !v.covered(real) {
			if err := v.bind(real, false); err != nil {
				return err
			}
		}
		// A path through a symlinked directory (a checkout's .cache
		// linked elsewhere) is the one the child is started by: it is
		// there too, the same tree.
		if d != real && !v.covered(d) {
			if err := v.addVisible(sandboxinit.Mount{Kind: "robind", Src: real, Dst: d}); err != nil {
				return err
			}
		}
	}
	return nil
}

// sorted orders the mounts so a directory is mounted before what is
// mounted under it.
func (v *view) sorted() []sandboxinit.Mount {
	out := slices.Clone(v.mounts)
	slices.SortStableFunc(out, func(a, b sandboxinit.Mount) int { return strings.Compare(a.Dst, b.Dst) })
	return out
}

// treesOf opens the view's binds for the init (trees), idmapped to the
// run's host id.
func (r *run) treesOf(mounts []sandboxinit.Mount) ([]*os.File, error) {
	ns, err := idmapNS(r.s.cfg.Init, r.lease.id)
	if err != nil {
		return nil, err
	}
	return trees(mounts, 4, ns, r.lease.id)
}

// execByFd opens bin as the last of cmd's ExtraFiles and returns the
// path that execs it from there.
func execByFd(cmd *exec.Cmd, bin string) (string, error) {
	f, err := os.Open(bin)
	if err != nil {
		return "", fmt.Errorf("the init binary: %v", err)
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	return "/proc/self/fd/" + strconv.Itoa(2+len(cmd.ExtraFiles)), nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// run is one confined child's set-up: its runtime directory, proxy,
// cgroup and config pipe (a proc.Confinement).
type run struct {
	s       *Sandbox
	dir     string
	root    string
	sockDir string
	ln      net.Listener
	keys    *keyProxy // nil when the sandbox holds no key
	cfgB    []byte    // the config, when Started sends it
	cfgR    *os.File
	cfgW    *os.File
	trees   []*os.File // the view's mounts, passed to the init (a root runner's)
	lease   *lease     // the host id the run's 0 is (a root runner's)
	cgDirs  []string
	timer   *time.Timer

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
	once  sync.Once
}

func (s *Sandbox) newRun() (*run, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Join(s.runtime, hex.EncodeToString(b[:]))
	r := &run{s: s, dir: dir, root: filepath.Join(dir, "root"), sockDir: filepath.Join(dir, "sock"), conns: map[net.Conn]bool{}}
	for _, d := range []string{r.root, r.sockDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("runtime directory: %v", err)
		}
	}
	if mapsIDs() {
		// The run's init, its host id, mounts its root in a directory of
		// its own that it reaches by path: in UIDLockDir (0711), whatever
		// the runtime directory's mode and the directories above it.
		l, err := s.cfg.leaseID()
		if err == nil {
			r.lease, r.root = l, filepath.Join(UIDLockDir, "root-"+filepath.Base(dir))
			err = os.Mkdir(r.root, 0o700)
			if err == nil {
				err = os.Chown(r.root, l.id, l.id)
			}
		}
		if err != nil {
			l.release()
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("the run's root: %v", err)
		}
	}
	ln, err := net.Listen("unix", filepath.Join(r.sockDir, "egress.sock"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("proxy socket: %v", err)
	}
	r.ln = ln
	r.wg.Add(1)
	go r.serve()
	r.startKeys()
	return r, nil
}

// Started places the init in the run's cgroup, then lets it start the
// CLI (proc.Confinement).
func (r *run) Started(pid int) error {
	r.cfgR.Close()
	closeAll(r.trees) // the init has its own
	defer r.cfgW.Close()
	if r.cfgB != nil {
		// Too big to have waited in the pipe (Confine).
		if _, err := r.cfgW.Write(r.cfgB); err != nil {
			return fmt.Errorf("send the init its config: %v", err)
		}
	}
	if r.s.cg != nil && (r.s.cfg.Memory > 0 || r.s.cfg.Procs > 0) {
		dirs, err := r.s.cg.place(filepath.Base(r.dir), pid, r.s.cfg.Limits)
		r.cgDirs = dirs
		if err != nil {
			return err
		}
	}
	if r.s.cfg.WallTime > 0 {
		// The init ends the run at its wall time; this is the backstop
		// should it not.
		r.timer = time.AfterFunc(r.s.cfg.WallTime+5*time.Second, func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	// The init builds the view meanwhile; it starts the CLI only on this
	// byte, once the run is in its cgroup.
	if _, err := r.cfgW.Write([]byte{sandboxinit.Go}); err != nil {
		return fmt.Errorf("tell the init to start the CLI: %v", err)
	}
	return nil
}

// Release ends the proxy and removes the run's directory and cgroup
// (proc.Confinement).
func (r *run) Release() {
	r.once.Do(func() {
		if r.cfgR != nil {
			r.cfgR.Close()
		}
		if r.cfgW != nil {
			r.cfgW.Close()
		}
		closeAll(r.trees)
		if r.timer != nil {
			r.timer.Stop()
		}
		r.ln.Close()
		if r.keys != nil {
			r.keys.close()
		}
		r.mu.Lock()
		for c := range r.conns {
			c.Close()
		}
		r.conns = nil
		r.mu.Unlock()
		r.wg.Wait()
		if r.keys != nil {
			r.keys.closeIdle()
		}
		removeCgroups(r.cgDirs)
		_ = os.RemoveAll(r.dir)
		_ = os.Remove(r.root)
		r.lease.release()
	})
}

// serve is the run's egress proxy: each connection names the endpoint
// it wants on its first line, and only the sandbox's are dialled.
func (r *run) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		if !r.track(c, true) {
			c.Close()
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.track(c, false)
			defer c.Close()
			r.forward(c)
		}()
	}
}

func (r *run) track(c net.Conn, add bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if add {
		if r.conns == nil {
			return false
		}
		r.conns[c] = true
	} else {
		delete(r.conns, c)
	}
	return true
}

func (r *run) forward(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	target, err := readLine(c, 300)
	if err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if !slices.ContainsFunc(r.s.egress, func(e Endpoint) bool { return e.String() == target }) {
		return // not an endpoint of the run's policy: closed unanswered
	}
	if r.keys != nil && r.keys.handle(c, target) {
		return // a keyed API's: served by the key proxy
	}
	up, err := net.DialTimeout("tcp", target, 10*time.Second)
	if err != nil {
		return
	}
	if !r.track(up, true) {
		up.Close()
		return
	}
	defer r.track(up, false)
	defer up.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(c, up)
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.CloseWrite()
	}
	<-done
}

// readLine reads one line of at most max bytes, byte by byte, so nothing
// after it is consumed.
func readLine(r io.Reader, max int) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for len(b) <= max {
		if _, err := io.ReadFull(r, one); err != nil {
			return "", err
		}
		if one[0] == '\n' {
			return string(b), nil
		}
		b = append(b, one[0])
	}
	return "", fmt.Errorf("line over %d bytes", max)
}
