package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/mesh"
)

// TestUpLocksItsDataDir starts up on a data directory, makes a run and an
// API key there, then starts a second up on the same directory, as a
// process of its own, twice: on the first one's NATS port and on a free
// one. Each second up exits non-zero at once, naming the directory and
// the first one's pid, before it opens the store (its log never gets that
// far). The first goes on serving; after it is stopped and started again
// on the directory, the run and the key are there.
func TestUpLocksItsDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	o := upOptions{listen: "127.0.0.1:0", dataDir: dir, fixtureDir: "../../testdata/fixture", profiles: "../../profiles", workspace: t.TempDir(), runnerAdapters: []string{"fixture"}}
	first, stop := startUpStop(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := first.must(t, ctx, exitOK, "run", "-p", "fixture", "hi")
	id := acceptedLine.FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no accepted line:\n%s", out)
	}
	_, _, keyOut := first.cli(ctx, "keys", "create", "--tenant", "default", "--principal", "ann")
	keyID := strings.Fields(strings.TrimPrefix(keyOut, "key "))[0]

	port := first.url[strings.LastIndexByte(first.url, ':')+1:]
	for name, listen := range map[string]string{"same ports": "127.0.0.1:" + port, "other ports": "127.0.0.1:0"} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, os.Args[0], "up", "--listen", listen, "--data-dir", dir, "--http", "", "--gateway", "",
				"--fixture-dir", "../../testdata/fixture", "--profiles-dir", "../../profiles", "--runner-adapters", "fixture")
			cmd.Env = append(os.Environ(), asMainEnv+"=1", "GORACE=atexit_sleep_ms=0")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("second up: %v, want a non-zero exit; stderr:\n%s", err, &stderr)
			}
			want := fmt.Sprintf("data directory in use: %s is held by process %d", dir, os.Getpid())
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("second up's stderr:\n%s\nwant %q", &stderr, want)
			}
			if strings.Contains(stderr.String(), "agentmesh up") || strings.Contains(stderr.String(), "nats") {
				t.Errorf("second up got as far as its server:\n%s", &stderr)
			}
			t.Logf("refused in %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
		})
	}
	// The first is unharmed, and so is what it stored.
	first.must(t, ctx, exitOK, "run", "-p", "fixture", "still here")
	stop()
	if b, err := os.ReadFile(filepath.Join(dir, mesh.LockFile)); err != nil || len(b) != 0 {
		t.Errorf("lock file after the first up stopped: %q, %v; want it empty", b, err)
	}
	again := startUpOptions(t, o)
	if out := again.must(t, ctx, exitOK, "status", id[1]); !strings.Contains(out, "succeeded") {
		t.Errorf("status %s after a restart:\n%s", id[1], out)
	}
	if out := again.must(t, ctx, exitOK, "keys", "list", "--tenant", "default"); !strings.Contains(out, keyID) {
		t.Errorf("keys list after a restart has no %s:\n%s", keyID, out)
	}
	again.must(t, ctx, exitOK, "run", "-p", "fixture", "after the restart")
}

// TestLockDataDir: the lock names its holder's pid to a second taker, in
// this process too (flock locks an open file, not a process), and is free
// again once released.
func TestLockDataDir(t *testing.T) {
	dir := t.TempDir()
	release, err := mesh.LockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = mesh.LockDataDir(dir)
	var in *mesh.DataDirInUseError
	if !errors.As(err, &in) || in.PID != os.Getpid() || in.Dir != dir || !errors.Is(err, mesh.ErrDataDirInUse) {
		t.Fatalf("second lock: %v, want in use by %d", err, os.Getpid())
	}
	release()
	release2, err := mesh.LockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	release2()
}
