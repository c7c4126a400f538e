package main

// The workspace flags of agentmesh run: --snapshot, --git, --push and
// --from-run, each naming where the run's workspace comes from
// (wire.WorkspaceSource).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// sourceFlags are run's flags that name a workspace, for messages.
var sourceFlags = []string{"--workspace", "--snapshot", "--git", "--push", "--from-run"}

// checkSource refuses more than one way of naming the run's workspace,
// and a source whose shape the router would refuse, naming the flag.
func (f *runFlags) checkSource() error {
	var named []string
	for i, v := range []string{f.workspace, f.snapshot, f.git, f.push, f.fromRun} {
		if v != "" {
			named = append(named, sourceFlags[i])
		}
	}
	if len(named) > 1 {
		return usageErr("run: %s each name the run's workspace: give one", strings.Join(named, " and "))
	}
	var src wire.WorkspaceSource
	flag := ""
	switch {
	case f.snapshot != "":
		src.Snapshot, flag = f.snapshot, "--snapshot"
	case f.git != "":
		url, ref := splitGitRef(f.git)
		src.Git, flag = &wire.GitSource{URL: url, Ref: ref}, "--git"
	case f.fromRun != "":
		src.FromRun, flag = f.fromRun, "--from-run"
	case f.push != "":
		if fi, err := os.Stat(f.push); err != nil || !fi.IsDir() {
			return usageErr("run: --push: %s is not a directory", f.push)
		}
		return nil
	default:
		return nil
	}
	if err := src.Check(); err != nil {
		var fe *wire.WorkspaceFieldError
		if errors.As(err, &fe) {
			return usageErr("run: %s: %s", flag, fe.Why)
		}
		return usageErr("run: %s: %v", flag, err)
	}
	return nil
}

// splitGitRef splits --git's URL[@REF]: the ref follows the last @ that
// comes after the URL's host (after "scheme://host/", or after the ":" of
// scp-like "user@host:path"; anywhere in a plain path), so a user@ in
// the URL is never taken for a ref, and a ref may hold slashes.
func splitGitRef(s string) (url, ref string) {
	from := 0
	if i := strings.Index(s, "://"); i >= 0 {
		from = i + 3
		if j := strings.IndexByte(s[from:], '/'); j >= 0 {
			from += j
		} else {
			return s, ""
		}
	} else if i := strings.IndexByte(s, ':'); i >= 0 && !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, ".") {
		from = i
	}
	at := strings.LastIndexByte(s[from:], '@')
	if at < 0 {
		return s, ""
	}
	return s[:from+at], s[from+at+1:]
}

// pushOrCheckSnapshot does, before the run is submitted, what its source
// needs from the artifact store: --push packs and pushes the directory
// (printing the snapshot's id on stderr) and makes it the run's
// --snapshot; a --snapshot must be stored for the tenant. A snapshot
// that is not (never pushed, or expired) or is over the store's limit
// fails the command (exit 1) naming the flag.
func (f *runFlags) pushOrCheckSnapshot(ctx context.Context, io *stdio) error {
	if f.push == "" && f.snapshot == "" {
		return nil
	}
	return f.withArtifacts(ctx, func(ctx context.Context, s *artifacts.Store) error {
		if f.push != "" {
			id, err := pushDir(ctx, s, f.tenant, f.push)
			if err != nil {
				return err
			}
			fmt.Fprintf(io.stderr, "agentmesh: pushed %s as %s\n", f.push, id)
			f.snapshot = id
			return nil
		}
		if _, err := s.StatSnapshot(ctx, f.tenant, f.snapshot); err != nil {
			if errors.Is(err, artifacts.ErrNotFound) {
				err = fmt.Errorf("snapshot %s is not stored for tenant %s: never pushed (agentmesh workspace push --tenant %s DIR), or expired", f.snapshot, f.tenant, f.tenant)
			}
			return &exitError{code: exitFail, err: fmt.Errorf("run: --snapshot: %w", err)}
		}
		return nil
	})
}
