// Package workspace contains a run's working directory, and any path a
// request names, inside the workspace root the runner is configured with.
package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// ErrEscape is matched by every refusal of a path that is, or may lead,
// outside the workspace: an absolute path, a ".." component, a NUL byte, or
// a symlink that leads outside or cannot be resolved. Every refusal of
// Resolve and Contain, an escape or not (a missing workspace, a file), is an
// AgenticRequestValidationError.
var ErrEscape = errors.New("path escapes the workspace root")

// Resolve returns the absolute, symlink-free directory for the relative
// workspace rel under root: an empty rel is root itself; an absolute rel, a
// ".." component, a symlink that leads outside root, or a path that is not a
// directory is refused with an AgenticRequestValidationError matching
// ErrEscape (or naming the problem). Nothing is created.
func Resolve(root, rel string) (string, error) {
	realRoot, err := realDir(root)
	if err != nil {
		return "", wire.Errorf(wire.AgenticRequestValidationError, "workspace root %q: %v", root, err)
	}
	if rel == "" {
		return realRoot, nil
	}
	p, err := Contain(realRoot, rel)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", wire.Errorf(wire.AgenticRequestValidationError, "workspace %q: %v", rel, err)
	}
	if !fi.IsDir() {
		return "", wire.Errorf(wire.AgenticRequestValidationError, "workspace %q is not a directory", rel)
	}
	return p, nil
}

// Contain checks a request-supplied relative path against a workspace dir
// (as returned by Resolve) and returns its absolute, symlink-free form. The
// path need not exist, but every part of it that does must stay inside dir
// after resolving symlinks.
func Contain(dir, rel string) (string, error) {
	// Compare like with like: the resolved path is symlink-free, absolute
	// and clean, so dir must be too. Without this, a dir given with a
	// trailing slash or through a symlink refuses everything as an escape,
	// and a relative dir gives a relative result.
	dir, err := realDir(dir)
	if err != nil {
		return "", wire.Errorf(wire.AgenticRequestValidationError, "workspace: %v", err)
	}
	if filepath.IsAbs(rel) {
		return "", refuse(rel, "absolute paths are not allowed")
	}
	if strings.ContainsRune(rel, 0) {
		return "", refuse(rel, "NUL byte")
	}
	for _, part := range strings.FieldsFunc(rel, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		if part == ".." {
			return "", refuse(rel, `".." is not allowed`)
		}
	}
	p := filepath.Join(dir, rel)
	// Resolve the longest existing prefix: a symlink anywhere in it must not
	// lead outside dir.
	existing, rest := p, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", refuse(rel, err.Error())
	}
	if !inside(dir, real) {
		return "", refuse(rel, "a symlink leads outside the workspace")
	}
	return filepath.Join(real, rest), nil
}

func refuse(rel, why string) error {
	we := wire.Errorf(wire.AgenticRequestValidationError, "workspace path %q: %s", rel, why)
	return &escapeError{we: we}
}

// escapeError is a wire error that also matches ErrEscape.
type escapeError struct{ we *wire.Error }

func (e *escapeError) Error() string   { return e.we.Error() }
func (e *escapeError) Unwrap() []error { return []error{e.we, ErrEscape} }

func inside(root, p string) bool {
	if p == root {
		return true
	}
	return strings.HasPrefix(p, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator))
}

func realDir(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", p)
	}
	return real, nil
}
