package sandboxinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func init() {
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case InitName:
		os.Exit(initMain())
	case ExecName:
		os.Exit(execMain())
	case ProbeName:
		os.Exit(probeMain())
	}
}

// fail reports an init failure on the run's stderr, where the runner's
// error tail shows it.
func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "agentmesh-sandbox: "+format+"\n", args...)
	return 125
}

// initMain is pid 1 of a run's namespaces: it builds the view, starts
// the egress listeners, runs the CLI (through execMain) and ends every
// process left when the CLI exits.
func initMain() int {
	f := os.NewFile(3, "config")
	var cfg Config
	dec := json.NewDecoder(f)
	if err := dec.Decode(&cfg); err != nil {
		return fail("read the config: %v", err)
	}
	if cfg.V != Version {
		return fail("this init reads config version %d and the runner sent %d: install the runner's own agentmesh-sandbox-init", Version, cfg.V)
	}
	goAhead := io.MultiReader(dec.Buffered(), f)
	if err := buildView(cfg); err != nil {
		return fail("%v", err)
	}
	if err := loopbackUp(); err != nil {
		return fail("loopback: %v", err)
	}
	for _, l := range cfg.Listen {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			return fail("egress listener %s: %v", l.Addr, err)
		}
		go relay(ln, cfg.Socket, l.Target)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	var b [1]byte
	if _, err := io.ReadFull(goAhead, b[:]); err != nil || b[0] != Go {
		return fail("the runner did not let the CLI start (%q, %v)", b[:], err)
	}
	f.Close()
	pid, err := startCLI(cfg)
	if err != nil {
		return fail("start %s: %v", cfg.Path, err)
	}
	exited := make(chan syscall.WaitStatus, 1)
	go reap(pid, exited)
	var wall <-chan time.Time
	if cfg.WallTime > 0 {
		t := time.NewTimer(cfg.WallTime)
		defer t.Stop()
		wall = t.C
	}
	for {
		select {
		case s := <-sigs:
			_ = syscall.Kill(-1, s.(syscall.Signal))
		case <-wall:
			fmt.Fprintf(os.Stderr, "agentmesh-sandbox: the run reached its wall time (%s) and was killed\n", cfg.WallTime)
			_ = syscall.Kill(-1, syscall.SIGKILL)
			wall = nil
		case ws := <-exited:
			// Whatever the CLI left (a daemon, a stray child) ends with it.
			_ = syscall.Kill(-1, syscall.SIGKILL)
			if ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ws.ExitStatus()
		}
	}
}

// startCLI starts the CLI without capabilities or new privileges. With
// rlimits to set, it goes through execMain, so that the limits bind the
// CLI and not the init. Without, it forks straight from a thread of the
// init that gives up its capabilities first (they are per thread) and is
// never used again: its goroutine ends locked, which ends the thread.
func startCLI(cfg Config) (int, error) {
	attr := &syscall.ProcAttr{Dir: cfg.Dir, Env: cfg.Env, Files: []uintptr{0, 1, 2}}
	if cfg.Procs > 0 || cfg.Memory > 0 {
		args := append([]string{ExecName, strconv.Itoa(cfg.Procs), strconv.FormatInt(cfg.Memory, 10), cfg.Path}, cfg.Args...)
		return syscall.ForkExec("/proc/self/exe", args, attr)
	}
	type started struct {
		pid int
		err error
	}
	ch := make(chan started, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		if err := dropPrivileges(); err != nil {
			ch <- started{0, fmt.Errorf("drop privileges: %v", err)}
			return
		}
		pid, err := syscall.ForkExec(cfg.Path, cfg.Args, attr)
		ch <- started{pid, err}
	}()
	s := <-ch
	return s.pid, s.err
}

// reap waits for every child of the init (orphans are re-parented to
// it) and sends the CLI's status once it has exited.
func reap(cli int, exited chan<- syscall.WaitStatus) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		if pid == cli {
			exited <- ws
		}
	}
}

// relay forwards each connection to ln through the runner's proxy,
// asking it for target.
func relay(ln net.Listener, socket, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("unix", socket)
			if err != nil {
				return
			}
			defer up.Close()
			if _, err := io.WriteString(up, target+"\n"); err != nil {
				return
			}
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(up, c)
				_ = up.(*net.UnixConn).CloseWrite()
				close(done)
			}()
			_, _ = io.Copy(c, up)
			_ = c.(*net.TCPConn).CloseWrite()
			<-done
		}()
	}
}

// buildView mounts the run's file system under cfg.Root, then makes it
// the root, read-only but for the run's own read-write mounts.
func buildView(cfg Config) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %v", err)
	}
	if err := unix.Mount("tmpfs", cfg.Root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m"); err != nil {
		return fmt.Errorf("root tmpfs: %v", err)
	}
	for _, m := range cfg.Mounts {
		if err := mountOne(cfg.Root, m); err != nil {
			return fmt.Errorf("%s %s: %v", m.Kind, m.Dst, err)
		}
	}
	for _, m := range cfg.Mounts {
		if m.Kind == "tmpfs" && m.RO {
			if err := unix.Mount("", filepath.Join(cfg.Root, m.Dst), "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, m.Data); err != nil {
				return fmt.Errorf("make %s read-only: %v", m.Dst, err)
			}
		}
	}
	if err := os.Chdir(cfg.Root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %v", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %v", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make the root read-only: %v", err)
	}
	_ = unix.Sethostname([]byte("agentmesh-sandbox"))
	return nil
}

func mountOne(root string, m Mount) error {
	dst := filepath.Join(root, m.Dst)
	switch m.Kind {
	case "bind", "robind":
		if err := mkdirAll(dst); err != nil {
			return err
		}
		if err := unix.Mount(m.Src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		if m.Kind == "robind" {
			return remountRO(dst)
		}
		return nil
	case "file":
		if err := mkdirAll(filepath.Dir(dst)); err != nil {
			return err
		}
		if _, err := os.Lstat(dst); err != nil {
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			f.Close()
		}
		if err := unix.Mount(m.Src, dst, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		if filepath.Dir(m.Dst) == "/dev" {
			return nil // devices stay writable (/dev/null)
		}
		return remountRO(dst)
	case "tmpfs":
		if err := mkdirAll(dst); err != nil {
			return err
		}
		return unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, m.Data)
	case "symlink":
		if err := mkdirAll(filepath.Dir(dst)); err != nil {
			return err
		}
		return os.Symlink(m.Data, dst)
	case "write":
		if err := mkdirAll(filepath.Dir(dst)); err != nil {
			return err
		}
		return os.WriteFile(dst, []byte(m.Data), 0o644)
	case "proc":
		if err := mkdirAll(dst); err != nil {
			return err
		}
		return unix.Mount("proc", dst, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	}
	return fmt.Errorf("unknown mount kind %q", m.Kind)
}

// mkdirAll makes a mount point; one that exists (in a bound tree) is
// left as it is.
func mkdirAll(p string) error {
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return nil
	}
	return os.MkdirAll(p, 0o755)
}

// remountRO makes a bind read-only, keeping the flags the kernel locks
// on a mount seen from a user namespace (nosuid, nodev, noexec, atime).
func remountRO(dst string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY)
	for _, f := range [][2]uintptr{{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME}} {
		if uintptr(st.Flags)&f[0] != 0 {
			flags |= f[1]
		}
	}
	return unix.Mount("", dst, "", flags, "")
}

// loopbackUp brings up the namespace's loopback interface.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// execMain is the last step before the CLI, in the CLI's process: the
// rlimits, no capabilities and no new privileges, then the CLI itself.
// argv: execName, procs, memory, path, args....
func execMain() int {
	if len(os.Args) < 5 {
		return fail("exec: bad arguments")
	}
	procs, _ := strconv.Atoi(os.Args[1])
	memory, _ := strconv.ParseInt(os.Args[2], 10, 64)
	path, args := os.Args[3], os.Args[4:]
	runtime.LockOSThread() // capabilities are per thread: drop them on the one that executes
	if procs > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: uint64(procs), Max: uint64(procs)}); err != nil {
			return fail("RLIMIT_NPROC: %v", err)
		}
	}
	if memory > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: uint64(memory), Max: uint64(memory)}); err != nil {
			return fail("RLIMIT_DATA: %v", err)
		}
	}
	if err := dropPrivileges(); err != nil {
		return fail("drop privileges: %v", err)
	}
	err := syscall.Exec(path, args, os.Environ())
	return fail("exec %s: %v", path, err)
}

// dropPrivileges clears the calling thread's capabilities (bounding,
// ambient, and the sets themselves) and sets no_new_privs.
func dropPrivileges() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %v", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear the ambient capabilities: %v", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d from the bounding set: %v", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}

// probeMain is Check's probe: confined, it must be in a pid namespace
// of its own, see no host process, and have no capabilities.
func probeMain() int {
	if os.Getppid() != 1 {
		return fail("probe: not under the sandbox's init (parent pid %d)", os.Getppid())
	}
	if _, err := os.Stat("/proc/self"); err != nil {
		return fail("probe: no /proc: %v", err)
	}
	if err := os.WriteFile("/agentmesh-probe", nil, 0o600); err == nil {
		return fail("probe: the root is writable")
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil || data[0].Effective != 0 || data[0].Permitted != 0 {
		return fail("probe: capabilities are left (%v)", err)
	}
	return 0
}
