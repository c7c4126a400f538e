package runner

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/agentmesh/agentmesh/pkg/workspace"
)

// Artifact names of a run's results.
const (
	PatchName   = "workspace.patch"
	ArchiveName = "workspace.tar.gz"
)

// ArtifactStore is what a runner needs of the artifact store
// (*artifacts.Store).
type ArtifactStore interface {
	OpenSnapshot(ctx context.Context, tenant, id string) (io.ReadCloser, int64, error)
	Put(ctx context.Context, tenant, runID, name string, r io.Reader) (wire.ArtifactRef, error)
	Open(ctx context.Context, tenant, runID, name string) (io.ReadCloser, artifacts.Record, error)
	SetHead(ctx context.Context, tenant, conversation string, h artifacts.Head) error
	Head(ctx context.Context, tenant, conversation string) (artifacts.Head, error)
	SetRunHead(ctx context.Context, tenant string, h artifacts.Head) error
	RunHead(ctx context.Context, tenant, runID string) (artifacts.Head, error)
}

// Workspaces materializes the workspace a run's source names into a fresh
// directory of its own, and stores what the agent changed when it ends.
type Workspaces struct {
	Store ArtifactStore
	// Root holds every run's fresh directory: its workspace and, beside
	// it, the private git dir the agent never sees.
	Root string
	// Materializer is the git allow-list, and MaxBytes the bound of a
	// source's tree, a git one's or a snapshot's.
	Materializer workspace.Materializer
	// MaxPatch and MaxArchive bound a run's patch (read and written) and
	// its archive of changed files (<= 0: no limit).
	MaxPatch, MaxArchive int64
}

// Workspace is one run's materialized workspace.
type Workspace struct {
	w      *Workspaces
	work   wire.Work
	source wire.WorkspaceSource
	top    string
	// Dir is the run's workspace, where its CLI runs.
	Dir    string
	gitDir string
	// lock holds a conversation's directory for this run (runDir); nil
	// for a directory of the run's own.
	lock *os.File
}

// Prepare materializes the run's workspace: the source the work names;
// when it names a run (FromRun), that run's source with its patch
// applied; else, when its conversation has a head, the head's source
// with the head's patch applied (the base a patch is against stays the
// source, so every patch is cumulative). It returns nil, nil for a run
// with none. A run named that stored no workspace, a
// source outside the allow-list, a source or patch over its limit, an
// archive entry that escapes or a snapshot that is not stored is an
// AgenticRequestValidationError; nothing of the run's directory is left
// on any error.
func (w *Workspaces) Prepare(ctx context.Context, work wire.Work) (_ *Workspace, err error) {
	if work.Workspace != nil {
		// The router checked it; work from an older one may not be.
		if err := work.Workspace.Check(); err != nil {
			return nil, wire.Errorf(wire.AgenticRequestValidationError, "%v", err)
		}
	}
	var head *artifacts.Head
	if from := work.Workspace; from != nil && from.FromRun != "" {
		h, err := w.Store.RunHead(ctx, work.Tenant, from.FromRun)
		switch {
		case errors.Is(err, artifacts.ErrNotFound):
			return nil, wire.Errorf(wire.AgenticRequestValidationError, "workspace.from_run: run %s of tenant %s left no workspace (unknown, no workspace, or its artifacts expired)", from.FromRun, work.Tenant)
		case err != nil:
			return nil, wire.Errorf(wire.ProviderTransportError, "read the workspace of run %s: %v", from.FromRun, err).Retry()
		}
		head = &h
	} else if work.Conversation != "" {
		h, err := w.Store.Head(ctx, work.Tenant, work.Conversation)
		switch {
		case err == nil:
			head = &h
		case !errors.Is(err, artifacts.ErrNotFound):
			return nil, wire.Errorf(wire.ProviderTransportError, "read the head of conversation %s: %v", work.Conversation, err).Retry()
		}
	}
	var source wire.WorkspaceSource
	switch {
	case head != nil:
		source = head.Source
	case work.Workspace != nil:
		source = *work.Workspace
	default:
		return nil, nil
	}
	if err := os.MkdirAll(w.Root, 0o700); err != nil {
		return nil, wire.Errorf(wire.AgenticHandlerError, "workspace root: %v", err)
	}
	top, lock, err := w.runDir(work)
	if err != nil {
		return nil, wire.Errorf(wire.AgenticHandlerError, "run directory: %v", err)
	}
	ws := &Workspace{w: w, work: work, source: source, top: top, Dir: filepath.Join(top, "ws"), gitDir: filepath.Join(top, "git"), lock: lock}
	defer func() {
		if err != nil {
			ws.Close()
		}
	}()
	if err := ws.materialize(ctx); err != nil {
		// The error names the request's field (workspace.snapshot,
		// workspace.git.url), or the head a continuation starts from.
		doing := source.Field()
		switch {
		case work.Workspace != nil && work.Workspace.FromRun != "":
			doing = fmt.Sprintf("workspace.from_run: the source of run %s (its %s)", work.Workspace.FromRun, doing)
		case head != nil:
			doing = fmt.Sprintf("the workspace of conversation %s (its first run's %s)", work.Conversation, doing)
		}
		return nil, classify(doing, err)
	}
	if head != nil && head.Patch != nil {
		rc, _, err := w.Store.Open(ctx, work.Tenant, head.RunID, PatchName)
		if err != nil {
			return nil, classify("open the patch of run "+head.RunID, err)
		}
		defer rc.Close()
		if err := workspace.Apply(ctx, ws.Dir, rc, w.MaxPatch); err != nil {
			return nil, classify("apply the patch of run "+head.RunID, err)
		}
	}
	return ws, nil
}

func (ws *Workspace) materialize(ctx context.Context) error {
	src, w := ws.source, ws.w
	switch {
	case src.Git != nil && src.Snapshot != "":
		return wire.Errorf(wire.AgenticRequestValidationError, "workspace source names both a git repository and a snapshot")
	case src.Git != nil:
		return w.Materializer.Git(ctx, *src.Git, ws.Dir, ws.gitDir)
	case src.Snapshot != "":
		rc, size, err := w.Store.OpenSnapshot(ctx, ws.work.Tenant, src.Snapshot)
		if err != nil {
			return err
		}
		defer rc.Close()
		if limit := w.Materializer.MaxBytes; limit > 0 && size > limit {
			return &workspace.TooLargeError{What: "snapshot", Limit: limit}
		}
		if err := workspace.Unpack(rc, ws.Dir, w.Materializer.MaxBytes); err != nil {
			return err
		}
		return workspace.Record(ctx, ws.Dir, ws.gitDir)
	default:
		return wire.Errorf(wire.AgenticRequestValidationError, "workspace source names neither a git repository nor a snapshot")
	}
}

// classify types an error of preparing a workspace: the request's fault
// (AgenticRequestValidationError) or the runner's.
func classify(doing string, err error) *wire.Error {
	var we *wire.Error
	if errors.As(err, &we) {
		return we
	}
	for _, bad := range []error{workspace.ErrNotAllowed, workspace.ErrTooLarge, workspace.ErrUnsafePath, artifacts.ErrTooLarge, artifacts.ErrNotFound, artifacts.ErrInvalidName} {
		if errors.Is(err, bad) {
			return wire.Errorf(wire.AgenticRequestValidationError, "%s: %v", doing, err)
		}
	}
	return wire.Errorf(wire.AgenticHandlerError, "%s: %v", doing, err)
}

// Finish stores what the agent changed, cumulative against the source:
// the patch and the archive of changed files, and the run's state (its
// source and patch, for a run that starts from it); then, when the run
// succeeded, makes the run its conversation's head. A run that did not
// succeed and changed nothing stores nothing (nil, nil). A patch or
// archive over its limit is an AgenticRequestValidationError and
// nothing is stored.
func (ws *Workspace) Finish(ctx context.Context, succeeded bool) (*wire.Artifacts, error) {
	var patch, archive bytes.Buffer
	if err := workspace.Diff(ctx, ws.Dir, ws.gitDir, &patch, ws.w.MaxPatch); err != nil {
		return nil, classify("diff the workspace", err)
	}
	if !succeeded && patch.Len() == 0 {
		return nil, nil
	}
	zw := gzip.NewWriter(&archive)
	if err := workspace.Archive(ctx, ws.Dir, ws.gitDir, zw, ws.w.MaxArchive); err != nil {
		return nil, classify("archive the changed files", err)
	}
	if err := zw.Close(); err != nil {
		return nil, classify("archive the changed files", err)
	}
	t, run := ws.work.Tenant, ws.work.RunID
	pref, err := ws.w.Store.Put(ctx, t, run, PatchName, &patch)
	if err != nil {
		return nil, classify("store the patch", err)
	}
	aref, err := ws.w.Store.Put(ctx, t, run, ArchiveName, &archive)
	if err != nil {
		return nil, classify("store the archive", err)
	}
	head := artifacts.Head{Source: ws.source, Patch: &pref, RunID: run}
	if err := ws.w.Store.SetRunHead(ctx, t, head); err != nil {
		return nil, classify("record the run's workspace", err)
	}
	if succeeded && ws.work.Conversation != "" {
		if err := ws.w.Store.SetHead(ctx, t, ws.work.Conversation, head); err != nil {
			return nil, classify("set the conversation's head", err)
		}
	}
	return &wire.Artifacts{Patch: &pref, Archive: &aref}, nil
}

// Close removes the run's directory, workspace and git dir.
func (ws *Workspace) Close() error {
	err := os.RemoveAll(ws.top)
	if ws.lock != nil {
		// Unlinked before it is released: a run that opened it before
		// finds, once it holds it, that it is no longer the path's
		// (runDir), so two runs never hold one directory.
		_ = os.Remove(ws.lock.Name())
		ws.lock.Close()
		ws.lock = nil
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", ws.top, err)
	}
	return nil
}

// stillAt reports whether the open file f is still the file at its path
// (not unlinked or replaced since it was opened).
func stillAt(f *os.File) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(f.Name())
	return err == nil && os.SameFile(held, now)
}

// runDir makes the directory a run's workspace and git dir go in. A run
// of a conversation gets the conversation's, at the same path on every
// runner with this workspace root (conv.<tenant>.<conversation>): an
// agent that loads a session only in the directory it began in
// (Claude's) then finds it there, whichever runner the next turn lands
// on. The directory is held by a lock beside it (flock, released with the
// run or its process), and one left by a runner that died is emptied
// first; while another run of the conversation holds it, and for a run of
// no conversation, the run gets a fresh directory of its own.
func (w *Workspaces) runDir(work wire.Work) (string, *os.File, error) {
	if work.Conversation != "" {
		top := filepath.Join(w.Root, "conv."+work.Tenant+"."+work.Conversation)
		f, err := os.OpenFile(top+".lock", os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return "", nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil && stillAt(f) {
			if err := os.RemoveAll(top); err != nil {
				f.Close()
				return "", nil, err
			}
			if err := os.Mkdir(top, 0o700); err != nil {
				f.Close()
				return "", nil, err
			}
			return top, f, nil
		}
		f.Close()
	}
	top, err := os.MkdirTemp(w.Root, "run-"+work.RunID+"-")
	return top, nil, err
}
