// Package cutfs is a test file system that models a power cut: a FUSE
// loopback mount over a backing directory that remembers, for each file,
// what it held at its last sync, so that Cut can forget everything
// written since.
//
// The model: a file's data (its bytes and its size) is durable once an
// fsync or fdatasync of the file returns, or a write through a handle
// opened with O_SYNC or O_DSYNC does. Data written since the file's last
// sync is not, and closing the file does not make it so. Cut is the
// power going off: first every further operation on the mount fails with
// EIO, so nothing a process writes after the cut lands; then every file
// is rolled back to its last-synced content and size (a file created
// since and never synced becomes empty). What stays on the backing
// directory is what the disk held when the power went. The mount stays
// dead; a new Mount on the same backing directory is the machine coming
// back.
//
// The model's one simplification: name operations (create, mkdir,
// rename, unlink, link, rmdir) are durable at once, where ext4's journal
// commits them within about 5 s. So a temporary file written without a
// sync and renamed over another survives a cut under the new name, empty.
//
// It keeps, per inode of the backing directory, an undo log: the size at
// the last sync and the old bytes of each range of that size overwritten
// or truncated away since, saved before the first change. A sync clears
// it. Fallocate, copy_file_range (the kernel then copies through reads
// and writes), O_TMPFILE and extended attributes are not supported. The
// backing directory's own durability is not modelled: a sync does not
// fsync it.
package cutfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted cut file system.
type FS struct {
	backing, dir string
	server       *fuse.Server

	// mu is held for reading by every operation on the mount and for
	// writing by Cut, so an operation either lands before the cut or
	// fails after it.
	mu   sync.RWMutex
	dead bool

	logsMu sync.Mutex
	logs   map[uint64]*undoLog // by the backing file's inode number
}

// undoLog is what a file held at its last sync: its size then, and the
// old bytes of the ranges below that size changed since, each saved
// before its first change.
type undoLog struct {
	mu    sync.Mutex
	size  int64
	saved []span // disjoint, sorted by offset
}

type span struct {
	off int64
	b   []byte
}

// Mount mounts a cut file system at dir over the directory backing, as
// the backing directory's content stands (all of it durable).
func Mount(backing, dir string) (*FS, error) {
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, err
	}
	root, err := gofs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, err
	}
	c := &FS{backing: backing, dir: dir, logs: map[uint64]*undoLog{}}
	server, err := gofs.Mount(dir, &node{LoopbackNode: root.(*gofs.LoopbackNode), c: c}, &gofs.Options{
		MountOptions: fuse.MountOptions{
			FsName:            "cutfs",
			Name:              "cutfs",
			DirectMountStrict: true, // mount(2) as root; no fusermount
			DisableXAttrs:     true,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("mount cutfs on %s: %w", dir, err)
	}
	c.server = server
	return c, nil
}

// MountT mounts a cut file system over backing at dir (a directory of
// the test's, such as t.TempDir(), so that it is removed after the
// unmount) and unmounts it when the test ends. It skips the test, saying
// why, where FUSE is not available (no /dev/fuse, or no permission to
// mount).
func MountT(t testing.TB, backing, dir string) *FS {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("power-cut test needs /dev/fuse: %v", err)
	}
	c, err := Mount(backing, dir)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		t.Skipf("power-cut test needs /dev/fuse and permission to mount it: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", c.dir, err)
		}
	})
	return c
}

// Dir is the mount point.
func (c *FS) Dir() string { return c.dir }

// Unmount unmounts the file system, if it still is mounted (a second
// Unmount does nothing). A mount still busy
// after go-fuse's retries is detached (the kernel finishes it once its
// last user goes) and reported.
func (c *FS) Unmount() error {
	err := c.server.Unmount()
	if err != nil {
		if derr := syscall.Unmount(c.dir, syscall.MNT_DETACH); derr != nil {
			err = errors.Join(err, derr)
		}
	}
	return err
}

// Cut cuts the power: every operation on the mount fails with EIO from
// now on, and every file on the backing directory is rolled back to its
// content and size at its last sync. Files removed since are gone for
// good (name operations are durable). A second Cut does nothing.
func (c *FS) Cut() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return nil
	}
	c.dead = true
	c.logsMu.Lock()
	defer c.logsMu.Unlock()
	done := map[uint64]bool{} // a file of several names is rolled back once
	return filepath.WalkDir(c.backing, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		ino := info.Sys().(*syscall.Stat_t).Ino
		l := c.logs[ino]
		if l == nil || done[ino] {
			return nil
		}
		done[ino] = true
		return l.rollBack(path)
	})
}

// rollBack puts the file at path back to l.
func (l *undoLog) rollBack(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	for _, s := range l.saved {
		if _, err := f.WriteAt(s.b, s.off); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Truncate(l.size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// enter starts an operation: EIO once the power is cut. Every enter that
// returns 0 is followed by a leave.
func (c *FS) enter() syscall.Errno {
	c.mu.RLock()
	if c.dead {
		c.mu.RUnlock()
		return syscall.EIO
	}
	return 0
}

func (c *FS) leave() { c.mu.RUnlock() }

// log returns the undo log of inode ino, the file at src (a path that
// opens it), locked; a file without one is as it was at its last sync,
// so its log starts at its current size.
func (c *FS) log(ino uint64, src string) (*undoLog, error) {
	c.logsMu.Lock()
	l := c.logs[ino]
	if l == nil {
		st, err := os.Stat(src)
		if err != nil {
			c.logsMu.Unlock()
			return nil, err
		}
		l = &undoLog{size: st.Size()}
		c.logs[ino] = l
	}
	c.logsMu.Unlock()
	l.mu.Lock()
	return l, nil
}

// created starts a fresh log for a file just created: never synced, so
// empty at a cut. A log left by an earlier file of the same inode number
// is replaced.
func (c *FS) created(ino uint64) {
	c.logsMu.Lock()
	defer c.logsMu.Unlock()
	c.logs[ino] = &undoLog{}
}

// save keeps the old bytes of [off, end) below the synced size that no
// earlier change saved, reading them from src (any bytes not saved are
// still as synced).
func (l *undoLog) save(src string, off, end int64) error {
	end = min(end, l.size)
	var gaps []span
	for _, s := range l.saved {
		if off >= end {
			break
		}
		if s.off > off {
			gaps = append(gaps, span{off: off, b: make([]byte, min(s.off, end)-off)})
		}
		off = max(off, s.off+int64(len(s.b)))
	}
	if off < end {
		gaps = append(gaps, span{off: off, b: make([]byte, end-off)})
	}
	if len(gaps) == 0 {
		return nil
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, g := range gaps {
		if _, err := f.ReadAt(g.b, g.off); err != nil {
			return fmt.Errorf("save %d bytes at %d of %s: %w", len(g.b), g.off, src, err)
		}
	}
	l.saved = append(l.saved, gaps...)
	slices.SortFunc(l.saved, func(a, b span) int { return int(a.off - b.off) })
	return nil
}

// commit makes the file at src durable as it is now.
func (l *undoLog) commit(src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	l.size, l.saved = st.Size(), nil
	return nil
}

// truncate truncates the file of inode ino at src to size, first saving
// what the truncation changes.
func (c *FS) truncate(ino uint64, src string, size int64) syscall.Errno {
	l, err := c.log(ino, src)
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer l.mu.Unlock()
	if err := l.save(src, size, l.size); err != nil {
		return syscall.EIO
	}
	return gofs.ToErrno(os.Truncate(src, size))
}

// node is a loopback node whose every operation enters the FS, and whose
// data changes go through its undo logs.
type node struct {
	*gofs.LoopbackNode
	c *FS
}

var (
	_ gofs.NodeWrapChilder = (*node)(nil)
	_ gofs.NodeOpener      = (*node)(nil)
	_ gofs.NodeCreater     = (*node)(nil)
	_ gofs.NodeSetattrer   = (*node)(nil)
)

// WrapChild makes every node of the tree a node.
func (n *node) WrapChild(ctx context.Context, ops gofs.InodeEmbedder) gofs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*gofs.LoopbackNode), c: n.c}
}

// path is the node's path on the backing directory.
func (n *node) path() string { return filepath.Join(n.c.backing, n.Path(nil)) }

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	if e := n.c.enter(); e != 0 {
		return e
	}
	defer n.c.leave()
	return n.LoopbackNode.Statfs(ctx, out)
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := n.c.enter(); e != 0 {
		return nil, e
	}
	defer n.c.leave()
	return n.LoopbackNode.Lookup(ctx, name, out)
}

func (n *node) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if e := n.c.enter(); e != 0 {
		return e
	}
	defer n.c.leave()
	if h, ok := f.(*file); ok {
		return h.lf.Getattr(ctx, out)
	}
	return n.LoopbackNode.Getattr(ctx, nil, out)
}

func (n *node) Statx(ctx context.Context, f gofs.FileHandle, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	if e := n.c.enter(); e != 0 {
		return e
	}
	defer n.c.leave()
	if h, ok := f.(*file); ok {
		f = h.lf
	}
	return n.LoopbackNode.Statx(ctx, f, flags, mask, out)
}

// Setattr saves what a change of size overwrites before it.
func (n *node) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := n.c.enter(); e != 0 {
		return e
	}
	defer n.c.leave()
	var lf gofs.FileHandle
	if h, ok := f.(*file); ok {
		lf = h.lf
	}
	if size, ok := in.GetSize(); ok {
		ino, src := uint64(0), n.path()
		if h, ok := f.(*file); ok {
			ino, src = h.ino, h.src
		} else {
			st, err := os.Lstat(src)
			if err != nil {
				return gofs.ToErrno(err)
			}
			ino = st.Sys().(*syscall.Stat_t).Ino
		}
		if e := n.c.truncate(ino, src, int64(size)); e != 0 {
			return e
		}
		in.Valid &^= fuse.FATTR_SIZE
	}
	return n.LoopbackNode.Setattr(ctx, lf, in, out)
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if e := n.c.enter(); e != 0 {
		return nil, e
	}
	defer n.c.leave()
	return n.LoopbackNode.Readlink(ctx)
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if e := n.c.enter(); e != 0 {
		return nil, 0, e
	}
	defer n.c.leave()
	return n.LoopbackNode.OpendirHandle(ctx, flags)
}

func (n *node) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	if e := n.c.enter(); e != 0 {
		return nil, e
	}
	defer n.c.leave()
	return n.LoopbackNode.Readdir(ctx)
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := n.c.enter(); e != 0 {
		return nil, e
	}
	defer n.c.leave()
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

// Mknod starts a fresh log for a regular file it makes.
func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := n.c.enter(); e != 0 {
		return nil, e
	}
	defer n.c.leave()
	ch, e := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	if e == 0 && mode&syscall.S_IFMT == syscall.S_IFREG {
		n.c.created(out.Ino)
	}
	return ch, e
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if e := n.c.enter(); e != 0 {
		return e
	}
	defer n.c.leave()
	return n.LoopbackNode.Rmdir(ctx, name)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if e := n.c.enter(); e != 0 {
		return e
	}
	defer n.c.leave()
	return n.LoopbackNode.Unlink(ctx, name)
}

func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if e := n.c.enter(); e != 0 {
		return e
	}
	defer n.c.leave()
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := n.c.enter(); e != 0 {
		return nil, e
	}
	defer n.c.leave()
	return n.LoopbackNode.Symlink(ctx, target, name, out)
}

func (n *node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := n.c.enter(); e != 0 {
		return nil, e
	}
	defer n.c.leave()
	return n.LoopbackNode.Link(ctx, target, name, out)
}

// CopyFileRange is not supported: the kernel then copies through Read
// and Write, which keep the undo log.
func (n *node) CopyFileRange(context.Context, gofs.FileHandle, uint64, *gofs.Inode, gofs.FileHandle, uint64, uint64, uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// Tmpfile (O_TMPFILE) is not supported.
func (n *node) Tmpfile(context.Context, uint32, uint32, *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

// Open opens the file; a truncation (O_TRUNC) is saved first, and a
// handle opened O_SYNC or O_DSYNC syncs each write.
func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if e := n.c.enter(); e != 0 {
		return nil, 0, e
	}
	defer n.c.leave()
	fh, fuseFlags, e := n.LoopbackNode.Open(ctx, flags&^(syscall.O_TRUNC|syscall.O_SYNC|syscall.O_DSYNC))
	if e != 0 {
		return nil, 0, e
	}
	h, e := n.c.handle(fh, flags)
	if e == 0 && flags&syscall.O_TRUNC != 0 {
		e = n.c.truncate(h.ino, h.src, 0)
	}
	if e != 0 {
		fh.(gofs.FileReleaser).Release(ctx)
		return nil, 0, e
	}
	return h, fuseFlags, 0
}

// Create creates the file with a fresh log (it was never synced); a file
// that was there already (the kernel asked after a stale lookup) is
// opened as Open would.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if e := n.c.enter(); e != 0 {
		return nil, nil, 0, e
	}
	defer n.c.leave()
	_, err := os.Lstat(filepath.Join(n.path(), name))
	existed := err == nil
	ch, fh, fuseFlags, e := n.LoopbackNode.Create(ctx, name, flags&^(syscall.O_TRUNC|syscall.O_SYNC|syscall.O_DSYNC), mode, out)
	if e != 0 {
		return nil, nil, 0, e
	}
	h, e := n.c.handle(fh, flags)
	switch {
	case e != 0:
	case !existed:
		n.c.created(h.ino)
	case flags&syscall.O_TRUNC != 0:
		e = n.c.truncate(h.ino, h.src, 0)
	}
	if e != 0 {
		fh.(gofs.FileReleaser).Release(ctx)
		return nil, nil, 0, e
	}
	return ch, h, fuseFlags, 0
}

// handle wraps the loopback handle fh of a file opened with flags.
func (c *FS) handle(fh gofs.FileHandle, flags uint32) (*file, syscall.Errno) {
	lf := fh.(*gofs.LoopbackFile)
	// The descriptor stays open until Release; src reopens its file for
	// reading, whatever fh's mode, to save old bytes.
	fd, ok := lf.PassthroughFd()
	if !ok {
		return nil, syscall.EBADF
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, gofs.ToErrno(err)
	}
	return &file{c: c, lf: lf, ino: st.Ino, src: "/proc/self/fd/" + strconv.Itoa(fd), sync: flags&(syscall.O_SYNC|syscall.O_DSYNC) != 0}, 0
}

// file is an open file: a loopback handle whose writes keep the undo log
// and whose syncs clear it.
type file struct {
	c    *FS
	lf   *gofs.LoopbackFile
	ino  uint64
	src  string
	sync bool // opened O_SYNC or O_DSYNC
}

var (
	_ gofs.FileReader    = (*file)(nil)
	_ gofs.FileWriter    = (*file)(nil)
	_ gofs.FileWritever  = (*file)(nil)
	_ gofs.FileFsyncer   = (*file)(nil)
	_ gofs.FileFlusher   = (*file)(nil)
	_ gofs.FileReleaser  = (*file)(nil)
	_ gofs.FileGetattrer = (*file)(nil)
)

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if e := f.c.enter(); e != 0 {
		return nil, e
	}
	defer f.c.leave()
	return f.lf.Read(ctx, buf, off)
}

// Write saves the old bytes it overwrites below the synced size, then
// writes; through an O_SYNC handle the file is then durable.
func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if e := f.c.enter(); e != 0 {
		return 0, e
	}
	defer f.c.leave()
	l, err := f.c.log(f.ino, f.src)
	if err != nil {
		return 0, gofs.ToErrno(err)
	}
	defer l.mu.Unlock()
	if err := l.save(f.src, off, off+int64(len(data))); err != nil {
		return 0, syscall.EIO
	}
	n, e := f.lf.Write(ctx, data, off)
	if e == 0 && f.sync {
		if err := l.commit(f.src); err != nil {
			return n, gofs.ToErrno(err)
		}
	}
	return n, e
}

// Writev writes data's slices as one Write.
func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	return f.Write(ctx, slices.Concat(data...), off)
}

// Fsync (fsync and fdatasync alike) makes the file durable as it is.
func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if e := f.c.enter(); e != 0 {
		return e
	}
	defer f.c.leave()
	l, err := f.c.log(f.ino, f.src)
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer l.mu.Unlock()
	return gofs.ToErrno(l.commit(f.src))
}

// Flush (each close) makes nothing durable.
func (f *file) Flush(ctx context.Context) syscall.Errno {
	if e := f.c.enter(); e != 0 {
		return e
	}
	defer f.c.leave()
	return f.lf.Flush(ctx)
}

// Release closes the backing file, after a cut too.
func (f *file) Release(ctx context.Context) syscall.Errno {
	return f.lf.Release(ctx)
}

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	if e := f.c.enter(); e != 0 {
		return e
	}
	defer f.c.leave()
	return f.lf.Getattr(ctx, out)
}
