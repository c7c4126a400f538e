package trajstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// RootError is a directory store root that NewDirStore refuses.
type RootError struct {
	Root     string // as given
	Resolved string // absolute, with symlinks of its existing part resolved; "" if not known
	Reason   string
	Err      error // the cause, such as an *fs.PathError; may be nil
}

func (e *RootError) Error() string {
	s := fmt.Sprintf("%s %q", ErrInvalidRoot, e.Root)
	if e.Resolved != "" && e.Resolved != e.Root {
		s += fmt.Sprintf(" (resolves to %q)", e.Resolved)
	}
	s += ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap gives ErrInvalidRoot and the cause.
func (e *RootError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidRoot}
	}
	return []error{ErrInvalidRoot, e.Err}
}

// checkRoot makes root absolute and resolves the symlinks of its existing
// part, then refuses it when it is the working directory, inside it or
// above it, or inside or above the git work tree that holds the working
// directory: the store writes outside the source tree (docs/contract.md §10.6). A root
// above the tree is refused because a tenant's directory under it could be
// the tree or a sibling checkout.
func checkRoot(root string) (string, error) {
	if root == "" {
		return "", &RootError{Root: root, Reason: "empty"}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", &RootError{Root: root, Reason: "cannot make it absolute", Err: err}
	}
	resolved, err := resolveExisting(abs)
	if err != nil {
		return "", &RootError{Root: root, Resolved: abs, Reason: "cannot resolve its symlinks", Err: err}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", &RootError{Root: root, Resolved: resolved, Reason: "cannot find the working directory to keep out of", Err: err}
	}
	if wd, err = filepath.EvalSymlinks(wd); err != nil {
		return "", &RootError{Root: root, Resolved: resolved, Reason: "cannot resolve the working directory", Err: err}
	}
	if rel := relation(resolved, wd); rel != "" {
		return "", &RootError{Root: root, Resolved: resolved, Reason: rel + " the working directory " + wd}
	}
	top, err := gitTop(wd)
	if err != nil {
		return "", &RootError{Root: root, Resolved: resolved, Reason: "cannot look for a git work tree around the working directory", Err: err}
	}
	if top != "" {
		if rel := relation(resolved, top); rel != "" {
			return "", &RootError{Root: root, Resolved: resolved, Reason: rel + " the git work tree " + top + " that holds the working directory"}
		}
	}
	return resolved, nil
}

// resolveExisting resolves the symlinks of the longest existing prefix of
// the clean absolute path p and appends the rest.
func resolveExisting(p string) (string, error) {
	rest := ""
	for {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// relation says how path p lies to dir: "is", "is inside", "is above"
// (dir is inside p), or "" when neither holds. Both are clean and absolute.
func relation(p, dir string) string {
	switch {
	case p == dir:
		return "is"
	case within(p, dir):
		return "is inside"
	case within(dir, p):
		return "is above"
	}
	return ""
}

// within reports whether p is strictly inside dir.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// gitTop is the nearest directory at or above dir holding a .git entry (a
// directory, or the file of a linked work tree or submodule), or "".
func gitTop(dir string) (string, error) {
	for {
		_, err := os.Lstat(filepath.Join(dir, ".git"))
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", nil
		}
		dir = parent
	}
}
