package workspace

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// headerCost is what each entry counts against Unpack's limit besides its
// bytes, so that a million empty files is as much of a bomb as a big one.
const headerCost = 512

// Unpack extracts the tar r into dir, which must not exist yet. It refuses,
// with a *UnsafePathError naming the entry, an absolute name, a ".."
// component, a ".git" component, a name given twice, a name under a
// symlink or a file, a symlink that may lead outside dir (see Pack), a
// hard link to anything but an earlier regular file of the archive, and any
// device, fifo or other special entry; with a *TooLargeError more than
// limit bytes of content (each entry counting 512 bytes besides its own;
// limit <= 0: no limit). Entries are written into a fresh directory next to
// dir, renamed to dir once all of them are in: on any error dir does not
// exist and nothing is left.
func Unpack(r io.Reader, dir string, limit int64) (err error) {
	dir = filepath.Clean(dir)
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unpack: %s already exists", dir)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".unpack-")
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	u := &unpacker{root: tmp, kinds: map[string]byte{}, limit: limit}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return err
		}
	}
	if err := u.finish(); err != nil {
		return err
	}
	// MkdirTemp made it 0700; an archive does not carry the top's mode.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	return nil
}

type unpacker struct {
	root  string
	kinds map[string]byte // clean name → tar.TypeDir, TypeReg or TypeSymlink
	dirs  []dirMode
	used  int64
	limit int64
}

type dirMode struct {
	name string
	mode os.FileMode
}

func (u *unpacker) charge(name string, n int64) error {
	u.used += n
	if u.limit > 0 && u.used > u.limit {
		return &TooLargeError{What: "archive", Limit: u.limit}
	}
	return nil
}

func (u *unpacker) entry(hdr *tar.Header, body io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "." {
		if hdr.Typeflag != tar.TypeDir {
			return &UnsafePathError{Path: hdr.Name, Why: "names the top directory"}
		}
		return nil // "./", as tar -C dir . writes it: dir itself
	}
	if err := u.charge(name, headerCost); err != nil {
		return err
	}
	if _, dup := u.kinds[name]; dup && !(hdr.Typeflag == tar.TypeDir && u.kinds[name] == tar.TypeDir) {
		return &UnsafePathError{Path: hdr.Name, Why: "given twice"}
	}
	if err := u.parents(hdr.Name, name); err != nil {
		return err
	}
	p := filepath.Join(u.root, filepath.FromSlash(name))
	mode := os.FileMode(hdr.Mode) & os.ModePerm
	switch hdr.Typeflag {
	case tar.TypeDir:
		if u.kinds[name] != tar.TypeDir {
			if err := os.Mkdir(p, 0o700); err != nil {
				return fmt.Errorf("unpack %s: %w", hdr.Name, err)
			}
			u.kinds[name] = tar.TypeDir
		}
		u.dirs = append(u.dirs, dirMode{name, mode})
	case tar.TypeReg:
		if hdr.Size < 0 {
			return &UnsafePathError{Path: hdr.Name, Why: "negative size"}
		}
		if err := u.charge(name, hdr.Size); err != nil {
			return err
		}
		if err := writeFile(p, mode, body, hdr.Size); err != nil {
			return fmt.Errorf("unpack %s: %w", hdr.Name, err)
		}
		u.kinds[name] = tar.TypeReg
	case tar.TypeSymlink:
		if why := linkEscapes(name, hdr.Linkname); why != "" {
			return &UnsafePathError{Path: hdr.Name, Why: why}
		}
		if err := os.Symlink(hdr.Linkname, p); err != nil {
			return fmt.Errorf("unpack %s: %w", hdr.Name, err)
		}
		u.kinds[name] = tar.TypeSymlink
	case tar.TypeLink:
		target, err := cleanName(hdr.Linkname)
		if err != nil || target == "." || u.kinds[target] != tar.TypeReg {
			return &UnsafePathError{Path: hdr.Name, Why: "hard link to " + hdr.Linkname + ", not an earlier regular file of the archive"}
		}
		if err := os.Link(filepath.Join(u.root, filepath.FromSlash(target)), p); err != nil {
			return fmt.Errorf("unpack %s: %w", hdr.Name, err)
		}
		u.kinds[name] = tar.TypeReg
	default:
		return &UnsafePathError{Path: hdr.Name, Why: fmt.Sprintf("entry type %q is not a regular file, directory, symlink or hard link", hdr.Typeflag)}
	}
	return nil
}

// parents creates the directories above name that no entry has yet, and
// refuses a name under anything that is not a directory.
func (u *unpacker) parents(raw, name string) error {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		parent := strings.Join(parts[:i], "/")
		switch u.kinds[parent] {
		case tar.TypeDir:
			continue
		case 0:
			if err := os.Mkdir(filepath.Join(u.root, filepath.FromSlash(parent)), 0o700); err != nil {
				return fmt.Errorf("unpack %s: %w", raw, err)
			}
			u.kinds[parent] = tar.TypeDir
			u.dirs = append(u.dirs, dirMode{parent, 0o755})
		default:
			return &UnsafePathError{Path: raw, Why: parent + " is not a directory"}
		}
	}
	return nil
}

// finish sets the directories' modes, deepest first, now that nothing more
// is written into them. A directory named more than once gets the last
// mode given.
func (u *unpacker) finish() error {
	final := map[string]os.FileMode{}
	for _, d := range u.dirs {
		final[d.name] = d.mode
	}
	names := make([]string, 0, len(final))
	for n := range final {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, n := range names {
		if err := os.Chmod(filepath.Join(u.root, filepath.FromSlash(n)), final[n]); err != nil {
			return fmt.Errorf("unpack %s: %w", n, err)
		}
	}
	return nil
}

// writeFile creates p, which must not exist, and copies exactly size
// bytes into it; O_NOFOLLOW keeps it from following a symlink even if one
// were there.
func writeFile(p string, mode os.FileMode, r io.Reader, size int64) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, r, size); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cleanName checks an archive name and returns its clean, slash-separated
// form: relative, no ".." or ".git" component, no NUL; "." is the top.
func cleanName(raw string) (string, error) {
	switch {
	case raw == "":
		return "", &UnsafePathError{Path: raw, Why: "empty name"}
	case strings.ContainsRune(raw, 0):
		return "", &UnsafePathError{Path: raw, Why: "NUL byte"}
	case strings.HasPrefix(raw, "/") || filepath.IsAbs(raw):
		return "", &UnsafePathError{Path: raw, Why: "absolute name"}
	case strings.ContainsRune(raw, '\\'):
		return "", &UnsafePathError{Path: raw, Why: "backslash in name"}
	}
	for _, part := range strings.Split(raw, "/") {
		switch part {
		case "..":
			return "", &UnsafePathError{Path: raw, Why: `".." component`}
		case ".git":
			return "", &UnsafePathError{Path: raw, Why: `".git" component`}
		}
	}
	return path.Clean(raw), nil
}
