package trajstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// tempPrefix begins the name of a file being written. It is never an
// object name: a tenant, run id or sha256 holds no ".".
const tempPrefix = ".tmp-"

// staleTemp is the age after which Delete removes a temporary file left in
// a run's directory by a writer that crashed.
const staleTemp = time.Hour

// putRetries bounds the Puts made again because a concurrent Delete removed
// the run's directory between its creation and the write.
const putRetries = 3

// NewDirStore is a Store over a local directory (AGENT_ARTIFACT_ROOT), for
// single-host installs. root is made absolute, its existing part's symlinks
// are resolved, and it is refused with a *RootError when it is, or lies
// inside or above, the working directory or the git work tree holding it
// (docs/contract.md §10.6: the store writes outside the source tree). A missing root
// is created with mode 0o700.
//
// The object "<tenant>/<run_id>/<sha256>.json" is the file of that path
// under root, mode 0o600; directories are 0o700. A Put writes a temporary
// file in the same directory, syncs it, links it to its name (which fails
// if the name exists, so concurrent writers in any process agree on one
// file) and syncs the directory: a reader never sees a partial file, and a
// crashed writer leaves only a temporary file no name reaches. Every path
// is opened through an os.Root, so no name and no symlink under root
// reaches outside it. Delete removes the file, syncs its directory and
// prunes the run's and tenant's directories when they are empty.
func NewDirStore(root string) (Store, error) {
	resolved, err := checkRoot(root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(resolved, 0o700); err != nil {
		return nil, &RootError{Root: root, Resolved: resolved, Reason: "cannot create it", Err: err}
	}
	// Check again now that every element exists: one made a symlink since
	// the first check would show here.
	again, err := checkRoot(resolved)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(again)
	if err != nil {
		return nil, &RootError{Root: root, Resolved: again, Reason: "cannot stat it", Err: err}
	}
	if !fi.IsDir() {
		return nil, &RootError{Root: root, Resolved: again, Reason: "not a directory"}
	}
	return &dirStore{root: again}, nil
}

type dirStore struct{ root string }

// open parses name and opens the root; the caller closes it.
func (s *dirStore) open(ctx context.Context, op, name string) (r *os.Root, dir, file string, err error) {
	tenant, runID, _, err := ParseName(name)
	if err != nil {
		return nil, "", "", err
	}
	if err := ctx.Err(); err != nil {
		return nil, "", "", fmt.Errorf("%s %s: %w", op, name, err)
	}
	r, err = os.OpenRoot(s.root)
	if err != nil {
		return nil, "", "", fmt.Errorf("%s %s: open root: %w", op, name, err)
	}
	dir = filepath.Join(tenant, runID)
	return r, dir, filepath.Join(tenant, runID, filepath.Base(name)), nil
}

func (s *dirStore) Put(ctx context.Context, name string, data []byte) error {
	r, dir, file, err := s.open(ctx, "put", name)
	if err != nil {
		return err
	}
	defer r.Close()
	for attempt := 1; ; attempt++ {
		err = put(ctx, r, dir, file, name, data)
		if errors.Is(err, fs.ErrNotExist) && attempt < putRetries {
			continue // a Delete of another object of the run pruned the directory
		}
		if err != nil {
			return fmt.Errorf("put %s: %w", name, err)
		}
		return nil
	}
}

func put(ctx context.Context, r *os.Root, dir, file, name string, data []byte) error {
	if err := mkdirs(r, dir); err != nil {
		return err
	}
	if err := compare(r, file, name, data); !errors.Is(err, fs.ErrNotExist) {
		return err // stored already, with these bytes (nil) or others
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, tempPrefix+hex.EncodeToString(rnd[:]))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer r.Remove(tmp) // after the link, or after a failure: best effort
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err = r.Link(tmp, file)
	switch {
	case errors.Is(err, fs.ErrExist):
		return compare(r, file, name, data) // another writer was first
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.EMLINK):
		// A file system without hard links: rename replaces atomically,
		// so a writer that raced us replaces identical bytes, or loses a
		// conflict it would have been refused.
		if err := r.Rename(tmp, file); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	return syncDir(r, dir)
}

// compare is nil when file holds data, a *ConflictError when it holds
// other bytes, and an error wrapping fs.ErrNotExist when it is absent.
func compare(r *os.Root, file, name string, data []byte) error {
	stored, err := r.ReadFile(file)
	if err != nil {
		return err
	}
	if !bytes.Equal(stored, data) {
		return &ConflictError{Name: name, StoredSHA256: SHA256(stored), PutSHA256: SHA256(data)}
	}
	return nil
}

// mkdirs creates each missing directory of dir, 0o700, and syncs its
// parent so that the new entry is durable.
func mkdirs(r *os.Root, dir string) error {
	parent := "."
	for _, elem := range strings.Split(dir, string(filepath.Separator)) {
		p := filepath.Join(parent, elem)
		err := r.Mkdir(p, 0o700)
		switch {
		case err == nil:
			if err := syncDir(r, parent); err != nil {
				return err
			}
		case !errors.Is(err, fs.ErrExist):
			return err
		}
		parent = p
	}
	return nil
}

func syncDir(r *os.Root, dir string) error {
	d, err := r.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	return errors.Join(serr, d.Close())
}

func (s *dirStore) Get(ctx context.Context, name string) ([]byte, error) {
	r, _, file, err := s.open(ctx, "get", name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := r.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("get %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", name, err)
	}
	return data, nil
}

func (s *dirStore) Exists(ctx context.Context, name string) (bool, error) {
	r, _, file, err := s.open(ctx, "exists", name)
	if err != nil {
		return false, err
	}
	defer r.Close()
	fi, err := r.Lstat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("exists %s: %w", name, err)
	}
	return fi.Mode().IsRegular(), nil
}

func (s *dirStore) Delete(ctx context.Context, name string) error {
	r, dir, file, err := s.open(ctx, "delete", name)
	if err != nil {
		return err
	}
	defer r.Close()
	err = r.Remove(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Absent already; a sweep that crashed after the remove may not
		// have pruned, so prune below.
	case err != nil:
		return fmt.Errorf("delete %s: %w", name, err)
	default:
		// A concurrent Delete of another name may prune the directory
		// first: then there is nothing left to sync.
		if err := syncDir(r, dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete %s: %w", name, err)
		}
	}
	prune(r, dir)
	return nil
}

// prune removes temporary files older than staleTemp from dir, then dir
// and its parent if they are empty; all best effort. A Put that loses its
// directory to a prune makes it again.
func prune(r *os.Root, dir string) {
	if d, err := r.Open(dir); err == nil {
		entries, _ := d.ReadDir(-1)
		_ = d.Close()
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), tempPrefix) {
				continue
			}
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleTemp {
				_ = r.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	for p := dir; p != "."; p = filepath.Dir(p) {
		if r.Remove(p) != nil {
			return // not empty, or gone
		}
		_ = syncDir(r, filepath.Dir(p))
	}
}
