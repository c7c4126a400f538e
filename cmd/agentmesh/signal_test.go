package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/nats-io/nats.go/jetstream"
)

// meshWithoutRouter is a JetStream server with the topology and no service:
// a submitted run is stored and never comes.
func meshWithoutRouter(t *testing.T) (string, jetstream.JetStream) {
	t.Helper()
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	if err := topology.Ensure(context.Background(), js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	return srv.ClientURL(), js
}

// submitted waits until the submit stream holds n messages.
func submitted(t *testing.T, js jetstream.JetStream, n uint64) {
	t.Helper()
	natstest.Eventually(t, 10*time.Second, func() error {
		st, err := js.Stream(context.Background(), subject.Names{}.SubmitStream())
		if err != nil {
			return err
		}
		if got := st.CachedInfo().State.Msgs; got != n {
			return fmt.Errorf("%d submissions stored, want %d", got, n)
		}
		return nil
	})
}

func TestRunInterruptedWhileItsRunNeverComes(t *testing.T) {
	url, js := meshWithoutRouter(t)
	io, _, errOut := testIO(nil)
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"run", "--server", url, "-p", "fixture", "--run-id", "lost-1", "hi"}, io)
	}()
	submitted(t, js, 1)
	interrupt()
	select {
	case code := <-done:
		if code != exitInterrupted {
			t.Errorf("exit code = %d, want %d; stderr:\n%s", code, exitInterrupted, errOut)
		}
	case <-time.After(cancelTimeout + 5*time.Second):
		t.Fatalf("run did not return after the interrupt; stderr:\n%s", errOut)
	}
	for _, want := range []string{"interrupted: cancelling run lost-1", "cancel lost-1:", "interrupted before run lost-1 ended"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr = %q, want %q", errOut, want)
		}
	}
}

// startAsMain starts cmd, the test binary running main, its stderr to
// stderr; the channel gets its Wait's error.
func startAsMain(t *testing.T, cmd *exec.Cmd, stderr *servicetest.Buffer) chan error {
	t.Helper()
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return exited
}

// TestRunExitsOnSIGTERM runs the command as its own process, with main's
// signal handling, and sends it SIGTERM while it waits for a run that never
// comes.
func TestRunExitsOnSIGTERM(t *testing.T) {
	url, js := meshWithoutRouter(t)
	var stderr servicetest.Buffer
	cmd := exec.Command(os.Args[0], "run", "--server", url, "-p", "fixture", "--run-id", "lost-2", "hi")
	exited := startAsMain(t, cmd, &stderr)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	submitted(t, js, 1)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
			t.Errorf("agentmesh run after SIGTERM: %v, want exit code %d; stderr:\n%s", err, exitInterrupted, &stderr)
		}
	case <-time.After(cancelTimeout + 5*time.Second):
		t.Fatalf("agentmesh run still running after SIGTERM; stderr:\n%s", &stderr)
	}
}

// TestDemoHintNamesTheCommand: up --demo's hint says what to type next
// as the user ran the command (bin/agentmesh under make run), not a bare
// agentmesh that is not on their PATH.
func TestDemoHintNamesTheCommand(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(os.Args[0], filepath.Join(dir, "bin", "agentmesh")); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var stderr servicetest.Buffer
	cmd := exec.Command("bin/agentmesh", "up", "--demo", "--listen", "127.0.0.1:0", "--http", "", "--gateway", "", "--data-dir", filepath.Join(dir, "data"),
		"--fixture-dir", filepath.Join(root, "testdata", "fixture"), "--profiles-dir", filepath.Join(root, "profiles"), "--runner-adapters", "fixture",
		"--workspace-root", dir)
	cmd.Dir = dir
	exited := startAsMain(t, cmd, &stderr)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Error("up did not stop on SIGTERM")
		}
	}()
	natstest.Eventually(t, 60*time.Second, func() error {
		if !strings.Contains(stderr.String(), "demo run done") {
			return fmt.Errorf("no demo hint yet:\n%s", &stderr)
		}
		return nil
	})
	if !strings.Contains(stderr.String(), `try="bin/agentmesh run --server nats://127.0.0.1:`) {
		t.Errorf("the demo's hint does not name bin/agentmesh:\n%s", &stderr)
	}
}
