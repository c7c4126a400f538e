package wire

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/subject"
)

// SnapshotPrefix begins every snapshot id: "sha256:<64 lowercase hex>".
const SnapshotPrefix = "sha256:"

// CheckSnapshotID reports whether id is "sha256:" and 64 lowercase hex
// digits, the content address `agentmesh workspace push` prints.
func CheckSnapshotID(id string) error {
	hexPart, ok := strings.CutPrefix(id, SnapshotPrefix)
	if !ok || len(hexPart) != 2*sha256.Size {
		return fmt.Errorf("snapshot id %q is not %s and %d hex digits", id, SnapshotPrefix, 2*sha256.Size)
	}
	for i := 0; i < len(hexPart); i++ {
		if c := hexPart[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("snapshot id %q has %q; want lowercase hex", id, c)
		}
	}
	return nil
}

// WorkspaceFieldError is a workspace source refused for one of its
// fields: Field is its path in a RunRequest ("workspace",
// "workspace.snapshot", "workspace.git.url", "workspace.git.ref"), as a
// door names it to its caller (the gateway's param, the CLI's flag).
type WorkspaceFieldError struct {
	Field string
	Why   string
}

func (e *WorkspaceFieldError) Error() string { return e.Field + ": " + e.Why }

// Check checks the source's shape, as every door and the router do
// before a runner materializes it: exactly one of a git source, a
// snapshot and a run; a snapshot's id well formed; a git source's URL
// given and, like its ref, not an option; a run's id a subject token.
// Whether the remote is allowed, the snapshot stored or within a limit,
// the run's workspace kept, is for the store and the runner to say. A
// refusal is a *WorkspaceFieldError.
func (s *WorkspaceSource) Check() error {
	named := 0
	for _, set := range []bool{s.Git != nil, s.Snapshot != "", s.FromRun != ""} {
		if set {
			named++
		}
	}
	switch {
	case named > 1:
		return &WorkspaceFieldError{"workspace", "names more than one of git, snapshot and from_run; name one"}
	case s.FromRun != "":
		if err := subject.ValidToken("run id", s.FromRun); err != nil {
			return &WorkspaceFieldError{"workspace.from_run", err.Error()}
		}
	case s.Snapshot != "":
		if err := CheckSnapshotID(s.Snapshot); err != nil {
			return &WorkspaceFieldError{"workspace.snapshot", err.Error()}
		}
	case s.Git != nil:
		switch g := s.Git; {
		case strings.TrimSpace(g.URL) == "":
			return &WorkspaceFieldError{"workspace.git.url", "a git source needs the remote's URL"}
		case strings.HasPrefix(g.URL, "-"):
			return &WorkspaceFieldError{"workspace.git.url", fmt.Sprintf("URL %q may not start with -", g.URL)}
		case strings.HasPrefix(g.Ref, "-"):
			return &WorkspaceFieldError{"workspace.git.ref", fmt.Sprintf("ref %q may not start with -", g.Ref)}
		}
	default:
		return &WorkspaceFieldError{"workspace", "names none of git, snapshot and from_run"}
	}
	return nil
}

// Field is the RunRequest field of the source the workspace comes from:
// "workspace.snapshot", "workspace.git.url" or "workspace.from_run".
func (s *WorkspaceSource) Field() string {
	switch {
	case s.Git != nil:
		return "workspace.git.url"
	case s.FromRun != "":
		return "workspace.from_run"
	}
	return "workspace.snapshot"
}
