package mesh_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/codex"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/gemini"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/pi"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// The test binary doubles as an agent CLI: it appends its argv to a log
// and replays a real transcript: the first one for the first invocation,
// the second one for every later invocation (the resume).
const (
	fakeCLILog    = "AGENTMESH_TEST_FAKE_CLI_LOG"
	fakeCLIFirst  = "AGENTMESH_TEST_FAKE_CLI_FIRST"
	fakeCLIResume = "AGENTMESH_TEST_FAKE_CLI_RESUME"
)

func runFakeCLI(logPath string) int {
	if edits := os.Getenv(fakeCLIEdit); edits != "" && editWorkspace(edits) != nil {
		return 3
	}
	if pidFile := os.Getenv(fakeCLIHang); pidFile != "" {
		return hangingCLI(pidFile, os.Getenv(fakeCLIFirst))
	}
	prior, _ := os.ReadFile(logPath)
	line, _ := json.Marshal(os.Args[1:])
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 3
	}
	fmt.Fprintf(f, "%s\n", line)
	f.Close()
	transcript := os.Getenv(fakeCLIFirst)
	if len(prior) > 0 {
		transcript = os.Getenv(fakeCLIResume)
	}
	out, err := os.ReadFile(transcript + ".stdout.ndjson")
	if err != nil {
		return 3
	}
	os.Stdout.Write(out)
	code, _ := os.ReadFile(transcript + ".exit")
	n, _ := strconv.Atoi(string(trimSpace(code)))
	return n
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

func argvLog(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var argv []string
		if err := json.Unmarshal(sc.Bytes(), &argv); err != nil {
			t.Fatal(err)
		}
		out = append(out, argv)
	}
	return out
}

// Sessions through the mesh with each CLI adapter on its real transcripts:
// the first run confirms the CLI's session id, the router stores it under
// the conversation, and the second run on that conversation receives it
// through the adapter's resume field and continues the same session.
func TestSessionsThroughEachCLIAdapter(t *testing.T) {
	type cliCase struct {
		name, dir string
		build     func(cli.Config) (adapter.Adapter, error)
		model     string
	}
	cases := []cliCase{
		{claudecode.Name, "claude-code", func(c cli.Config) (adapter.Adapter, error) { return claudecode.New(c) }, "claude-sonnet-4-5"},
		{codex.Name, "codex", func(c cli.Config) (adapter.Adapter, error) { return codex.New(c) }, "gpt-5.5"},
		{gemini.Name, "gemini", func(c cli.Config) (adapter.Adapter, error) { return gemini.New(c) }, "gemini-2.5-flash"},
		{pi.Name, "pi", func(c cli.Config) (adapter.Adapter, error) { return pi.New(c) }, "fake-model"},
	}
	for _, cc := range cases {
		t.Run(cc.name, func(t *testing.T) {
			srv := natstest.RunJetStream(t)
			transcripts, err := filepath.Abs(filepath.Join("../../testdata/cli", cc.dir))
			if err != nil {
				t.Fatal(err)
			}
			logPath := filepath.Join(t.TempDir(), "argv.log")
			a, err := cc.build(cli.Config{
				Binary: os.Args[0], InstallHint: "the test binary",
				EnvSet: map[string]string{
					fakeCLILog: logPath, fakeCLIFirst: filepath.Join(transcripts, "S1"),
					fakeCLIResume: filepath.Join(transcripts, "S1-resume"), "GORACE": "atexit_sleep_ms=0",
					"CODEX_HOME": t.TempDir(), "HOME": t.TempDir(),
				},
				WorkspaceRoot: t.TempDir(),
			})
			if err != nil {
				t.Fatal(err)
			}
			profiles, err := profile.New(profile.Profile{Name: cc.name, Adapter: cc.name, Transport: wire.TransportSubprocess,
				Model: cc.model, Binary: os.Args[0], InstallHint: "the test binary"})
			if err != nil {
				t.Fatal(err)
			}
			n := startNodeWith(t, srv, mesh.Config{}, profiles, a)
			kv, err := n.d.JS.KeyValue(context.Background(), n.d.Names.SessionsBucket())
			if err != nil {
				t.Fatal(err)
			}
			c := newClient(t, srv)

			first := converse(t, c, cc.name, "conv", map[string]any{"prompt": "What is the answer?"})
			if st := last(first); st.State != wire.StateSucceeded {
				t.Fatalf("first run: %s %v", describe(first), st.Error)
			}
			id := systemMeta(t, first).SessionID
			if id == "" || stored(t, kv, "conv") != id {
				t.Fatalf("first run confirmed %q, stored %q", id, stored(t, kv, "conv"))
			}

			second := converse(t, c, cc.name, "conv", map[string]any{"prompt": "What was the answer again?"})
			if st := last(second); st.State != wire.StateSucceeded {
				t.Fatalf("second run: %s %v", describe(second), st.Error)
			}
			if got := systemMeta(t, second).SessionID; got != id {
				t.Fatalf("second run confirmed %q, want the resumed %q", got, id)
			}
			argvs := argvLog(t, logPath)
			if len(argvs) != 2 {
				t.Fatalf("the CLI ran %d times, want 2", len(argvs))
			}
			if slices.Contains(argvs[0], id) || !slices.Contains(argvs[1], id) {
				t.Fatalf("argv did not carry the session only on the resume:\nfirst  %q\nsecond %q", argvs[0], argvs[1])
			}
			if stored(t, kv, "conv") != id {
				t.Fatalf("stored %q after the resume, want %q", stored(t, kv, "conv"), id)
			}
		})
	}
}
