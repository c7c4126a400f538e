package main

// The artifact commands: workspace push, artifacts list|get|apply. They
// talk to the mesh's JetStream directly (pkg/artifacts), as the export
// commands do, for the tenant of --tenant.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/workspace"
)

// io2Pipe is io.Pipe (the io parameter of the commands shadows the package).
var io2Pipe = io.Pipe

// withArtifacts is withOps with the mesh's artifact store opened.
func (c *clientFlags) withArtifacts(ctx context.Context, do func(ctx context.Context, s *artifacts.Store) error) error {
	return c.withOps(ctx, func(ctx context.Context, oc *opsConn) error {
		s, err := artifacts.Open(ctx, oc.js, oc.names)
		if err != nil {
			return usageErr("%v", err)
		}
		return do(ctx, s)
	})
}

// withRunArtifacts is withArtifacts for the artifacts of run runID of
// the flags' tenant: when do finds none (it returns an error wrapping
// artifacts.ErrNotFound, or errNoArtifacts), a run the mesh has no
// record of is "run not found", exit 1; a run it knows that stored none
// is do's error, or no error for errNoArtifacts.
func (c *clientFlags) withRunArtifacts(ctx context.Context, runID string, do func(ctx context.Context, s *artifacts.Store) error) error {
	return c.withOps(ctx, func(ctx context.Context, oc *opsConn) error {
		s, err := artifacts.Open(ctx, oc.js, oc.names)
		if err != nil {
			return usageErr("%v", err)
		}
		err = do(ctx, s)
		if !errors.Is(err, artifacts.ErrNotFound) && !errors.Is(err, errNoArtifacts) {
			var exit *exitError
			if err == nil || errors.As(err, &exit) {
				return err
			}
			return artifactFailure(err)
		}
		cl, cerr := client.New(oc.nc, oc.names, client.WithAPIPrefix(c.apiPrefix))
		if cerr != nil {
			return cerr
		}
		if _, serr := cl.Status(ctx, c.tenant, runID); errors.Is(serr, client.ErrNotFound) {
			return &exitError{code: exitFail, err: fmt.Errorf("run %s not found for tenant %s", runID, c.tenant)}
		}
		if errors.Is(err, errNoArtifacts) {
			return nil
		}
		return artifactFailure(err)
	})
}

// errNoArtifacts is what a command's do returns to withRunArtifacts when
// the run has no artifacts and that is no error for a run the mesh knows.
var errNoArtifacts = errors.New("no artifacts")

// artifactFailure is err as the exit of an artifact command: bad input is
// a usage error, anything else a failure.
func artifactFailure(err error) error {
	if errors.Is(err, subject.ErrInvalidToken) || errors.Is(err, artifacts.ErrInvalidName) {
		return &exitError{code: exitUsage, err: err}
	}
	return &exitError{code: exitFail, err: err}
}

// cmdArtifacts lists, gets or applies a run's artifacts.
func cmdArtifacts(ctx context.Context, args []string, io *stdio) error {
	runArg := func(name string, pos []string, most int) (string, error) {
		if len(pos) == 0 || len(pos) > most {
			return "", usageErr("artifacts %s: want a run id, got %d arguments", name, len(pos))
		}
		if err := subject.ValidToken("run_id", pos[0]); err != nil {
			return "", usageErr("artifacts %s: %v", name, err)
		}
		return pos[0], nil
	}
	list := func(ctx context.Context, args []string, io *stdio) error {
		var asJSON *bool
		f, pos, err := opsFlags("artifacts list", "[--tenant T] [--json] <run_id>", args, io, func(fs *flag.FlagSet) {
			asJSON = fs.Bool("json", false, "print the records as JSON lines")
		})
		if err != nil {
			return err
		}
		runID, err := runArg("list", pos, 1)
		if err != nil {
			return err
		}
		var recs []artifacts.Record
		if err := f.withRunArtifacts(ctx, runID, func(ctx context.Context, s *artifacts.Store) error {
			if recs, err = s.List(ctx, f.tenant, runID); err != nil {
				return err
			}
			if len(recs) == 0 {
				return errNoArtifacts
			}
			return nil
		}); err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(io.stdout)
			for _, r := range recs {
				if err := enc.Encode(r); err != nil {
					return err
				}
			}
			return nil
		}
		tw := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSIZE\tSHA256\tCREATED\tEXPIRES")
		for _, r := range recs {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", r.Name, r.Size, r.SHA256,
				time.UnixMilli(r.Created).UTC().Format(time.RFC3339), time.UnixMilli(r.Expires).UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	}
	get := func(ctx context.Context, args []string, io *stdio) error {
		var out *string
		f, pos, err := opsFlags("artifacts get", "[--tenant T] [-o FILE] <run_id> [name (default workspace.patch)]", args, io, func(fs *flag.FlagSet) {
			out = fs.String("o", "", "write the artifact to this file instead of stdout")
		})
		if err != nil {
			return err
		}
		runID, err := runArg("get", pos, 2)
		if err != nil {
			return err
		}
		name := runner.PatchName
		if len(pos) == 2 {
			name = pos[1]
		}
		return f.withRunArtifacts(ctx, runID, func(ctx context.Context, s *artifacts.Store) error {
			rc, _, err := s.Open(ctx, f.tenant, runID, name)
			if err != nil {
				return err
			}
			defer func() { _ = rc.Close() }()
			return writeVerified(*out, io.stdout, rc)
		})
	}
	apply := func(ctx context.Context, args []string, io *stdio) error {
		var dir *string
		f, pos, err := opsFlags("artifacts apply", "[--tenant T] [--dir DIR] <run_id>", args, io, func(fs *flag.FlagSet) {
			dir = fs.String("dir", ".", "the checkout the run's patch is applied to")
		})
		if err != nil {
			return err
		}
		runID, err := runArg("apply", pos, 1)
		if err != nil {
			return err
		}
		return f.withRunArtifacts(ctx, runID, func(ctx context.Context, s *artifacts.Store) error {
			// The patch is read whole, and checked, before git applies
			// any of it.
			rc, rec, err := s.Open(ctx, f.tenant, runID, runner.PatchName)
			if err != nil {
				return err
			}
			defer func() { _ = rc.Close() }()
			if err := workspace.Apply(ctx, *dir, rc, artifacts.DefaultArtifactLimit); err != nil {
				return &exitError{code: exitFail, err: fmt.Errorf("apply the patch of %s: %w", runID, err)}
			}
			fmt.Fprintf(io.stdout, "applied %s (%d bytes, sha256 %s) to %s\n", rec.Object, rec.Size, rec.SHA256, *dir)
			return nil
		})
	}
	return subcommand(ctx, "artifacts", args, io, map[string]func(context.Context, []string, *stdio) error{
		"list": list, "get": get, "apply": apply,
	}, "list", "get", "apply")
}

// cmdWorkspace pushes a directory as a workspace snapshot.
func cmdWorkspace(ctx context.Context, args []string, io *stdio) error {
	push := func(ctx context.Context, args []string, io *stdio) error {
		f, pos, err := opsFlags("workspace push", "[--tenant T] <dir>", args, io, nil)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usageErr("workspace push: want one directory, got %d arguments", len(pos))
		}
		if fi, err := os.Stat(pos[0]); err != nil || !fi.IsDir() {
			return usageErr("workspace push: %s is not a directory", pos[0])
		}
		return f.withArtifacts(ctx, func(ctx context.Context, s *artifacts.Store) error {
			id, err := pushDir(ctx, s, f.tenant, pos[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(io.stdout, id)
			return nil
		})
	}
	return subcommand(ctx, "workspace", args, io, map[string]func(context.Context, []string, *stdio) error{
		"push": push,
	}, "push")
}

// pushDir packs dir and pushes it as one of tenant's snapshots, returning
// its id; a failure is the command's exit.
func pushDir(ctx context.Context, s *artifacts.Store, tenant, dir string) (string, error) {
	pr, pw := io2Pipe()
	packed := make(chan error, 1)
	go func() {
		err := workspace.Pack(dir, pw, artifacts.DefaultSnapshotLimit)
		_ = pw.CloseWithError(err)
		packed <- err
	}()
	id, err := s.PushSnapshot(ctx, tenant, pr)
	_ = pr.CloseWithError(errors.New("push ended")) // unblocks Pack if the push stopped reading
	perr := <-packed
	if err != nil { // a pack that failed is its cause
		return "", artifactFailure(err)
	}
	if perr != nil {
		return "", &exitError{code: exitFail, err: fmt.Errorf("pack %s: %w", dir, perr)}
	}
	return id, nil
}

// writeVerified copies r, which checks its bytes at their end, to the file
// path, or to stdout when path is empty. A file is written beside its path
// and renamed there only once every byte checked out, so a failed get
// leaves no file claiming to be the artifact.
func writeVerified(path string, stdout io.Writer, r io.Reader) error {
	if path == "" {
		if _, err := io.Copy(stdout, r); err != nil {
			return &exitError{code: exitFail, err: err}
		}
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".agentmesh-artifact-*")
	if err != nil {
		return &exitError{code: exitFail, err: err}
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := io.Copy(tmp, r); err != nil {
		_ = tmp.Close()
		return &exitError{code: exitFail, err: err}
	}
	if err := tmp.Close(); err != nil {
		return &exitError{code: exitFail, err: err}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return &exitError{code: exitFail, err: err}
	}
	return nil
}
