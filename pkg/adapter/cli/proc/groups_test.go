package proc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/natstest"
)

func init() {
	fakeAgents["runner"] = fakeRunner
}

// fakeRunner is a runner in miniature: it streams the grandchild fake
// (args[1:] are its options) with StateDir args[0], prints the pids the
// fake reports as one JSON line, and keeps streaming until it is killed.
func fakeRunner(args []string) int {
	spec := proc.Spec{
		Binary:   exe,
		Args:     args[1:],
		Env:      proc.AllowEnv(nil, map[string]string{"FAKE_AGENT": "grandchild", "GORACE": fakeGORACE}),
		Grace:    grace,
		StateDir: args[0],
	}
	for m, err := range proc.Stream(context.Background(), spec) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake runner:", err)
			return 1
		}
		if _, ok := m["grandchild"]; ok {
			printJSON(m)
		}
	}
	return 0
}

// pids are what the grandchild fake reports.
type pids struct {
	Pid        int `json:"pid"`
	Grandchild int `json:"grandchild"`
}

// startFakeRunner starts fakeRunner in its own process and returns it with
// the pids of its child and grandchild. The runner is killed and reaped
// when the test ends, and so is anything it left that is still running.
func startFakeRunner(t *testing.T, dir string, opts ...string) (*exec.Cmd, pids) {
	t.Helper()
	cmd := exec.Command(exe, append([]string{dir}, opts...)...)
	cmd.Env = []string{"FAKE_AGENT=runner", "GORACE=" + fakeGORACE}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var p pids
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for _, pid := range []int{p.Pid, p.Grandchild} {
			if pid > 0 && gone(pid) != nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		t.Fatalf("fake runner: %v", err)
	}
	if err := json.Unmarshal(line, &p); err != nil || p.Pid == 0 || p.Grandchild == 0 {
		t.Fatalf("fake runner printed %q (%v)", line, err)
	}
	return cmd, p
}

// records lists the group records under dir, as <owner dir>/<file>.
func records(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	owners, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, o := range owners {
		files, err := os.ReadDir(filepath.Join(dir, o.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			out = append(out, o.Name()+"/"+f.Name())
		}
	}
	return out
}

// A runner SIGKILLed mid-run: the kernel kills its child (the parent-death
// signal), the grandchild in the child's group survives it, and the next
// runner's Reap ends that group and removes the record.
func TestRunnerDeathChildDiesGrandchildIsReaped(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal and the records need Linux")
	}
	dir := t.TempDir()
	runner, p := startFakeRunner(t, dir)
	if got := records(t, dir); len(got) != 1 || !strings.HasSuffix(got[0], "/"+strconv.Itoa(p.Pid)+".json") {
		t.Fatalf("records = %v, want the one group led by %d", got, p.Pid)
	}
	if err := runner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = runner.Wait()
	natstest.Eventually(t, 5*time.Second, func() error { return gone(p.Pid) })
	if gone(p.Grandchild) == nil {
		t.Fatal("the grandchild died with the runner: the test no longer shows what Reap is for")
	}
	reaped, err := proc.Reap(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(reaped) != 1 || reaped[0].PGID != p.Pid || !reaped[0].Killed || reaped[0].Left || reaped[0].Owner != runner.Process.Pid {
		t.Fatalf("Reap = %+v, want the group %d of runner %d killed", reaped, p.Pid, runner.Process.Pid)
	}
	checkGone(t, p.Grandchild)
	if got := records(t, dir); len(got) != 0 {
		t.Fatalf("records after Reap = %v, want none", got)
	}
	// A second Reap finds nothing.
	if reaped, err := proc.Reap(dir); err != nil || len(reaped) != 0 {
		t.Fatalf("second Reap = %+v, %v", reaped, err)
	}
}

// A grandchild that calls setsid leaves the group and escapes both the
// parent-death signal and Reap: the documented limit.
func TestRunnerDeathSetsidGrandchildEscapes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal and the records need Linux")
	}
	dir := t.TempDir()
	runner, p := startFakeRunner(t, dir, "escape")
	if err := runner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = runner.Wait()
	natstest.Eventually(t, 5*time.Second, func() error { return gone(p.Pid) })
	if _, err := proc.Reap(dir); err != nil {
		t.Fatal(err)
	}
	if gone(p.Grandchild) == nil {
		t.Fatal("the setsid grandchild is gone: update the documented limit")
	}
	_ = syscall.Kill(p.Grandchild, syscall.SIGKILL) // it escaped by design
}

// Reap leaves the groups of a live runner alone, and this process's own.
func TestReapSparesLiveRunners(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the records need Linux")
	}
	dir := t.TempDir()
	_, other := startFakeRunner(t, dir)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	spec := fakeSpec("grandchild")
	spec.StateDir = dir
	var mine pids
	var wg sync.WaitGroup
	first := make(chan struct{})
	wg.Go(func() {
		for m, err := range proc.Stream(ctx, spec) {
			if err != nil {
				return
			}
			if _, ok := m["grandchild"]; ok {
				b, _ := json.Marshal(m)
				_ = json.Unmarshal(b, &mine)
				close(first)
			}
		}
	})
	<-first
	before := records(t, dir)
	reaped, err := proc.Reap(dir)
	if err != nil || len(reaped) != 0 {
		t.Fatalf("Reap = %+v, %v; want nothing reaped", reaped, err)
	}
	for _, pid := range []int{other.Pid, other.Grandchild, mine.Pid, mine.Grandchild} {
		if gone(pid) == nil {
			t.Errorf("pid %d of a live runner was ended", pid)
		}
	}
	if after := records(t, dir); len(after) != 2 || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("records = %v, want the two live ones %v", after, before)
	}
	cancel()
	wg.Wait()
	checkGone(t, mine.Pid, mine.Grandchild)
}

// A group that ends normally leaves no record behind.
func TestStreamRemovesItsRecord(t *testing.T) {
	dir := t.TempDir()
	spec := fakeSpec("grandchild", "ticks=2")
	spec.StateDir = dir
	var recorded []string
	grandchild := 0
	r := collect(t, testContext(t), spec, func(i int, m map[string]any) bool {
		if i == 0 {
			recorded = records(t, dir)
			f, _ := m["grandchild"].(float64)
			grandchild = int(f)
		}
		return true
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if runtime.GOOS == "linux" && len(recorded) != 1 {
		t.Errorf("records while running = %v, want one", recorded)
	}
	if got := records(t, dir); len(got) != 0 {
		t.Errorf("records after the stream = %v, want none", got)
	}
	checkGone(t, r.pid, grandchild)
}

// A record whose state dir cannot be written fails the start and leaves
// no process behind.
func TestStreamUnrecordable(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the records need Linux")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	spec := fakeSpec("grandchild", "ticks=1")
	spec.StateDir = file // a file, so its owner directory cannot be made
	r := collect(t, testContext(t), spec, nil)
	if r.err == nil || !strings.Contains(r.err.Error(), "record its process group") {
		t.Fatalf("err = %v, want a failure to record the group", r.err)
	}
	if r.pid != 0 {
		t.Errorf("OnStart was called with %d for a child that was not started", r.pid)
	}
}

// Reap checks a dead owner's records against what runs now: a leader pid
// that runs something else (another start time) is left alone; the group
// whose leader matches is killed.
func TestReapChecksIdentity(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the records need Linux")
	}
	dir := t.TempDir()
	start := func() (*exec.Cmd, uint64) {
		cmd := exec.Command(exe)
		cmd.Env = []string{"FAKE_AGENT=script", "GORACE=" + fakeGORACE}
		cmd.Args = append(cmd.Args, "sleep:"+lifetime.String())
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		st, err := strconv.ParseUint(f[19], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return cmd, st
	}
	recycled, recycledStart := start()
	ours, oursStart := start()
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	// The owner: a process that has exited.
	dead := exec.Command(exe)
	dead.Env = []string{"FAKE_AGENT=script"}
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	owner := filepath.Join(dir, fmt.Sprintf("%s_%d_%d", strings.TrimSpace(string(boot)), dead.Process.Pid, 1))
	if err := os.MkdirAll(owner, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(pgid int, start uint64) {
		b, _ := json.Marshal(map[string]any{"pgid": pgid, "start": start, "boot": strings.TrimSpace(string(boot)), "binary": "fake"})
		if err := os.WriteFile(filepath.Join(owner, strconv.Itoa(pgid)+".json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(recycled.Process.Pid, recycledStart-1) // started before this pid was ours
	write(ours.Process.Pid, oursStart)
	reaped, err := proc.Reap(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(reaped) != 1 || reaped[0].PGID != ours.Process.Pid || !reaped[0].Killed {
		t.Fatalf("Reap = %+v, want only group %d killed", reaped, ours.Process.Pid)
	}
	natstest.Eventually(t, 5*time.Second, func() error { return gone(ours.Process.Pid) })
	if gone(recycled.Process.Pid) == nil {
		t.Fatal("Reap killed a process whose start time does not match its record")
	}
	if _, err := os.Stat(owner); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead owner's directory is still there (%v)", err)
	}
}

func TestReapRefusesUnsafeDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := proc.Reap(dir); !errors.Is(err, proc.ErrStateDir) {
		t.Errorf("Reap of a world-writable dir: err = %v, want ErrStateDir", err)
	}
	if _, err := proc.Reap(""); !errors.Is(err, proc.ErrStateDir) {
		t.Errorf("Reap(\"\"): err = %v, want ErrStateDir", err)
	}
}

// The parent-death signal follows the thread that forked the child. Other
// goroutines that lock a thread and return without unlocking end their
// threads; the child must not die with any of them. (This guards the
// contract; it cannot force the runtime to schedule one of them on the
// forking thread, which is what the lock in start rules out.)
func TestChildSurvivesThreadExits(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	spec := fakeSpec("grandchild")
	ticks := 0
	r := collect(t, ctx, spec, func(i int, m map[string]any) bool {
		if i == 0 {
			var wg sync.WaitGroup
			for range 4 * runtime.GOMAXPROCS(0) {
				wg.Go(func() { runtime.LockOSThread() }) // returns locked: its thread exits
			}
			wg.Wait()
		}
		if _, ok := m["tick"]; ok {
			ticks++
			if ticks == 10 {
				cancel()
			}
		}
		return true
	})
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err = %v after %d ticks, want the cancel after 10 (the child died early?)", r.err, ticks)
	}
	checkGone(t, r.pid)
}
