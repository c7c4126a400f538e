package runner_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/agentmesh/agentmesh/pkg/workspace"
	"github.com/agentmesh/agentmesh/pkg/workspace/workspacetest"
)

// sourceTree is a work tree of files, and a bare repo of it (file://).
func sourceTree(t *testing.T) (tree, url string) {
	root := t.TempDir()
	tree = filepath.Join(root, "tree")
	workspacetest.WriteFiles(t, tree, map[string]string{"README.md": "source\n", "main.go": "package main\n", "logo.bin": "\x00\x01\xff"})
	workspacetest.Git(t, tree, "init", "-q")
	workspacetest.Git(t, tree, "add", "-A")
	workspacetest.Git(t, tree, "commit", "-q", "-m", "source")
	workspacetest.Git(t, root, "clone", "-q", "--bare", tree, filepath.Join(root, "repo.git"))
	return tree, "file://" + filepath.Join(root, "repo.git")
}

func sameFiles(t *testing.T, want, got map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: not wanted", k)
		}
	}
}

func openStore(t *testing.T) *artifacts.Store {
	t.Helper()
	_, _, js := natstest.RunMesh(t)
	store, err := artifacts.Open(context.Background(), js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func newWorkspaces(t *testing.T, store *artifacts.Store, allow string) *runner.Workspaces {
	return &runner.Workspaces{
		Store: store, Root: t.TempDir(),
		Materializer: workspace.Materializer{GitAllow: []string{allow}, MaxBytes: 1 << 20},
		MaxPatch:     1 << 20, MaxArchive: 1 << 20,
	}
}

// Two runners (two Workspaces, two roots) take the two turns of one
// conversation: the second starts from the first's result, and its patch
// is cumulative against the source; once from a git source, once from a
// pushed snapshot.
func TestConversationWorkspaceTravels(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	tree, url := sourceTree(t)
	var snap bytes.Buffer
	if err := workspace.Pack(tree, &snap, 0); err != nil {
		t.Fatal(err)
	}
	id, err := store.PushSnapshot(ctx, "acme", &snap)
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]wire.WorkspaceSource{
		"git":      {Git: &wire.GitSource{URL: url, Ref: "main"}},
		"snapshot": {Snapshot: id},
	} {
		t.Run(name, func(t *testing.T) {
			one, two := newWorkspaces(t, store, url), newWorkspaces(t, store, url)
			conv := "conv-" + name
			ws1, err := one.Prepare(ctx, wire.Work{Tenant: "acme", RunID: "r1-" + name, Conversation: conv, Workspace: &src})
			if err != nil {
				t.Fatal(err)
			}
			defer ws1.Close()
			workspacetest.WriteFiles(t, ws1.Dir, map[string]string{"turn1.txt": "one\n", "main.go": "package main // 1\n"})
			if err := os.Remove(filepath.Join(ws1.Dir, "README.md")); err != nil {
				t.Fatal(err)
			}
			a1, err := ws1.Finish(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			if a1.Patch == nil || a1.Archive == nil || a1.Patch.Size == 0 {
				t.Fatalf("artifacts %+v", a1)
			}

			// Turn 2 on the other runner; the work names no source of its own.
			ws2, err := two.Prepare(ctx, wire.Work{Tenant: "acme", RunID: "r2-" + name, Conversation: conv})
			if err != nil {
				t.Fatal(err)
			}
			defer ws2.Close()
			sameFiles(t, workspacetest.Files(t, ws1.Dir), workspacetest.Files(t, ws2.Dir))
			workspacetest.WriteFiles(t, ws2.Dir, map[string]string{"turn2.txt": "two\n"})
			a2, err := ws2.Finish(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			rc, _, err := store.Open(ctx, "acme", "r2-"+name, runner.PatchName)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			var p2 bytes.Buffer
			if _, err := p2.ReadFrom(rc); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"turn1.txt", "turn2.txt", "deleted file mode"} {
				if !strings.Contains(p2.String(), want) {
					t.Errorf("turn 2's patch has no %q: not cumulative against the source\n%s", want, p2.String())
				}
			}
			head, err := store.Head(ctx, "acme", conv)
			if err != nil || head.RunID != "r2-"+name || *head.Patch != *a2.Patch {
				t.Errorf("head %+v, %v", head, err)
			}
		})
	}
}

// A run that changed its workspace and then did not succeed stores its
// patch, but its conversation's head stays at the last success; a run
// naming it (from_run) starts, on another runner, from what it left,
// and, succeeding, moves the head. A run that did not succeed and
// changed nothing stores nothing; a run that stored nothing, or of
// another tenant, cannot be named.
func TestFailedRunWorkspaceContinues(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	_, url := sourceTree(t)
	one, two := newWorkspaces(t, store, url), newWorkspaces(t, store, url)
	src := wire.WorkspaceSource{Git: &wire.GitSource{URL: url, Ref: "main"}}
	ok, err := one.Prepare(ctx, wire.Work{Tenant: "acme", RunID: "ok", Conversation: "c", Workspace: &src})
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	workspacetest.WriteFiles(t, ok.Dir, map[string]string{"turn1.txt": "one\n"})
	if _, err := ok.Finish(ctx, true); err != nil {
		t.Fatal(err)
	}

	failed, err := one.Prepare(ctx, wire.Work{Tenant: "acme", RunID: "failed", Conversation: "c"})
	if err != nil {
		t.Fatal(err)
	}
	defer failed.Close()
	workspacetest.WriteFiles(t, failed.Dir, map[string]string{"turn2.txt": "an hour of work\n"})
	a, err := failed.Finish(ctx, false)
	if err != nil || a == nil || a.Patch == nil || a.Archive == nil {
		t.Fatalf("a failed run that changed its workspace stored %+v, %v; want its patch and archive", a, err)
	}
	if head, err := store.Head(ctx, "acme", "c"); err != nil || head.RunID != "ok" {
		t.Errorf("the conversation's head is %+v, %v; want it still at run ok", head, err)
	}

	idle, err := one.Prepare(ctx, wire.Work{Tenant: "acme", RunID: "idle", Workspace: &src})
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if a, err := idle.Finish(ctx, false); err != nil || a != nil {
		t.Errorf("a failed run that changed nothing stored %+v, %v; want nothing", a, err)
	}

	next, err := two.Prepare(ctx, wire.Work{Tenant: "acme", RunID: "next", Conversation: "c", Workspace: &wire.WorkspaceSource{FromRun: "failed"}})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	sameFiles(t, workspacetest.Files(t, failed.Dir), workspacetest.Files(t, next.Dir))
	if _, err := next.Finish(ctx, true); err != nil {
		t.Fatal(err)
	}
	if head, err := store.Head(ctx, "acme", "c"); err != nil || head.RunID != "next" {
		t.Errorf("the conversation's head is %+v, %v; want run next", head, err)
	}

	for name, work := range map[string]wire.Work{
		"no workspace stored": {Tenant: "acme", RunID: "x1", Workspace: &wire.WorkspaceSource{FromRun: "idle"}},
		"unknown run":         {Tenant: "acme", RunID: "x2", Workspace: &wire.WorkspaceSource{FromRun: "nosuch"}},
		"another tenant's":    {Tenant: "globex", RunID: "x3", Workspace: &wire.WorkspaceSource{FromRun: "failed"}},
		"a bad run id":        {Tenant: "acme", RunID: "x4", Workspace: &wire.WorkspaceSource{FromRun: "a.b"}},
		"two sources":         {Tenant: "acme", RunID: "x5", Workspace: &wire.WorkspaceSource{FromRun: "failed", Snapshot: "sha256:00"}},
	} {
		ws, err := two.Prepare(ctx, work)
		var we *wire.Error
		if !errors.As(err, &we) || we.Class != wire.AgenticRequestValidationError || !strings.Contains(we.Message, "from_run") {
			t.Errorf("%s: Prepare = %v, %v; want an AgenticRequestValidationError naming workspace.from_run", name, ws, err)
		}
	}
}

// Acceptance 4 at the library level: the stored patch, fetched and
// applied to a fresh checkout of the source, gives the agent's tree byte
// for byte.
func TestStoredPatchReproducesTheChange(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	_, url := sourceTree(t)
	w := newWorkspaces(t, store, url)
	src := wire.WorkspaceSource{Git: &wire.GitSource{URL: url, Ref: "main"}}
	ws, err := w.Prepare(ctx, wire.Work{Tenant: "acme", RunID: "r1", Workspace: &src})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	workspacetest.WriteFiles(t, ws.Dir, map[string]string{"new/added.bin": "\x00\xfe\r\n", "main.go": "package main // changed\n", "logo.bin": "\xff\x00"})
	if err := os.Chmod(filepath.Join(ws.Dir, "README.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(ws.Dir, "main.go"), filepath.Join(ws.Dir, "moved.go")); err != nil {
		t.Fatal(err)
	}
	a, err := ws.Finish(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	rc, rec, err := store.Open(ctx, "acme", "r1", runner.PatchName)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if rec.Ref() != *a.Patch {
		t.Errorf("record %+v, status names %+v", rec.Ref(), *a.Patch)
	}
	fresh := filepath.Join(t.TempDir(), "checkout")
	workspacetest.Git(t, filepath.Dir(fresh), "clone", "-q", url, fresh)
	if err := workspace.Apply(ctx, fresh, rc, 1<<20); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, workspacetest.Files(t, ws.Dir), workspacetest.Files(t, fresh))
}

// Bad input is an AgenticRequestValidationError before any CLI could
// start, and the runner's root holds nothing of the run.
func TestWorkspaceBadInput(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	_, url := sourceTree(t)
	escaping, err := store.PushSnapshot(ctx, "acme", bytes.NewReader(workspacetest.EscapingTar(t)))
	if err != nil {
		t.Fatal(err)
	}
	big, err := store.PushSnapshot(ctx, "acme", strings.NewReader(strings.Repeat("x", 4<<10)))
	if err != nil {
		t.Fatal(err)
	}
	// A conversation whose last patch is over the next runner's limit.
	w := newWorkspaces(t, store, url)
	src := wire.WorkspaceSource{Git: &wire.GitSource{URL: url, Ref: "main"}}
	ws, err := w.Prepare(ctx, wire.Work{Tenant: "acme", RunID: "big", Conversation: "big", Workspace: &src})
	if err != nil {
		t.Fatal(err)
	}
	workspacetest.WriteFiles(t, ws.Dir, map[string]string{"big.txt": strings.Repeat("line\n", 2000)})
	if _, err := ws.Finish(ctx, true); err != nil {
		t.Fatal(err)
	}
	ws.Close()

	for _, c := range []struct {
		name string
		work wire.Work
		mod  func(*runner.Workspaces)
		want string // what the error says: the field at fault first
	}{
		{"outside the allow-list", wire.Work{Workspace: &wire.WorkspaceSource{Git: &wire.GitSource{URL: "file:///elsewhere.git"}}}, nil, "workspace.git.url: git remote \"file:///elsewhere.git\" is not in the allow-list"},
		{"snapshot over the limit", wire.Work{Workspace: &wire.WorkspaceSource{Snapshot: big}}, func(w *runner.Workspaces) { w.Materializer.MaxBytes = 1024 }, "workspace.snapshot: snapshot is over the size limit of 1024 bytes"},
		{"escaping path", wire.Work{Workspace: &wire.WorkspaceSource{Snapshot: escaping}}, nil, `workspace.snapshot: unsafe path "../escape"`},
		{"snapshot not stored", wire.Work{Workspace: &wire.WorkspaceSource{Snapshot: "sha256:" + strings.Repeat("0", 64)}}, nil, "workspace.snapshot: " + artifacts.ErrNotFound.Error()},
		{"patch over the limit", wire.Work{Conversation: "big"}, func(w *runner.Workspaces) { w.MaxPatch = 1024 }, "apply the patch of run big: patch is over the size limit of 1024 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorkspaces(t, store, url)
			if c.mod != nil {
				c.mod(w)
			}
			c.work.Tenant, c.work.RunID = "acme", "bad"
			ws, err := w.Prepare(ctx, c.work)
			var we *wire.Error
			if ws != nil || !errors.As(err, &we) || we.Class != wire.AgenticRequestValidationError {
				t.Fatalf("Prepare: %v, %v; want an AgenticRequestValidationError", ws, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v does not say %q", err, c.want)
			}
			if left, _ := os.ReadDir(w.Root); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// A conversation's runs get its directory, at the same path on every
// runner with the same root, so an agent that loads a session only where
// it began (Claude's) finds it; a second run of the conversation while
// the first holds it gets a directory of its own; one left by a runner
// that died is emptied and reused; nothing is left once they close.
func TestConversationKeepsItsDirectory(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	_, url := sourceTree(t)
	w := newWorkspaces(t, store, url)
	src := wire.WorkspaceSource{Git: &wire.GitSource{URL: url, Ref: "main"}}
	work := func(run string) wire.Work {
		return wire.Work{Tenant: "acme", RunID: run, Conversation: "c", Workspace: &src}
	}
	first, err := w.Prepare(ctx, work("r1"))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(w.Root, "conv.acme.c", "ws")
	if first.Dir != want {
		t.Errorf("the conversation's run works in %s, want %s", first.Dir, want)
	}
	second, err := w.Prepare(ctx, work("r2"))
	if err != nil {
		t.Fatal(err)
	}
	if second.Dir == first.Dir {
		t.Fatalf("two live runs of the conversation share %s", second.Dir)
	}
	second.Close()
	first.Close()
	// A directory a dead runner left, with a file in it, and no lock held.
	workspacetest.WriteFiles(t, want, map[string]string{"stale.txt": "left"})
	again, err := w.Prepare(ctx, work("r4"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Dir != want {
		t.Errorf("after the runs closed, the conversation's run works in %s, want %s", again.Dir, want)
	}
	if _, err := os.Stat(filepath.Join(want, "stale.txt")); err == nil {
		t.Error("what a dead runner left in the conversation's directory is still there")
	}
	again.Close()
	if left, _ := os.ReadDir(w.Root); len(left) != 0 {
		t.Errorf("the runs left %v", left)
	}
}
