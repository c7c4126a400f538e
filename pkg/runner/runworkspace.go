package runner

import (
	"context"
	"maps"
	"path/filepath"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/agentmesh/agentmesh/pkg/workspace"
)

// openWorkspaces opens the artifact store on the host's JetStream and
// configures the runs' workspaces from cfg (defaults set).
func openWorkspaces(ctx context.Context, d service.Deps, cfg Config) (*Workspaces, error) {
	store, err := artifacts.Open(ctx, d.JS, d.Names)
	if err != nil {
		return nil, err
	}
	// Absolute: git runs a run's commands in other directories than the
	// runner's, and a relative workspace root (up's default) would name
	// the private git dir from the wrong one.
	root, err := filepath.Abs(filepath.Join(cfg.WorkspaceRoot, RunsDir))
	if err != nil {
		return nil, err
	}
	return &Workspaces{
		Store:        store,
		Root:         root,
		Materializer: workspace.Materializer{GitAllow: cfg.GitAllow, MaxBytes: cfg.WorkspaceMaxBytes},
		MaxPatch:     cfg.PatchMaxBytes,
		MaxArchive:   cfg.ArchiveMaxBytes,
	}, nil
}

// prepareWorkspace materializes the workspace of a subprocess run whose
// work names a source or continues a conversation with a head, and
// points call's runtime workspace at it, relative to the workspace root.
// A run of another transport, or with neither, is left as it is. On an
// error nothing of the run's directory is left.
func (r *run) prepareWorkspace(ctx context.Context, call *adapter.Call) error {
	if r.a.Capabilities().Transport != wire.TransportSubprocess {
		return nil
	}
	if _, named := call.Runtime[cli.RuntimeWorkspace]; named && r.work.Workspace != nil {
		return wire.Errorf(wire.AgenticRequestValidationError, "runtime %s and a workspace source both name the run's workspace; name one", cli.RuntimeWorkspace)
	}
	ws, err := r.h.workspaces.Prepare(ctx, r.work)
	if err != nil || ws == nil {
		return err
	}
	// ws.Dir is absolute (openWorkspaces), the root perhaps not.
	rel, err := filepath.Abs(r.h.cfg.WorkspaceRoot)
	if err == nil {
		rel, err = filepath.Rel(rel, ws.Dir)
	}
	if err != nil {
		ws.Close()
		return wire.Errorf(wire.AgenticHandlerError, "run directory %s: %v", ws.Dir, err)
	}
	runtime := maps.Clone(call.Runtime)
	if runtime == nil {
		runtime = map[string]any{}
	}
	runtime[cli.RuntimeWorkspace] = rel
	call.Runtime = runtime
	r.ws = ws
	return nil
}

// closeWorkspace removes the run's workspace directory, if it had one.
func (r *run) closeWorkspace() {
	if r.ws == nil {
		return
	}
	if err := r.ws.Close(); err != nil {
		r.h.d.Log.Warn("remove the run's workspace", append(r.logger(), "err", err)...)
	}
	r.ws = nil
}

// finishWorkspace stores what the agent changed in the run's workspace
// (Workspace.Finish), whatever the run's end st.State, and names it in st
// to a follower of contract v2 or later.
func (r *run) finishWorkspace(st *wire.Status) error {
	if r.ws == nil {
		return nil
	}
	r.wsFinished = true
	ctx, cancel := r.endContext()
	defer cancel()
	a, err := r.ws.Finish(ctx, st.State == wire.StateSucceeded)
	if err != nil {
		return err
	}
	if r.work.V >= 2 {
		st.Artifacts = a
	}
	return nil
}
