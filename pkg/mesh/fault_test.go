package mesh_test

// Fault tests (issue 9, acceptance 1): real runner processes, killed with
// SIGKILL or asked to cancel, running a fake agent CLI through the real
// claude-code adapter and pkg/adapter/cli/proc. Each test runs AGENTMESH_CHAOS_TRIALS
// runs (default faultDefaultTrials; make chaos runs 100), in rounds of up
// to faultBatch at once, and logs one line
//
//	fault <name>: trials=N lost=0 duplicate=0 stuck=0 surviving=0 wrong=0
//
// lost: no terminal status within the bound; duplicate: executions of the
// CLI beyond what the case allows, or one that started while an earlier
// execution of the same run (or one of its grandchildren) still ran;
// stuck: the record is still running at the end; surviving: a process the
// fake CLI or its grandchildren wrote down still runs at the end; wrong: a
// terminal status other than the case's.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/runner/runnerservice"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
)

// The test binary plays three more parts, chosen by environment:
const (
	// a runner service process (runnerservice.Run, configured by the usual
	// AGENTMESH_* variables);
	faultRunnerEnv = "AGENTMESH_TEST_FAULT_RUNNER"
	// the fake agent CLI, which records its executions in this directory;
	faultDirEnv        = "AGENTMESH_TEST_FAULT_DIR"
	faultTranscriptEnv = "AGENTMESH_TEST_FAULT_TRANSCRIPT"
	// a grandchild of the CLI, in its process group, that sleeps.
	faultSleeperEnv = "AGENTMESH_TEST_FAULT_SLEEPER"
	// the mesh's mark in its CLIs' environments (not an AGENTMESH_
	// variable: the sandbox passes the profile's environment as it is).
	faultMarkEnv = "FAULT_MESH_MARK"
)

// chaosTrialsEnv sets the number of runs of each fault test (and of the
// cluster chaos tests); make chaos sets it to 100.
const chaosTrialsEnv = "AGENTMESH_CHAOS_TRIALS"

const (
	faultDefaultTrials = 2
	faultBatch         = 10 // runs in flight in one round
	faultLifetime      = 2 * time.Minute
)

// shortestHeartbeat is (within a second) the shortest work ack wait and
// lease TTL a runner hosting a CLI adapter accepts: above the adapter's
// teardown, proc.MaxTeardown (kill grace, SIGKILL wait, stderr drain). The
// runner's own shutdown drain is set to the same drain below.
var shortestHeartbeat = proc.MaxTeardown(proc.DefaultGrace) + time.Second

// chaosTrials is how many trials a chaos test runs: chaosTrialsEnv's
// number, or short (the version in make test) when it is unset.
func chaosTrials(t *testing.T, short int) int {
	t.Helper()
	v := os.Getenv(chaosTrialsEnv)
	if v == "" {
		return short
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", chaosTrialsEnv, v)
	}
	return n
}

// runFaultRunner is a runner service process: the same run function, on
// the same transports, as the subprocess-runner service.
func runFaultRunner() int {
	return runnerservice.Service{Name: "fault-runner", Transports: runnerservice.Subprocess.Transports}.Main()
}

// faultExec is one line of a run's executions file.
type faultExec struct {
	Pid int `json:"pid"`
	// Overlap counts the processes of earlier executions of the same run
	// (the CLI or its grandchildren) still running when this one started.
	Overlap int `json:"overlap"`
}

// runFaultCLI is the fake CLI. Its prompt (the last argument) is
// "fault <run id> <option>...": it appends an execution line to
// <dir>/<run id>.exec and every pid it and its grandchildren have to
// <dir>/<run id>.pids. On the run's first execution, "hang-before" hangs
// before any output and "hang-after" after the first event; every other
// execution replays the transcript and exits 0. "grandchildren=N" starts N
// sleepers in its process group first; "ignore-term" makes it and them
// ignore SIGTERM, so a teardown takes the whole grace.
func runFaultCLI(dir string) int {
	f := strings.Fields(os.Args[len(os.Args)-1])
	if len(f) < 2 || f[0] != "fault" {
		fmt.Fprintf(os.Stderr, "fake cli: prompt %q is not \"fault <run id> ...\"\n", os.Args[len(os.Args)-1])
		return 2
	}
	id, opts := f[1], f[2:]
	if slices.Contains(opts, "sandboxed") {
		return runSandboxedFaultCLI()
	}
	var hangBefore, hangAfter, ignore bool
	grandchildren := 0
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "hang-before":
			hangBefore = true
		case "hang-after":
			hangAfter = true
		case "ignore-term":
			ignore = true
		case "grandchildren":
			grandchildren, _ = strconv.Atoi(v)
		}
	}
	if ignore {
		signal.Ignore(syscall.SIGTERM)
	}
	base := filepath.Join(dir, id)
	earlier := readPids(base + ".pids")
	overlap := 0
	for _, pid := range earlier {
		if running(pid) {
			overlap++
		}
	}
	prior, _ := os.ReadFile(base + ".exec")
	first := len(prior) == 0
	if err := appendLine(base+".pids", strconv.Itoa(os.Getpid())); err != nil {
		return 3
	}
	line, _ := json.Marshal(faultExec{Pid: os.Getpid(), Overlap: overlap})
	if err := appendLine(base+".exec", string(line)); err != nil {
		return 3
	}
	for range grandchildren {
		pid, err := startSleeper(ignore)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake cli: sleeper:", err)
			return 3
		}
		if err := appendLine(base+".pids", strconv.Itoa(pid)); err != nil {
			return 3
		}
	}
	if first && hangBefore {
		time.Sleep(faultLifetime)
		return 0
	}
	transcript, err := os.ReadFile(os.Getenv(faultTranscriptEnv))
	if err != nil {
		return 3
	}
	if first && hangAfter {
		head, _, _ := strings.Cut(string(transcript), "\n")
		_, _ = os.Stdout.WriteString(head + "\n")
		time.Sleep(faultLifetime)
		return 0
	}
	_, _ = os.Stdout.Write(transcript)
	return 0
}

// runSandboxedFaultCLI is the fake CLI inside the sandbox, where it can
// record nothing the host sees: it starts a grandchild in its process
// group and a daemon in a session of its own, all ignoring SIGTERM, and
// hangs. The host finds them by the mark in their environment.
func runSandboxedFaultCLI() int {
	signal.Ignore(syscall.SIGTERM)
	if _, err := startSleeper(true); err != nil {
		fmt.Fprintln(os.Stderr, "fake cli: sleeper:", err)
		return 3
	}
	if _, err := startDaemon(); err != nil {
		fmt.Fprintln(os.Stderr, "fake cli: daemon:", err)
		return 3
	}
	time.Sleep(faultLifetime)
	return 0
}

// startDaemon starts a sleeper that ignores SIGTERM in a new session,
// outside our process group, and returns once it runs.
func startDaemon() (int, error) {
	return startSleeperWith(true, &syscall.SysProcAttr{Setsid: true})
}

// startSleeper starts a grandchild in our process group and returns once
// it runs.
func startSleeper(ignore bool) (int, error) {
	return startSleeperWith(ignore, nil)
}

func startSleeperWith(ignore bool, attr *syscall.SysProcAttr) (int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	cmd := exec.Command(os.Args[0])
	mode := "sleep"
	if ignore {
		mode = "ignore-term"
	}
	cmd.Env = append(os.Environ(), faultSleeperEnv+"="+mode)
	cmd.SysProcAttr = attr
	cmd.ExtraFiles = []*os.File{w} // fd 3, closed by the sleeper once it runs
	err = cmd.Start()
	w.Close()
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, r)
	return cmd.Process.Pid, nil
}

func runFaultSleeper(mode string) int {
	if mode == "ignore-term" {
		signal.Ignore(syscall.SIGTERM)
	}
	_ = os.NewFile(3, "ready").Close()
	time.Sleep(faultLifetime)
	return 0
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	return errors.Join(err, f.Close())
}

func readPids(path string) []int {
	b, _ := os.ReadFile(path)
	var out []int
	for _, s := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(s); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// running reports whether pid runs: it exists and is not a zombie (an
// orphan under an init that does not reap is dead for our purposes).
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

// faultMesh is one fault test's mesh: a JetStream server, a router and a
// sweeper in this process, and runner processes started on demand.
type faultMesh struct {
	t        *testing.T
	srv      *server.Server
	n        *node
	c        *client.Client
	dir      string // the fake CLI's executions
	profiles string
	state    string // the runners' process-group records
	logs     string
	runners  int
	ackWait  time.Duration
	// sandbox: the runners confine their CLIs (AGENTMESH_SANDBOX=on),
	// which the fake CLI's records cannot cross; its runs use the
	// "sandboxed" option.
	sandbox bool
	// mark is in the environment of every process of this mesh's CLIs
	// (faultMarkEnv), where the host finds them without their records.
	mark string
}

const faultAdapter = claudecode.Name

func newFaultMesh(t *testing.T, ackWait, leaseTTL time.Duration) *faultMesh {
	t.Helper()
	m := &faultMesh{t: t, srv: natstest.RunJetStream(t), dir: t.TempDir(), profiles: t.TempDir(),
		state: filepath.Join(t.TempDir(), "groups"), logs: t.TempDir(), ackWait: ackWait, mark: client.NewRunID()}
	transcript, err := filepath.Abs("../../testdata/cli/claude-code/S1.stdout.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`schema: 1
name: fault
adapter: %s
transport: subprocess
model: claude-sonnet-4-5
pricing: {input: "3", output: "15", cache_read: "0.30", cache_write: "3.75"}
binary: %q
install_hint: the test binary
env:
  %s: %q
  %s: %q
  %s: %q
  GORACE: atexit_sleep_ms=0
policy: {max_attempts: 3, max_active: %d}
`, faultAdapter, os.Args[0], faultDirEnv, m.dir, faultTranscriptEnv, transcript, faultMarkEnv, m.mark, faultBatch)
	if err := os.WriteFile(filepath.Join(m.profiles, "fault.yaml"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	profiles, err := profile.Load(m.profiles)
	if err != nil {
		t.Fatal(err)
	}
	// The router validates requests with its own copy of the adapter; it
	// never runs the CLI.
	a, err := claudecode.New(cli.Config{Binary: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	cfg := mesh.Config{WithoutRunner: true}
	cfg.Topology.LeaseTTL = leaseTTL
	cfg.Sweeper.ReconcileEvery = time.Second
	m.n = startNodeWith(t, m.srv, cfg, profiles, a)
	m.c = newClient(t, m.srv)
	return m
}

// faultRunner is a runner process.
type faultRunner struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

// startRunner starts a runner process and waits until its work consumer
// exists. It is killed when the test ends if the test has not stopped it.
func (m *faultMesh) startRunner() *faultRunner {
	m.t.Helper()
	m.runners++
	mode := "off"
	if m.sandbox {
		mode = "on"
	}
	return startServiceRunner(m.t, fmt.Sprintf("runner-%d", m.runners), m.logs,
		"AGENTMESH_NATS_URL="+m.srv.ClientURL(),
		"AGENTMESH_HTTP_ADDR=127.0.0.1:0",
		"AGENTMESH_LOG_LEVEL=debug",
		"AGENTMESH_PROFILES_DIR="+m.profiles,
		"AGENTMESH_WORKSPACE_ROOT="+m.dir,
		"AGENTMESH_RUNNER_ADAPTERS="+faultAdapter,
		fmt.Sprintf("AGENTMESH_RUNNER_MAX_ACTIVE=%s:%d", faultAdapter, faultBatch),
		"AGENTMESH_RUNNER_ACK_WAIT="+m.ackWait.String(),
		"AGENTMESH_RUNNER_DRAIN_TIMEOUT="+proc.DefaultDrainTimeout.String(),
		"AGENTMESH_RUNNER_STATE_DIR="+m.state,
		// Most of these tests watch the CLI's process tree from the host
		// (its pids, its process group, its records in the workspace
		// root), which the sandbox hides by design; a sandboxed run's
		// runner SIGKILLed is TestFaultSandboxedRunnerKilled.
		"AGENTMESH_SANDBOX="+mode,
	)
}

// startServiceRunner starts the test binary as runner id, a runner service
// process (runFaultRunner) with env added to its environment, logging to
// <logs>/<id>.log, and waits until it is ready: once it has reaped what
// dead runners left and its work consumer exists, it logs "runner
// started" just before it fetches. It is killed when the test ends if the
// test has not stopped it.
func startServiceRunner(t *testing.T, id, logs string, env ...string) *faultRunner {
	t.Helper()
	r := &faultRunner{log: filepath.Join(logs, id+".log"), exited: make(chan struct{})}
	logf, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(os.Args[0])
	r.cmd.Env = append(append(os.Environ(), faultRunnerEnv+"=1", "AGENTMESH_RUNNER_ID="+id, "GORACE=atexit_sleep_ms=0"), env...)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.cmd.Wait(); logf.Close(); close(r.exited) }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.exited
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", id, tail(r.log, 15))
		}
	})
	natstest.Eventually(t, 20*time.Second, func() error {
		select {
		case <-r.exited:
			t.Fatalf("%s exited at start: %s", id, tail(r.log, 20))
		default:
		}
		return grepLog(r, `"msg":"runner started"`)
	})
	return r
}

func grepLog(r *faultRunner, s string) error {
	b, err := os.ReadFile(r.log)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), s) {
		return fmt.Errorf("%s not logged yet", s)
	}
	return nil
}

func tail(path string, lines int) string {
	b, _ := os.ReadFile(path)
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// kill SIGKILLs a runner and waits for it to be reaped.
func (r *faultRunner) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	<-r.exited
}

// stop ends a runner politely and waits for it.
func (r *faultRunner) stop(t *testing.T) {
	t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("runner did not stop on SIGTERM: %s", tail(r.log, 20))
		r.kill(t)
	}
}

// submit submits one run of the fault profile with the fake CLI's options.
func (m *faultMesh) submit(deadline time.Duration, opts ...string) string {
	m.t.Helper()
	id := client.NewRunID()
	req := wire.RunRequest{RunID: id, Tenant: tenant, Principal: "alice", Profile: "fault",
		Request: request(m.t, map[string]any{"prompt": strings.Join(append([]string{"fault", id}, opts...), " ")})}
	req.DeadlineMS = deadline.Milliseconds()
	if _, err := m.c.Submit(context.Background(), req); err != nil {
		m.t.Fatal(err)
	}
	return id
}

func (m *faultMesh) executions(id string) []faultExec {
	b, _ := os.ReadFile(filepath.Join(m.dir, id+".exec"))
	var out []faultExec
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		var e faultExec
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// waitExecuting waits until every run has started its CLI, and with
// committed until every run has passed its first output.
func (m *faultMesh) waitExecuting(ids []string, committed bool) {
	m.t.Helper()
	natstest.Eventually(m.t, 30*time.Second, func() error {
		for _, id := range ids {
			if len(m.executions(id)) == 0 {
				return fmt.Errorf("run %s has not started its CLI", id)
			}
			if committed {
				rec, err := m.c.Status(context.Background(), tenant, id)
				if err != nil {
					return err
				}
				if !rec.Committed {
					return fmt.Errorf("run %s has no output yet", id)
				}
			}
		}
		return nil
	})
}

// outcome is what a case expects of each run.
type outcome struct {
	state      wire.State
	class      wire.Class // of the terminal error; "" for none
	executions int        // of the CLI
}

// counts are a fault test's results.
type counts struct {
	trials, lost, duplicate, stuck, surviving, wrong int
	notes                                            []string
}

func (c *counts) note(format string, args ...any) {
	if len(c.notes) < 20 {
		c.notes = append(c.notes, fmt.Sprintf(format, args...))
	}
}

// settle waits for every run's terminal status (bounded by within), then
// for the work consumer to hold nothing unacknowledged (so that a
// redelivery, had there been one, has been executed or dropped), and
// counts.
func (m *faultMesh) settle(ids []string, want outcome, within time.Duration, c *counts) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	finals := make([]*wire.Status, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			if st, err := m.c.Wait(ctx, tenant, id); err == nil {
				finals[i] = &st
			}
		})
	}
	wg.Wait()
	m.drained(m.ackWait + 5*time.Second)
	for i, id := range ids {
		c.trials++
		st := finals[i]
		switch {
		case st == nil:
			c.lost++
			c.note("run %s: no terminal status within %s", id, within)
		case st.State != want.state || want.class != "" && !errors.Is(st.Error, want.class):
			c.wrong++
			c.note("run %s ended %s (%v), want %s %s", id, st.State, st.Error, want.state, want.class)
		}
		// The record follows the terminal status (the ending protocol:
		// event, record, lease): a run is stuck if its record is still not
		// terminal well after the status.
		if rec, err := m.recordEnds(id, 5*time.Second); err != nil || !rec.State.Terminal() {
			c.stuck++
			c.note("run %s: record %s attempt %d, 5s after its terminal status (%v)", id, rec.State, rec.Attempt, err)
		}
		execs := m.executions(id)
		extra := max(0, len(execs)-want.executions)
		for _, e := range execs {
			extra += e.Overlap
		}
		if extra > 0 {
			c.duplicate += extra
			c.note("run %s: %d executions (want %d): %+v", id, len(execs), want.executions, execs)
		}
	}
}

// recordEnds reads the run's record until it is terminal, for at most
// within, and returns the last one read.
func (m *faultMesh) recordEnds(id string, within time.Duration) (wire.RunRecord, error) {
	deadline := time.Now().Add(within)
	for {
		rec, err := m.c.Status(context.Background(), tenant, id)
		if (err == nil && rec.State.Terminal()) || time.Now().After(deadline) {
			return rec, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// drained waits until the work consumer has nothing pending or
// unacknowledged.
func (m *faultMesh) drained(within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		cons, err := m.n.d.JS.Consumer(context.Background(), m.n.d.Names.WorkStream(), m.n.d.Names.WorkConsumer(faultAdapter))
		if err == nil {
			if info, err := cons.Info(context.Background()); err == nil && info.NumAckPending == 0 && info.NumPending == 0 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// survivors counts the recorded processes of ids still running, allowing
// them a few seconds to go (a runner reaps at start; a SIGKILL takes a
// moment), and kills them so that nothing outlives the test.
func (m *faultMesh) survivors(ids []string, c *counts) {
	var pids []int
	for _, id := range ids {
		pids = append(pids, readPids(filepath.Join(m.dir, id+".pids"))...)
	}
	gone(c, func() []int {
		var live []int
		for _, pid := range pids {
			if running(pid) {
				live = append(live, pid)
			}
		}
		return live
	})
}

// gone waits up to 5 s for live to list no process, then counts those
// it still lists as surviving and kills them.
func gone(c *counts, live func() []int) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := live()
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.surviving += len(pids)
			c.note("still running: %v", pids)
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *counts) report(t *testing.T, name string) {
	t.Helper()
	t.Logf("fault %s: trials=%d lost=%d duplicate=%d stuck=%d surviving=%d wrong=%d",
		name, c.trials, c.lost, c.duplicate, c.stuck, c.surviving, c.wrong)
	if c.lost+c.duplicate+c.stuck+c.surviving+c.wrong > 0 {
		t.Errorf("fault %s: want lost=0 duplicate=0 stuck=0 surviving=0 wrong=0:\n%s", name, strings.Join(c.notes, "\n"))
	}
}

// rounds runs trials runs in rounds of at most faultBatch.
func rounds(t *testing.T, round func(n int)) {
	trials := chaosTrials(t, faultDefaultTrials)
	for done := 0; done < trials && !t.Failed(); done += faultBatch {
		round(min(faultBatch, trials-done))
	}
}

// killRunner runs rounds of runs submitted with deadline and the fault
// adapter's opts to a runner SIGKILLed once each executes (once each has
// output, if output); a runner started then must settle each as want
// within settle, and nothing of them may survive.
func (m *faultMesh) killRunner(t *testing.T, c *counts, deadline time.Duration, opts []string, output bool, want outcome, settle time.Duration) {
	rounds(t, func(n int) {
		first := m.startRunner()
		var ids []string
		for range n {
			ids = append(ids, m.submit(deadline, opts...))
		}
		m.waitExecuting(ids, output)
		first.kill(t)
		second := m.startRunner()
		m.settle(ids, want, settle, c)
		m.survivors(ids, c)
		second.stop(t)
	})
}

// A runner SIGKILLed after it claimed its runs and before their first
// output. With a deadline shorter than the ack wait, the work comes back
// after the deadline: each run ends timed_out without another execution.
// With a longer one, the next runner executes each run once more and it
// succeeds. Either way the killed runner's CLIs are gone.
func TestFaultRunnerKilledBeforeOutput(t *testing.T) {
	cases := []struct {
		name     string
		deadline time.Duration
		want     outcome
	}{
		{"deadline_shorter_than_ack_wait", shortestHeartbeat / 2, outcome{wire.StateTimedOut, wire.DeadlineExceeded, 1}},
		{"deadline_longer_than_ack_wait", 4 * shortestHeartbeat, outcome{wire.StateSucceeded, "", 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newFaultMesh(t, shortestHeartbeat, shortestHeartbeat)
			var c counts
			m.killRunner(t, &c, tc.deadline, []string{"hang-before"}, false, tc.want, tc.deadline+3*shortestHeartbeat+10*time.Second)
			c.report(t, "runner_killed_before_output/"+tc.name)
		})
	}
}

// A runner SIGKILLed after its runs' first output: the sweeper fails each
// once its lease expires, no runner executes it again, and its CLI is gone.
func TestFaultRunnerKilledAfterOutput(t *testing.T) {
	t.Parallel()
	m := newFaultMesh(t, shortestHeartbeat, shortestHeartbeat)
	var c counts
	m.killRunner(t, &c, 0, []string{"hang-after"}, true, outcome{wire.StateFailed, wire.ProviderTransportError, 1}, 3*shortestHeartbeat+10*time.Second)
	c.report(t, "runner_killed_after_output")
}

// A runner SIGKILLed while its CLIs, before output, have grandchildren in
// their process groups that ignore SIGTERM: the kernel kills each CLI with
// the runner, the next runner reaps the grandchildren before it takes
// work, then executes each run once more. No execution overlaps another.
func TestFaultRunnerKilledWithGrandchildren(t *testing.T) {
	t.Parallel()
	m := newFaultMesh(t, shortestHeartbeat, shortestHeartbeat)
	var c counts
	m.killRunner(t, &c, 4*shortestHeartbeat, []string{"hang-before", "grandchildren=2", "ignore-term"}, false, outcome{wire.StateSucceeded, "", 2}, 7*shortestHeartbeat+10*time.Second)
	c.report(t, "runner_killed_with_grandchildren")
}

// marked lists the processes on the host whose environment carries the
// mesh's mark and that run: its CLIs and everything they started, in or
// out of a sandbox.
func (m *faultMesh) marked() []int {
	want := []byte(faultMarkEnv + "=" + m.mark + "\x00")
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(env, want) && running(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// A runner SIGKILLed while its sandboxed CLIs run, each with a grandchild
// and a daemon of its own, all ignoring SIGTERM: every one of them ends
// with the runner, before any other runner starts: the kernel kills the
// sandbox's init with its parent (proc's parent-death signal), and with
// pid 1 gone it kills the rest of the run's pid namespace. A runner
// started then settles each run at its deadline, as the work comes back
// after it.
func TestFaultSandboxedRunnerKilled(t *testing.T) {
	t.Parallel()
	m := newFaultMesh(t, shortestHeartbeat, shortestHeartbeat)
	m.sandbox = true
	var c counts
	rounds(t, func(n int) {
		first := m.startRunner()
		var ids []string
		for range n {
			ids = append(ids, m.submit(shortestHeartbeat/2, "sandboxed"))
		}
		// Each run has its CLI, the grandchild and the daemon.
		natstest.Eventually(t, 30*time.Second, func() error {
			if got := len(m.marked()); got < 3*n {
				return fmt.Errorf("%d processes of %d runs, want %d", got, n, 3*n)
			}
			return nil
		})
		first.kill(t)
		gone(&c, m.marked)
		second := m.startRunner()
		m.settle(ids, outcome{wire.StateTimedOut, wire.DeadlineExceeded, 0}, 3*shortestHeartbeat+10*time.Second, &c)
		second.stop(t)
	})
	c.report(t, "sandboxed_runner_killed")
}

// Cancel before and after the first output, with the shortest ack wait
// and lease TTL the configuration accepts, of CLIs that ignore SIGTERM
// (so the teardown takes the whole grace): each run ends cancelled, its
// CLI is never started again, and nothing of it survives.
func TestFaultCancel(t *testing.T) {
	cases := []struct {
		name   string
		opts   []string
		output bool
	}{
		{"before_output", []string{"hang-before", "grandchildren=1", "ignore-term"}, false},
		{"after_output", []string{"hang-after", "grandchildren=1", "ignore-term"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newFaultMesh(t, shortestHeartbeat, shortestHeartbeat)
			var c counts
			r := m.startRunner()
			rounds(t, func(n int) {
				var ids []string
				for range n {
					ids = append(ids, m.submit(0, tc.opts...))
				}
				m.waitExecuting(ids, tc.output)
				var wg sync.WaitGroup
				errs := make([]error, len(ids))
				for i, id := range ids {
					wg.Go(func() {
						ctx, cancel := context.WithTimeout(context.Background(), 3*shortestHeartbeat)
						defer cancel()
						if _, err := m.c.Cancel(ctx, tenant, id); err != nil {
							errs[i] = fmt.Errorf("cancel %s: %w", id, err)
						}
					})
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						c.note("%v", err) // the run's outcome counts it
					}
				}
				m.settle(ids, outcome{wire.StateCancelled, "", 1}, 3*shortestHeartbeat+10*time.Second, &c)
				m.survivors(ids, &c)
			})
			r.stop(t)
			c.report(t, "cancel_"+tc.name)
		})
	}
}
