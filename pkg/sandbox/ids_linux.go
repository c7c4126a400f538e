package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/agentmesh/agentmesh/pkg/sandbox/sandboxinit"
	"golang.org/x/sys/unix"
)

// A root runner's runs never hold host root: each run's user namespace
// maps its uid and gid 0 to a host uid and gid of their own, leased from
// a range for the run's life, which no other run of any runner on the
// host holds meanwhile. The run's view is made of mounts the runner
// opens (open_tree) and passes to the init as descriptors, idmapped so
// that what is root's on the disk is the run's root inside, and what the
// run writes is root's on the disk: the runner reads and packs it as
// before, and no file changes owner.

// Defaults of Config.UIDBase and Config.UIDCount.
const (
	DefaultUIDBase  = 1_800_000_000
	DefaultUIDCount = 4096
)

// UIDLockDir holds one lock file per leased host uid, flock'd by the run
// that holds it (a lock its process's end lets go of), and the directory
// each run's init mounts its root on, which the run's uid reaches (0711).
const UIDLockDir = "/run/agentmesh-sandbox"

// mapsIDs reports whether runs get host ids of their own: when this
// process is root.
func mapsIDs() bool { return os.Geteuid() == 0 }

// idRange is the range of host uids (and gids, the same numbers) runs
// lease from.
func (c Config) idRange() (base, count int) {
	base, count = c.UIDBase, c.UIDCount
	if base <= 0 {
		base = DefaultUIDBase
	}
	if count <= 0 {
		count = DefaultUIDCount
	}
	return base, count
}

// A lease is a host uid (and the gid of the same number) a run holds.
type lease struct {
	id   int
	lock *os.File
}

// leaseID takes the lowest id of the range no run holds, by its lock
// file (the lowest, so that the idmap namespaces made for a few ids
// serve every run).
func (c Config) leaseID() (*lease, error) {
	base, count := c.idRange()
	if err := os.MkdirAll(UIDLockDir, 0o711); err != nil {
		return nil, fmt.Errorf("uid lock directory: %v", err)
	}
	if err := os.Chmod(UIDLockDir, 0o711); err != nil {
		return nil, fmt.Errorf("uid lock directory: %v", err)
	}
	for id := base; id < base+count; id++ {
		f, err := os.OpenFile(filepath.Join(UIDLockDir, "uid-"+strconv.Itoa(id)+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("uid lock: %v", err)
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &lease{id: id, lock: f}, nil
		}
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("uid lock: %v", err)
		}
	}
	return nil, fmt.Errorf("every host uid of the sandbox's range (%d, %d of them: AGENTMESH_SANDBOX_UID_BASE, AGENTMESH_SANDBOX_UID_COUNT) is held by a run", base, count)
}

func (l *lease) release() {
	if l != nil {
		l.lock.Close()
	}
}

// idmaps are user namespaces that map 0 to a host id, one per id, made
// once (a process that holds them for a moment) and kept for the idmapped
// mounts of every run that leases the id.
var idmaps = struct {
	sync.Mutex
	fds map[int]int
}{fds: map[int]int{}}

// idmapNS returns a user namespace whose 0 is the host's id.
func idmapNS(init string, id int) (int, error) {
	idmaps.Lock()
	defer idmaps.Unlock()
	if fd, ok := idmaps.fds[id]; ok {
		return fd, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	defer r.Close()
	defer w.Close()
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{sandboxinit.HoldName}, Env: []string{}, Dir: "/", Stdin: r,
		SysProcAttr: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, Pdeathsig: syscall.SIGKILL,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: id, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: id, Size: 1}}}}
	if init != "" {
		if cmd.Path, err = execByFd(cmd, init); err != nil {
			return -1, err
		}
		defer cmd.ExtraFiles[0].Close()
	}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("the idmap namespace of uid %d: %v", id, err)
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	w.Close()
	_ = cmd.Wait()
	if err != nil {
		return -1, fmt.Errorf("the idmap namespace of uid %d: %v", id, err)
	}
	idmaps.fds[id] = fd
	return fd, nil
}

// trees replaces each bind of mounts (bind, robind, file) with a tree
// kind, the mount opened here (open_tree) read-only where the bind is,
// idmapped to the run's id where its file system allows, and returned as
// a descriptor the init gets at first+i. A read-write tree whose file system
// cannot be idmapped is given to the run's id instead (chown).
func trees(mounts []sandboxinit.Mount, first, ns, id int) ([]*os.File, error) {
	var files []*os.File
	fail := func(err error) ([]*os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	for i, m := range mounts {
		if m.Kind != "bind" && m.Kind != "robind" && m.Kind != "file" {
			continue
		}
		flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
		if m.Kind != "file" {
			flags |= unix.AT_RECURSIVE
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, m.Src, flags)
		if err != nil {
			return fail(fmt.Errorf("open %s: %v", m.Src, err))
		}
		f := os.NewFile(uintptr(fd), m.Src)
		files = append(files, f)
		dev := strings.HasPrefix(m.Src, "/dev/")
		var attr uint64
		if m.Kind == "robind" || m.Kind == "file" && !dev {
			attr |= unix.MOUNT_ATTR_RDONLY
		}
		set := func(attr uint64) error {
			if attr == 0 {
				return nil
			}
			a := unix.MountAttr{Attr_set: attr}
			if attr&unix.MOUNT_ATTR_IDMAP != 0 {
				a.Userns_fd = uint64(ns)
			}
			return unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &a)
		}
		err = errors.New("a device")
		if !dev {
			err = set(attr | unix.MOUNT_ATTR_IDMAP)
		}
		if err != nil {
			if err := set(attr); err != nil {
				return fail(fmt.Errorf("mount %s: %v", m.Src, err))
			}
			if m.Kind == "bind" {
				if err := chownTree(m.Src, id); err != nil {
					return fail(fmt.Errorf("give %s to uid %d (its file system cannot be idmapped): %v", m.Src, id, err))
				}
			}
		}
		mounts[i] = sandboxinit.Mount{Kind: "tree", Src: m.Src, Dst: m.Dst, Data: strconv.Itoa(first + len(files) - 1),
			RO: attr&unix.MOUNT_ATTR_RDONLY != 0}
	}
	return files, nil
}

// chownTree gives a tree to id, its uid and gid.
func chownTree(root string, id int) error {
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, id, id)
	})
}
