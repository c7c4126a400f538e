package sandboxinit

import (
	"errors"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock is a second fence on the run's file view, where the kernel
// has it: the CLI may write only in the view's read-write trees (its
// workspace, state directories, /tmp, its private home), read and
// execute the rest, and write the devices of /dev and its own /proc
// files. The mounts are the first fence; this one holds should a mount
// of the view be writable by mistake. Raw system calls (x/sys/unix), to
// keep the init small.

// LandlockABI is the kernel's Landlock ABI version, or an error saying
// why there is none (not built, or not enabled at boot).
func LandlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

// The file system rights of each ABI version the fence handles.
const (
	fsRightsV1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	readRights = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
)

func handledRights(abi int) uint64 {
	r := uint64(fsRightsV1)
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

// writable are the view's read-write trees, for the fence.
func writable(mounts []Mount) []string {
	var out []string
	for _, m := range mounts {
		switch {
		case m.Kind == "bind", m.Kind == "tmpfs" && !m.RO, m.Kind == "tree" && !m.RO && !strings.HasPrefix(m.Src, "/dev/"):
			out = append(out, m.Dst)
		}
	}
	return out
}

// applyLandlock fences the calling thread (no_new_privs set), and what
// it starts, to the view: rw read-write, the rest read and execute. A
// kernel without Landlock leaves the view to its mounts.
func applyLandlock(rw []string) error {
	abi, err := LandlockABI()
	if err != nil {
		return nil
	}
	handled := handledRights(abi)
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled}
	if abi >= 6 {
		// No signal to the init, no abstract socket outside the run.
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return errf(errno, "landlock ruleset")
	}
	defer unix.Close(int(fd))
	rules := []struct {
		path   string
		rights uint64
	}{
		{"/", readRights | unix.LANDLOCK_ACCESS_FS_EXECUTE},
		{"/dev", readRights | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV},
		{"/proc", readRights | unix.LANDLOCK_ACCESS_FS_WRITE_FILE},
	}
	for _, p := range rw {
		rules = append(rules, struct {
			path   string
			rights uint64
		}{p, handled})
	}
	for _, r := range rules {
		if err := addRule(int(fd), r.path, r.rights&handled); err != nil {
			return errf(err, "landlock rule for ", r.path)
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return errf(errno, "landlock")
	}
	return nil
}

// addRule allows rights beneath path (a file's own rights only, for a
// file); a path the view lacks is skipped.
func addRule(ruleset int, path string, rights uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		rights &= fileRights
	}
	pb := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&pb)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
