package cutfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest/cutfs"
	"go.uber.org/goleak"
)

// TestMain checks that unmounting leaves no go-fuse goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mount mounts a cut file system over a fresh backing directory.
func mount(t *testing.T) (c *cutfs.FS, backing string) {
	t.Helper()
	backing = t.TempDir()
	return cutfs.MountT(t, backing, t.TempDir()), backing
}

// write writes b to name on the mount (created or truncated), running
// then (if not nil) on the open file before closing it.
func write(t *testing.T, name string, flag int, b []byte, then func(*os.File) error) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|flag, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if then != nil {
		if err := then(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func fsync(f *os.File) error { return f.Sync() }

func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// syncTruncateRewrite syncs f, truncates it to 4 bytes and writes "xy"
// after them.
func syncTruncateRewrite(f *os.File) error {
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Truncate(4); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte("xy"), 4)
	return err
}

// content is the file's content, or "<absent>".
func content(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCut: each case changes files on a fresh mount, some synced, some
// not; after the cut the backing directory holds what was synced, and
// only that.
func TestCut(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, dir string)
		want   map[string]string // backing file name → content after the cut
	}{{
		name: "a new file never synced is empty, closed or not",
		change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "new"), 0, []byte("unsynced"), nil)
			if got := content(t, filepath.Join(dir, "new")); got != "unsynced" {
				t.Fatalf("before the cut: %q", got)
			}
		},
		want: map[string]string{"new": ""},
	}, {
		name: "fsync keeps what was written before it, not after",
		change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "log"), 0, []byte("hello"), func(f *os.File) error {
				if err := f.Sync(); err != nil {
					return err
				}
				_, err := f.Write([]byte(" world"))
				return err
			})
		},
		want: map[string]string{"log": "hello"},
	}, {
		name: "fdatasync is a sync",
		change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "f"), 0, []byte("data"), fdatasync)
		},
		want: map[string]string{"f": "data"},
	}, {
		name: "a write through an O_SYNC handle is durable",
		change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "f"), os.O_SYNC, []byte("synced"), nil)
		},
		want: map[string]string{"f": "synced"},
	}, {
		name: "an overwrite in place is undone, the last synced version kept",
		change: func(t *testing.T, dir string) {
			name := filepath.Join(dir, "f")
			write(t, name, 0, []byte("AAAAAAAA"), fsync)
			f, err := os.OpenFile(name, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, w := range []struct {
				s    string
				off  int64
				sync bool
			}{{"bb", 2, true}, {"cccc", 1, false}, {"dd", 6, false}, {"eeee", 7, false}} {
				if _, err := f.WriteAt([]byte(w.s), w.off); err != nil {
					t.Fatal(err)
				}
				if w.sync {
					if err := f.Sync(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := content(t, name); got != "AccccAdeeee" {
				t.Fatalf("before the cut: %q", got)
			}
		},
		want: map[string]string{"f": "AAbbAAAA"},
	}, {
		name: "a temporary file renamed unsynced over a synced one leaves it empty",
		change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "index"), 0, []byte("old"), fsync)
			write(t, filepath.Join(dir, "index.tmp"), os.O_TRUNC, []byte("new"), nil)
			if err := os.Rename(filepath.Join(dir, "index.tmp"), filepath.Join(dir, "index")); err != nil {
				t.Fatal(err)
			}
		},
		want: map[string]string{"index": "", "index.tmp": "<absent>"},
	}, {
		name: "a temporary file written O_SYNC and renamed is durable under its new name",
		change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "index"), 0, []byte("old"), fsync)
			write(t, filepath.Join(dir, "index.tmp"), os.O_TRUNC|os.O_SYNC, []byte("new"), nil)
			if err := os.Rename(filepath.Join(dir, "index.tmp"), filepath.Join(dir, "index")); err != nil {
				t.Fatal(err)
			}
		},
		want: map[string]string{"index": "new", "index.tmp": "<absent>"},
	}, {
		name: "ftruncate and a rewrite past it are undone",
		change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "blk"), 0, []byte("0123456789"), syncTruncateRewrite)
		},
		want: map[string]string{"blk": "0123456789"},
	}, {
		name: "a synced truncation is kept",
		change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "blk"), 0, []byte("0123456789"), func(f *os.File) error {
				if err := syncTruncateRewrite(f); err != nil {
					return err
				}
				if err := f.Sync(); err != nil {
					return err
				}
				_, err := f.WriteAt([]byte("zzzzzz"), 2)
				return err
			})
		},
		want: map[string]string{"blk": "0123xy"},
	}, {
		name: "truncate by path and O_TRUNC are undone",
		change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "a"), 0, []byte("aaaa"), fsync)
			write(t, filepath.Join(dir, "b"), 0, []byte("bbbb"), fsync)
			if err := os.Truncate(filepath.Join(dir, "a"), 1); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "b"), os.O_TRUNC, []byte("B"), nil)
			if got := content(t, filepath.Join(dir, "a")) + content(t, filepath.Join(dir, "b")); got != "aB" {
				t.Fatalf("before the cut: %q", got)
			}
		},
		want: map[string]string{"a": "aaaa", "b": "bbbb"},
	}, {
		name: "name operations are durable at once",
		change: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "gone"), 0, []byte("synced"), fsync)
			if err := os.Remove(filepath.Join(dir, "gone")); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "d", "f"), 0, []byte("x"), fsync)
			if err := os.Rename(filepath.Join(dir, "d", "f"), filepath.Join(dir, "moved")); err != nil {
				t.Fatal(err)
			}
		},
		want: map[string]string{"gone": "<absent>", "d/f": "<absent>", "moved": "x"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, backing := mount(t)
			tt.change(t, c.Dir())
			if err := c.Cut(); err != nil {
				t.Fatal(err)
			}
			for name, want := range tt.want {
				if got := content(t, filepath.Join(backing, name)); got != want {
					t.Errorf("%s after the cut: %q, want %q", name, got, want)
				}
			}
		})
	}
}

// TestCutFailsEveryOperation: after the cut nothing reaches the backing
// directory, through a file open before it or a new one.
func TestCutFailsEveryOperation(t *testing.T) {
	c, backing := mount(t)
	name := filepath.Join(c.Dir(), "f")
	write(t, name, 0, []byte("synced"), fsync)
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Cut(); err != nil {
		t.Fatal(err)
	}
	for op, err := range map[string]error{
		"write":  func() error { _, err := f.WriteAt([]byte("late"), 0); return err }(),
		"fsync":  f.Sync(),
		"open":   func() error { g, err := os.Open(name); g.Close(); return err }(),
		"create": func() error { g, err := os.Create(filepath.Join(c.Dir(), "new")); g.Close(); return err }(),
		"mkdir":  os.Mkdir(filepath.Join(c.Dir(), "d"), 0o700),
		"rename": os.Rename(name, filepath.Join(c.Dir(), "g")),
		"unlink": os.Remove(name),
	} {
		if !errors.Is(err, syscall.EIO) {
			t.Errorf("%s after the cut: %v, want EIO", op, err)
		}
	}
	_ = f.Close() // its flush fails too
	entries, err := os.ReadDir(backing)
	if err != nil || len(entries) != 1 || entries[0].Name() != "f" {
		t.Errorf("backing directory after the cut: %v, %v; want only f", entries, err)
	}
	if got := content(t, filepath.Join(backing, "f")); got != "synced" {
		t.Errorf("f after the cut: %q", got)
	}
}

// TestCutConcurrentAppends: writers append records and fsync after each,
// as a message store does, while the power is cut. Every record whose
// fsync returned is there afterwards, intact; of the rest at most the one
// whose fsync finished as the cut came.
func TestCutConcurrentAppends(t *testing.T) {
	c, backing := mount(t)
	const writers, size = 4, 64
	record := func(w, i int) []byte {
		return fmt.Appendf(nil, "%-*s\n", size-1, fmt.Sprintf("writer %d record %d", w, i))
	}
	acked := make([]int, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			f, err := os.OpenFile(filepath.Join(c.Dir(), fmt.Sprint(w)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for i := 0; ; i++ {
				if _, err := f.Write(record(w, i)); err != nil {
					return
				}
				// An unsynced record after each synced one.
				if i%2 == 1 {
					continue
				}
				if err := f.Sync(); err != nil {
					return
				}
				acked[w] = i + 1
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	if err := c.Cut(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for w := range writers {
		b, err := os.ReadFile(filepath.Join(backing, fmt.Sprint(w)))
		if err != nil {
			t.Fatal(err)
		}
		n := len(b) / size
		if len(b)%size != 0 || n < acked[w] || n > acked[w]+2 || n%2 == 0 && n > 0 {
			t.Errorf("writer %d: %d bytes (%d records) after the cut, %d acknowledged; want whole synced records", w, len(b), n, acked[w])
		}
		for i := range n {
			if got := b[i*size : (i+1)*size]; !bytes.Equal(got, record(w, i)) {
				t.Errorf("writer %d record %d: %q", w, i, got)
			}
		}
		if acked[w] < 10 {
			t.Errorf("writer %d: only %d records acknowledged before the cut", w, acked[w])
		}
	}
}

// TestMountAgain: after a cut, a new mount on the backing directory (the
// machine back up) shows the rolled-back files, and a second cut rolls
// back to what it found.
func TestMountAgain(t *testing.T) {
	backing := t.TempDir()
	mnt := t.TempDir()
	first := cutfs.MountT(t, backing, mnt)
	write(t, filepath.Join(first.Dir(), "f"), 0, []byte("one"), fsync)
	write(t, filepath.Join(first.Dir(), "f"), os.O_TRUNC, []byte("two"), nil)
	if err := first.Cut(); err != nil {
		t.Fatal(err)
	}
	if err := first.Unmount(); err != nil {
		t.Fatal(err)
	}
	again := cutfs.MountT(t, backing, mnt) // where the first was
	name := filepath.Join(again.Dir(), "f")
	if got := content(t, name); got != "one" {
		t.Fatalf("after mounting again: %q, want one", got)
	}
	write(t, name, os.O_APPEND, []byte(" three"), nil)
	if err := again.Cut(); err != nil {
		t.Fatal(err)
	}
	if got := content(t, filepath.Join(backing, "f")); got != "one" {
		t.Errorf("after the second cut: %q, want one", got)
	}
}
