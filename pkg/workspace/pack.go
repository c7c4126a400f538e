package workspace

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// epoch is every entry's modification time: a tree's archive depends on
// its names, modes and bytes only.
var epoch = time.Unix(0, 0).UTC()

// Pack writes a deterministic tar of dir to w: entries in lexical order,
// every ".git" left out, only directories, regular files and symlinks that
// stay inside dir, permission bits kept, owners and times zeroed. Anything
// else (a device, a fifo, a socket, a symlink leading out) is refused with
// a *UnsafePathError; more than limit bytes of tar with a *TooLargeError
// (limit <= 0: no limit).
func Pack(dir string, w io.Writer, limit int64) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	return writeTar(dir, names, w, limit, "archive")
}

// writeTar writes the named entries of dir (slash-separated, relative, in
// the order given) as Pack does.
func writeTar(dir string, names []string, w io.Writer, limit int64, what string) error {
	tw := tar.NewWriter(&limitWriter{w: w, limit: limit, what: what})
	for _, name := range names {
		if err := writeEntry(tw, dir, name); err != nil {
			return err
		}
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, dir, name string) error {
	p := filepath.Join(dir, filepath.FromSlash(name))
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	hdr := &tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), ModTime: epoch, Format: tar.FormatPAX}
	switch {
	case fi.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
	case fi.Mode().IsRegular():
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return fmt.Errorf("pack %s: %w", name, err)
		}
		if why := linkEscapes(name, target); why != "" {
			return &UnsafePathError{Path: name, Why: why}
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
	default:
		return &UnsafePathError{Path: name, Why: "not a regular file, directory or symlink: " + fi.Mode().Type().String()}
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	if hdr.Typeflag != tar.TypeReg {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	defer f.Close()
	// A file that grew since Lstat is cut at the header's size; one that
	// shrank fails the write (tar: missed writing …).
	if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	return nil
}

// linkEscapes says why a symlink at name (slash-separated, relative to the
// tree's top; its parents real directories) with this target may lead
// outside the tree, or "" when it cannot. The target must be relative, its
// ".." components must all come first, and taken lexically from the link's
// directory it must stay inside. The ".." rule is what makes the lexical
// check true of the filesystem: "x/.." where x is a symlink is the parent
// of x's target, not x's directory. Leading ".." climb real directories,
// and every symlink the rest descends through has passed the same check.
func linkEscapes(name, target string) string {
	switch {
	case target == "":
		return "empty symlink target"
	case strings.ContainsRune(target, 0):
		return "NUL byte in symlink target"
	case path.IsAbs(target):
		return "absolute symlink target " + target
	}
	named := false
	for _, part := range strings.Split(target, "/") {
		switch part {
		case "", ".":
		case "..":
			if named {
				return "symlink target " + target + " has \"..\" after a name"
			}
		default:
			named = true
		}
	}
	resolved := path.Join(path.Dir(name), target)
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return "symlink target " + target + " leads outside"
	}
	return ""
}
