package mesh_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// fakeCLIHang makes the fake CLI print the first event of its transcript,
// start a grandchild, write both pids to the file this names, and hang.
const fakeCLIHang = "AGENTMESH_TEST_FAKE_CLI_HANG"

func hangingCLI(pidFile, transcript string) int {
	out, err := os.ReadFile(transcript + ".stdout.ndjson")
	if err != nil {
		return 3
	}
	first, _, _ := bytes.Cut(out, []byte("\n"))
	grandchild := exec.Command("sleep", "300")
	if err := grandchild.Start(); err != nil {
		return 3
	}
	if err := os.WriteFile(pidFile, fmt.Appendf(nil, "%d\n%d\n", os.Getpid(), grandchild.Process.Pid), 0o600); err != nil {
		return 3
	}
	os.Stdout.Write(append(first, '\n'))
	time.Sleep(time.Hour)
	return 0
}

func TestStalledCLIEndsWithStallError(t *testing.T) {
	srv := natstest.RunJetStream(t)
	transcripts, err := filepath.Abs("../../testdata/cli/claude-code")
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pids")
	a, err := claudecode.New(cli.Config{
		Binary: os.Args[0], InstallHint: "the test binary",
		EnvSet: map[string]string{
			fakeCLILog: filepath.Join(t.TempDir(), "argv.log"), fakeCLIHang: pidFile,
			fakeCLIFirst: filepath.Join(transcripts, "S1"), "GORACE": "atexit_sleep_ms=0", "HOME": t.TempDir(),
		},
		WorkspaceRoot: t.TempDir(),
		Grace:         500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	const stallAfter = time.Second
	profiles, err := profile.New(profile.Profile{Name: claudecode.Name, Adapter: claudecode.Name, Transport: wire.TransportSubprocess,
		Model: "claude-sonnet-4-5", Binary: os.Args[0], InstallHint: "the test binary",
		Policy: profile.Policy{StallAfter: stallAfter}})
	if err != nil {
		t.Fatal(err)
	}
	startNodeWith(t, srv, mesh.Config{}, profiles, a)
	c := newClient(t, srv)
	r := runReq(t, map[string]any{"prompt": "hang after one event"})
	r.Profile = claudecode.Name
	start := time.Now()
	_, evs := clienttest.Run(t, c, r)
	took := time.Since(start)
	st := last(evs)
	if st.State != wire.StateFailed || !errors.Is(st.Error, wire.ProviderStallError) {
		t.Fatalf("terminal = %+v (%s), want failed with ProviderStallError", st, describe(evs))
	}
	if got := describe(evs); got != "[accepted routed running system failed]" {
		t.Fatalf("events = %s", got)
	}
	if took < stallAfter {
		t.Fatalf("ended after %s, before stall_after %s", took, stallAfter)
	}
	pids := readPids(pidFile)
	if len(pids) != 2 {
		t.Fatalf("pids = %v, want the CLI and its grandchild", pids)
	}
	// The terminal status is published after the process group was reaped.
	for _, pid := range pids {
		if running(pid) {
			t.Errorf("process %d survived the stalled run", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
