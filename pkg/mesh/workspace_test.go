package mesh_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/pi"
	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/agentmesh/agentmesh/pkg/workspace"
	"github.com/agentmesh/agentmesh/pkg/workspace/workspacetest"
)

// fakeCLIEdit has the fake CLI edit its workspace first: it appends a
// turn to notes.txt in its working directory and logs, to the file the
// variable names, the directory and what notes.txt held before.
const fakeCLIEdit = "AGENTMESH_TEST_FAKE_CLI_EDIT"

// agentTurn is one line of fakeCLIEdit's log.
type agentTurn struct {
	Dir    string `json:"dir"`
	Before string `json:"before"`
}

func editWorkspace(logPath string) error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	before, err := os.ReadFile("notes.txt")
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	turn := strings.Count(string(before), "turn") + 1
	if err := os.WriteFile("notes.txt", append(before, []byte("turn "+string(rune('0'+turn))+"\n")...), 0o644); err != nil {
		return err
	}
	line, _ := json.Marshal(agentTurn{Dir: dir, Before: string(before)})
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(append(line, '\n'))
	return err
}

// piProfiles is the registry of the pi profile on the test binary.
func piProfiles(t *testing.T) *profile.Registry {
	t.Helper()
	p := profile.Profile{Name: pi.Name, Adapter: pi.Name, Transport: wire.TransportSubprocess, Model: "fake-model"}
	p.Binary, p.InstallHint = os.Args[0], "the test binary"
	reg, err := profile.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// Acceptance (issue 24): the two runs of one conversation land on two
// runner processes with workspace roots of their own, the second forced
// onto the other one by stopping the first; the second's CLI sees the
// first's change, once from a git source and once from a pushed
// snapshot. The terminal statuses name the patch and the archive, the
// runs' directories are gone, and the second's patch applied to a fresh
// copy of the source gives the agent's tree byte for byte.
func TestWorkspaceTravelsBetweenRunners(t *testing.T) {
	transcripts, err := filepath.Abs("../../testdata/cli/pi")
	if err != nil {
		t.Fatal(err)
	}
	top := t.TempDir()
	src := filepath.Join(top, "src")
	workspacetest.WriteFiles(t, src, map[string]string{"notes.txt": "source\n", "pkg/blob.bin": "\x00\x01\xff\r\n"})
	// The agent's tree after the two turns.
	agent := filepath.Join(top, "agent")
	workspacetest.WriteFiles(t, agent, map[string]string{"notes.txt": "source\nturn 1\nturn 2\n", "pkg/blob.bin": "\x00\x01\xff\r\n"})
	workspacetest.Git(t, src, "init", "-q")
	workspacetest.Git(t, src, "add", "-A")
	workspacetest.Git(t, src, "commit", "-q", "-m", "source")
	workspacetest.Git(t, top, "clone", "-q", "--bare", src, filepath.Join(top, "repo.git"))
	url := "file://" + filepath.Join(top, "repo.git")
	var packed bytes.Buffer
	if err := workspace.Pack(src, &packed, 0); err != nil {
		t.Fatal(err)
	}

	for _, variant := range []string{"git", "snapshot"} {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			srv := natstest.RunJetStream(t)
			logPath, editLog := filepath.Join(t.TempDir(), "argv.log"), filepath.Join(t.TempDir(), "edits.log")
			profiles := piProfiles(t)
			newPi := func(root string) *cli.Adapter[pi.Request] {
				a, err := pi.New(cli.Config{
					Binary: os.Args[0], InstallHint: "the test binary", WorkspaceRoot: root,
					EnvSet: map[string]string{
						fakeCLILog: logPath, fakeCLIEdit: editLog, fakeCLIFirst: filepath.Join(transcripts, "S1"),
						fakeCLIResume: filepath.Join(transcripts, "S1-resume"), "GORACE": "atexit_sleep_ms=0", "HOME": t.TempDir(),
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			startRunner := func(id, root string) *node {
				return startNodeWith(t, srv, mesh.Config{WithoutRouter: true, WithoutSweeper: true, WithoutExporter: true,
					Runner: runner.Config{ID: id, WorkspaceRoot: root, GitAllow: []string{url}}}, profiles, newPi(root))
			}
			rn := startNodeWith(t, srv, mesh.Config{WithoutRunner: true}, profiles, newPi(t.TempDir()))
			c := newClient(t, srv)
			store, err := artifacts.Open(ctx, rn.d.JS, rn.d.Names)
			if err != nil {
				t.Fatal(err)
			}
			source := wire.WorkspaceSource{Git: &wire.GitSource{URL: url, Ref: "main"}}
			if variant == "snapshot" {
				id, err := store.PushSnapshot(ctx, tenant, bytes.NewReader(packed.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				source = wire.WorkspaceSource{Snapshot: id}
			}
			turn := func(ws *wire.WorkspaceSource) (string, wire.Status) {
				r := runReq(t, map[string]any{"prompt": "add a turn"})
				r.V, r.Profile, r.Conversation, r.Workspace = 2, pi.Name, "conv", ws
				id, evs := clienttest.Run(t, c, r)
				st := last(evs)
				if st.State != wire.StateSucceeded {
					t.Fatalf("run %s: %s %v", id, describe(evs), st.Error)
				}
				if a := st.Artifacts; a == nil || a.Patch == nil || a.Archive == nil || !strings.HasPrefix(a.Patch.Name, tenant+"/"+id+"/"+runner.PatchName+"/") ||
					!strings.HasPrefix(a.Archive.Name, tenant+"/"+id+"/"+runner.ArchiveName+"/") {
					t.Fatalf("run %s's terminal status names artifacts %+v %+v", id, st.Artifacts.Patch, st.Artifacts.Archive)
				}
				return id, st
			}

			rootA, rootB := t.TempDir(), t.TempDir()
			a := startRunner("runner-a", rootA)
			turn(&source)
			a.stop()
			err = <-a.done
			a.done <- nil // for the node's cleanup
			if err != nil {
				t.Fatal(err)
			}
			startRunner("runner-b", rootB)
			second, st := turn(nil)

			var turns []agentTurn
			b, err := os.ReadFile(editLog)
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.Lines(string(b)) {
				var at agentTurn
				if err := json.Unmarshal([]byte(line), &at); err != nil {
					t.Fatal(err)
				}
				turns = append(turns, at)
			}
			if len(turns) != 2 {
				t.Fatalf("the CLI edited %d times, want 2: %+v", len(turns), turns)
			}
			for i, root := range []string{rootA, rootB} {
				real, _ := filepath.EvalSymlinks(root)
				if !strings.HasPrefix(turns[i].Dir, filepath.Join(real, runner.RunsDir)+string(filepath.Separator)) {
					t.Errorf("turn %d ran in %s, not under runner %d's root %s", i+1, turns[i].Dir, i+1, real)
				}
				if left, _ := os.ReadDir(filepath.Join(root, runner.RunsDir)); len(left) != 0 {
					t.Errorf("runner %d left %v", i+1, left)
				}
			}
			if turns[0].Before != "source\n" || turns[1].Before != "source\nturn 1\n" {
				t.Fatalf("the CLI saw %q then %q; the second turn must see the first's change", turns[0].Before, turns[1].Before)
			}

			// The second run's patch, fetched and verified, on a fresh copy.
			fresh := filepath.Join(t.TempDir(), "fresh")
			if variant == "git" {
				workspacetest.Git(t, filepath.Dir(fresh), "clone", "-q", url, fresh)
			} else if err := workspace.Unpack(bytes.NewReader(packed.Bytes()), fresh, 0); err != nil {
				t.Fatal(err)
			}
			rc, rec, err := store.Open(ctx, tenant, second, runner.PatchName)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if rec.Ref() != *st.Artifacts.Patch {
				t.Errorf("stored %+v, the status names %+v", rec.Ref(), *st.Artifacts.Patch)
			}
			if err := workspace.Apply(ctx, fresh, rc, 1<<20); err != nil {
				t.Fatal(err)
			}
			want, got := workspacetest.Files(t, agent), workspacetest.Files(t, fresh)
			if !maps.Equal(want, got) {
				t.Errorf("after the patch the tree is\n%q\nwant the agent's\n%q", got, want)
			}
		})
	}
}

// Issue 37: a run that edited its workspace and then failed (a 500 from
// the model API) or passed its deadline stores its patch and archive,
// and its terminal status names them; the conversation's head stays
// where it was; and a run that names it (workspace.from_run), on
// another runner, starts from what it left. Its CLI sees the failed
// run's change.
func TestFailedRunsStoreTheirWorkspace(t *testing.T) {
	transcripts, err := filepath.Abs("../../testdata/cli/pi")
	if err != nil {
		t.Fatal(err)
	}
	for _, variant := range []string{"500", "deadline"} {
		t.Run(variant, func(t *testing.T) {
			ctx := context.Background()
			srv := natstest.RunJetStream(t)
			top := t.TempDir()
			src := filepath.Join(top, "src")
			workspacetest.WriteFiles(t, src, map[string]string{"notes.txt": "source\n"})
			var packed bytes.Buffer
			if err := workspace.Pack(src, &packed, 0); err != nil {
				t.Fatal(err)
			}
			editLog := filepath.Join(t.TempDir(), "edits.log")
			profiles := piProfiles(t)
			newPi := func(root string, env map[string]string) *cli.Adapter[pi.Request] {
				env = maps.Clone(env)
				if env == nil {
					env = map[string]string{}
				}
				maps.Copy(env, map[string]string{fakeCLILog: filepath.Join(t.TempDir(), "argv.log"), fakeCLIEdit: editLog,
					"GORACE": "atexit_sleep_ms=0", "HOME": t.TempDir()})
				a, err := pi.New(cli.Config{Binary: os.Args[0], InstallHint: "the test binary", WorkspaceRoot: root, EnvSet: env})
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			failing := map[string]string{fakeCLIFirst: filepath.Join(transcripts, "S5-noretry")}
			if variant == "deadline" {
				failing = map[string]string{fakeCLIFirst: filepath.Join(transcripts, "S1"), fakeCLIHang: filepath.Join(t.TempDir(), "pids")}
			}
			rn := startNodeWith(t, srv, mesh.Config{WithoutRunner: true}, profiles, newPi(t.TempDir(), nil))
			c := newClient(t, srv)
			store, err := artifacts.Open(ctx, rn.d.JS, rn.d.Names)
			if err != nil {
				t.Fatal(err)
			}
			id, err := store.PushSnapshot(ctx, tenant, bytes.NewReader(packed.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			rootA := t.TempDir()
			a := startNodeWith(t, srv, mesh.Config{WithoutRouter: true, WithoutSweeper: true, WithoutExporter: true,
				Runner: runner.Config{ID: "runner-a", WorkspaceRoot: rootA}}, profiles, newPi(rootA, failing))
			r := runReq(t, map[string]any{"prompt": "add a turn"})
			r.V, r.Profile, r.Conversation, r.Workspace = 2, pi.Name, "conv", &wire.WorkspaceSource{Snapshot: id}
			if variant == "deadline" {
				r.DeadlineMS = 3000
			}
			failed, evs := clienttest.Run(t, c, r)
			st := last(evs)
			want := map[string]wire.State{"500": wire.StateFailed, "deadline": wire.StateTimedOut}[variant]
			if st.State != want {
				t.Fatalf("run %s ended %s (%v), want %s: %s", failed, st.State, st.Error, want, describe(evs))
			}
			if a := st.Artifacts; a == nil || a.Patch == nil || a.Archive == nil {
				t.Fatalf("run %s ended %s and its status names no patch and archive: %+v", failed, st.State, st.Artifacts)
			}
			if h, err := store.Head(ctx, tenant, "conv"); !errors.Is(err, artifacts.ErrNotFound) {
				t.Errorf("the conversation's head moved to %+v (%v) on a run that did not succeed", h, err)
			}
			a.stop()
			err = <-a.done
			a.done <- nil // for the node's cleanup
			if err != nil {
				t.Fatal(err)
			}
			rootB := t.TempDir()
			startNodeWith(t, srv, mesh.Config{WithoutRouter: true, WithoutSweeper: true, WithoutExporter: true,
				Runner: runner.Config{ID: "runner-b", WorkspaceRoot: rootB}}, profiles,
				newPi(rootB, map[string]string{fakeCLIFirst: filepath.Join(transcripts, "S1"), fakeCLIResume: filepath.Join(transcripts, "S1")}))
			r = runReq(t, map[string]any{"prompt": "go on"})
			r.V, r.Profile, r.Conversation, r.Workspace = 2, pi.Name, "conv", &wire.WorkspaceSource{FromRun: failed}
			next, evs := clienttest.Run(t, c, r)
			if st := last(evs); st.State != wire.StateSucceeded || st.Artifacts == nil {
				t.Fatalf("run %s from run %s: %s %v", next, failed, describe(evs), st.Error)
			}
			b, err := os.ReadFile(editLog)
			if err != nil {
				t.Fatal(err)
			}
			var turns []agentTurn
			for line := range strings.Lines(string(b)) {
				var at agentTurn
				if err := json.Unmarshal([]byte(line), &at); err != nil {
					t.Fatal(err)
				}
				turns = append(turns, at)
			}
			if len(turns) != 2 || turns[1].Before != "source\nturn 1\n" {
				t.Fatalf("the CLI's turns %+v; want the second to see the failed run's change", turns)
			}
			if h, err := store.Head(ctx, tenant, "conv"); err != nil || h.RunID != next {
				t.Errorf("the conversation's head is %+v, %v; want run %s, which succeeded", h, err, next)
			}
		})
	}
}

// Bad workspace input fails the run with AgenticRequestValidationError
// before its CLI starts, and the runner's root holds nothing of it: a git
// remote outside the allow-list, and a snapshot whose entry escapes.
func TestWorkspaceBadInputFailsTheRun(t *testing.T) {
	ctx := context.Background()
	srv := natstest.RunJetStream(t)
	root, argv := t.TempDir(), filepath.Join(t.TempDir(), "argv.log")
	a, err := pi.New(cli.Config{Binary: os.Args[0], InstallHint: "the test binary", WorkspaceRoot: root,
		EnvSet: map[string]string{fakeCLILog: argv, "GORACE": "atexit_sleep_ms=0", "HOME": t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	n := startNodeWith(t, srv, mesh.Config{Runner: runner.Config{WorkspaceRoot: root, GitAllow: []string{"file:///allowed/"}}}, piProfiles(t), a)
	store, err := artifacts.Open(ctx, n.d.JS, n.d.Names)
	if err != nil {
		t.Fatal(err)
	}
	escaping, err := store.PushSnapshot(ctx, tenant, bytes.NewReader(workspacetest.EscapingTar(t)))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, srv)
	for name, src := range map[string]wire.WorkspaceSource{
		"outside the allow-list": {Git: &wire.GitSource{URL: "file:///elsewhere/repo.git"}},
		"escaping snapshot":      {Snapshot: escaping},
	} {
		t.Run(name, func(t *testing.T) {
			r := runReq(t, map[string]any{"prompt": "edit it"})
			r.Profile, r.Workspace = pi.Name, &src
			_, evs := clienttest.Run(t, c, r)
			st := last(evs)
			if st.State != wire.StateFailed || !errors.Is(st.Error, wire.AgenticRequestValidationError) || st.Artifacts != nil {
				t.Fatalf("%s: terminal %+v, want failed with AgenticRequestValidationError and no artifacts", describe(evs), st)
			}
			if _, err := os.Stat(argv); !os.IsNotExist(err) {
				t.Errorf("the CLI ran (%v)", err)
			}
			if left, _ := os.ReadDir(filepath.Join(root, runner.RunsDir)); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}
