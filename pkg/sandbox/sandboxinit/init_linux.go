package sandboxinit

import (
	"errors"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The init imports no fmt, encoding/json or net: each costs its start-up
// (their initializers, and the pages of a larger binary) on every run.

func init() {
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case InitName:
		// Its very first act: whatever started the runner may have left a
		// descriptor open that Go's exec passed on (one not close-on-exec);
		// none may reach the run.
		fds := 0
		if len(os.Args) > 1 {
			fds, _ = strconv.Atoi(os.Args[1])
		}
		if err := closeInherited(3 + fds); err != nil {
			os.Exit(fail("close the inherited descriptors: ", err.Error()))
		}
		os.Exit(initMain())
	case ExecName:
		os.Exit(execMain())
	case ProbeName:
		os.Exit(probeMain())
	case HoldName:
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
}

// fail reports an init failure on the run's stderr, where the runner's
// error tail shows it.
func fail(parts ...string) int {
	_, _ = os.Stderr.WriteString("agentmesh-sandbox: " + strings.Join(parts, "") + "\n")
	return 125
}

// errf is an error of its parts, the last one's cause kept.
func errf(cause error, parts ...string) error {
	return &initError{msg: strings.Join(parts, ""), cause: cause}
}

type initError struct {
	msg   string
	cause error
}

func (e *initError) Error() string {
	if e.cause == nil {
		return e.msg
	}
	return e.msg + ": " + e.cause.Error()
}

func (e *initError) Unwrap() error { return e.cause }

// closeInherited closes each descriptor above last (the config's, 3, or
// its last tree's) that this process inherited: the ones not
// close-on-exec, since every descriptor the Go runtime opens is. /proc is
// still the host's here, before the view is built.
func closeInherited(last int) error {
	d, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	var fds []int
	buf := make([]byte, 4096)
	for {
		n, err := unix.ReadDirent(d, buf)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			if fd, err := strconv.Atoi(name); err == nil && fd > last && fd != d {
				fds = append(fds, fd)
			}
		}
	}
	for _, fd := range fds {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		if err := unix.Close(fd); err != nil && !errors.Is(err, unix.EBADF) {
			return errf(err, "close ", strconv.Itoa(fd))
		}
	}
	return nil
}

// initMain is pid 1 of a run's namespaces: it builds the view, starts
// the egress listeners, runs the CLI (through execMain) and ends every
// process left when the CLI exits.
func initMain() int {
	// Not dumpable: the CLI, which may be the same host uid, can neither
	// ptrace the init nor read its /proc files.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail("not dumpable: ", err.Error())
	}
	f := os.NewFile(3, "config")
	cfg, err := ReadConfig(f)
	if err != nil {
		return fail("read the config: ", err.Error())
	}
	if cfg.V != Version {
		return fail("this init reads config version ", strconv.Itoa(Version), " and the runner sent ", strconv.Itoa(cfg.V),
			": install the runner's own agentmesh-sandbox-init")
	}
	if err := buildView(cfg); err != nil {
		return fail(err.Error())
	}
	if err := loopbackUp(); err != nil {
		return fail("loopback: ", err.Error())
	}
	for _, l := range cfg.Listen {
		fd, err := listenTCP(l.Addr)
		if err != nil {
			return fail("egress listener ", l.Addr, ": ", err.Error())
		}
		go relay(fd, cfg.Socket, l.Target)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	var b [1]byte
	if _, err := io.ReadFull(f, b[:]); err != nil || b[0] != Go {
		return fail("the runner did not let the CLI start (", strconv.Quote(string(b[:])), ", ", errString(err), ")")
	}
	f.Close()
	pid, err := startCLI(cfg)
	if err != nil {
		return fail("start ", cfg.Path, ": ", err.Error())
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
			_, _ = os.Stderr.WriteString("agentmesh-sandbox: the run reached its wall time (" + cfg.WallTime.String() + ") and was killed\n")
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
	var rw []string
	for _, p := range writable(cfg.Mounts) {
		if !strings.Contains(p, "\n") { // execMain's argument is a list of lines: such a path stays read-only
			rw = append(rw, p)
		}
	}
	if cfg.Procs > 0 || cfg.Memory > 0 {
		args := append([]string{ExecName, strconv.Itoa(cfg.Procs), strconv.FormatInt(cfg.Memory, 10), filterArg(cfg.Seccomp),
			strings.Join(rw, "\n"), cfg.Path}, cfg.Args...)
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
			ch <- started{0, errf(err, "drop privileges")}
			return
		}
		if err := applyLandlock(rw); err != nil {
			ch <- started{0, err}
			return
		}
		if err := loadSeccomp(cfg.Seccomp); err != nil {
			ch <- started{0, errf(err, "seccomp")}
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

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// listenTCP listens on addr, an IPv4 address and port.
func listenTCP(addr string) (int, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return -1, errf(err, "not an IPv4 address and port")
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	if err := syscall.Listen(fd, 128); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// relay forwards each connection to the listening socket ln through the
// runner's proxy, asking it for target. Accept blocks one thread; each
// connection's two sockets are non-blocking, on the runtime's poller.
func relay(ln int, socket, target string) {
	for {
		c, _, err := syscall.Accept4(ln, syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK)
		if errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.ECONNABORTED) {
			continue
		}
		if err != nil {
			return
		}
		go forward(c, socket, target)
	}
}

// forward copies between the connection c and the runner's proxy, each
// way until its end of file, which it passes on.
func forward(c int, socket, target string) {
	conn := os.NewFile(uintptr(c), "egress")
	defer conn.Close()
	u, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	if err := syscall.Connect(u, &syscall.SockaddrUnix{Name: socket}); err != nil {
		syscall.Close(u)
		return
	}
	if err := syscall.SetNonblock(u, true); err != nil {
		syscall.Close(u)
		return
	}
	up := os.NewFile(uintptr(u), "proxy")
	defer up.Close()
	if _, err := io.WriteString(up, target+"\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, conn)
		shutWrite(up)
		close(done)
	}()
	_, _ = io.Copy(conn, up)
	shutWrite(conn)
	<-done
}

// shutWrite sends f's socket's end of file.
func shutWrite(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_WR) })
}

// buildView mounts the run's file system under cfg.Root, then makes it
// the root, read-only but for the run's own read-write mounts.
func buildView(cfg Config) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return errf(err, "make the mounts private")
	}
	if err := unix.Mount("tmpfs", cfg.Root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m"); err != nil {
		return errf(err, "root tmpfs")
	}
	for _, m := range cfg.Mounts {
		if err := mountOne(cfg.Root, m); err != nil {
			return errf(err, m.Kind, " ", m.Dst)
		}
	}
	for _, m := range cfg.Mounts {
		if m.Kind == "tmpfs" && m.RO {
			if err := unix.Mount("", filepath.Join(cfg.Root, m.Dst), "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, m.Data); err != nil {
				return errf(err, "make ", m.Dst, " read-only")
			}
		}
	}
	if err := os.Chdir(cfg.Root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return errf(err, "pivot_root")
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return errf(err, "detach the old root")
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return errf(err, "make the root read-only")
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
		if err := mkFile(dst); err != nil {
			return err
		}
		if err := unix.Mount(m.Src, dst, "", unix.MS_BIND, ""); err != nil {
			return err
		}
		if filepath.Dir(m.Dst) == "/dev" {
			return nil // devices stay writable (/dev/null)
		}
		return remountRO(dst)
	case "tree":
		fd, err := strconv.Atoi(m.Data)
		if err != nil || fd < 4 {
			return errf(err, "a tree's descriptor ", strconv.Quote(m.Data))
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			err = mkdirAll(dst)
		} else {
			err = mkFile(dst)
		}
		if err != nil {
			return err
		}
		return unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH)
	case "tmpfs":
		if err := mkdirAll(dst); err != nil {
			return err
		}
		return unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, m.Data)
	case "devpts":
		if err := mkdirAll(dst); err != nil {
			return err
		}
		return unix.Mount("devpts", dst, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, m.Data)
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
		if err := unix.Mount("proc", dst, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return err
		}
		return maskProc(dst)
	}
	return errf(nil, "unknown mount kind ", strconv.Quote(m.Kind))
}

// What of /proc a run may read but not change, and what it may not see,
// as container runtimes have them (runc's and Docker's defaults).
var (
	procReadOnly = []string{"bus", "fs", "irq", "sys", "sysrq-trigger"}
	procMasked   = []string{"acpi", "asound", "interrupts", "kcore", "keys", "latency_stats", "sched_debug", "scsi",
		"timer_list", "timer_stats"}
)

// maskProc makes the global parts of the run's /proc read-only (its
// sysctls among them) and hides the ones that show the host (a file
// under /dev/null, a directory under an empty read-only tmpfs).
func maskProc(proc string) error {
	for _, name := range procReadOnly {
		p := proc + "/" + name
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return errf(err, "bind /proc/", name)
		}
		if err := remountRO(p); err != nil {
			return errf(err, "make /proc/", name, " read-only")
		}
	}
	for _, name := range procMasked {
		p := proc + "/" + name
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			continue
		case fi.IsDir():
			err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0,mode=0555")
		default:
			err = unix.Mount("/dev/null", p, "", unix.MS_BIND, "")
		}
		if err != nil {
			return errf(err, "mask /proc/", name)
		}
	}
	return nil
}

// mkFile makes a file's mount point.
func mkFile(p string) error {
	if err := mkdirAll(filepath.Dir(p)); err != nil {
		return err
	}
	if _, err := os.Lstat(p); err == nil {
		return nil
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
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
// argv: execName, procs, memory, seccomp filter (filterArg), the
// read-write trees (lines), path, args....
func execMain() int {
	if len(os.Args) < 7 {
		return fail("exec: bad arguments")
	}
	procs, _ := strconv.Atoi(os.Args[1])
	memory, _ := strconv.ParseInt(os.Args[2], 10, 64)
	filter, ok := parseFilterArg(os.Args[3])
	if !ok {
		return fail("exec: a bad seccomp filter argument")
	}
	var rw []string
	if os.Args[4] != "" {
		rw = strings.Split(os.Args[4], "\n")
	}
	path, args := os.Args[5], os.Args[6:]
	runtime.LockOSThread() // capabilities are per thread: drop them on the one that executes
	if procs > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: uint64(procs), Max: uint64(procs)}); err != nil {
			return fail("RLIMIT_NPROC: ", err.Error())
		}
	}
	if memory > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: uint64(memory), Max: uint64(memory)}); err != nil {
			return fail("RLIMIT_DATA: ", err.Error())
		}
	}
	if err := dropPrivileges(); err != nil {
		return fail("drop privileges: ", err.Error())
	}
	if err := applyLandlock(rw); err != nil {
		return fail(err.Error())
	}
	if err := loadSeccomp(filter); err != nil {
		return fail("seccomp: ", err.Error())
	}
	err := syscall.Exec(path, args, os.Environ())
	return fail("exec ", path, ": ", err.Error())
}

// loadSeccomp installs filter on the calling thread (no_new_privs is
// set), which the processes it starts inherit: the last step before the
// CLI's exec, since it refuses what the init does.
func loadSeccomp(filter []BPF) error {
	if len(filter) == 0 {
		return nil
	}
	prog := make([]unix.SockFilter, len(filter))
	for i, f := range filter {
		prog[i] = unix.SockFilter{Code: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	return unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0)
}

// filterArg is a filter as execMain's argument: each instruction 16 hex
// digits.
func filterArg(filter []BPF) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 0, 16*len(filter))
	for _, f := range filter {
		n := uint64(f.Code)<<48 | uint64(f.Jt)<<40 | uint64(f.Jf)<<32 | uint64(f.K)
		for i := 60; i >= 0; i -= 4 {
			b = append(b, digits[n>>i&0xf])
		}
	}
	return string(b)
}

func parseFilterArg(s string) ([]BPF, bool) {
	if len(s)%16 != 0 {
		return nil, false
	}
	var out []BPF
	for ; s != ""; s = s[16:] {
		n, err := strconv.ParseUint(s[:16], 16, 64)
		if err != nil {
			return nil, false
		}
		out = append(out, BPF{Code: uint16(n >> 48), Jt: uint8(n >> 40), Jf: uint8(n >> 32), K: uint32(n)})
	}
	return out, true
}

// dropPrivileges clears the calling thread's capabilities (bounding,
// ambient, and the sets themselves) and sets no_new_privs.
func dropPrivileges() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return errf(err, "no_new_privs")
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return errf(err, "clear the ambient capabilities")
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return errf(err, "drop capability ", strconv.Itoa(c), " from the bounding set")
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
		return fail("probe: not under the sandbox's init (parent pid ", strconv.Itoa(os.Getppid()), ")")
	}
	if _, err := os.Stat("/proc/self"); err != nil {
		return fail("probe: no /proc: ", err.Error())
	}
	if err := os.WriteFile("/agentmesh-probe", nil, 0o600); err == nil {
		return fail("probe: the root is writable")
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil || data[0].Effective != 0 || data[0].Permitted != 0 {
		return fail("probe: capabilities are left (", errString(err), ")")
	}
	if mode, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil || mode != unix.SECCOMP_MODE_FILTER {
		return fail("probe: not under the seccomp filter (", errString(err), ")")
	}
	return 0
}
