//go:build linux

package mesh_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/nats-io/nats.go/jetstream"
)

// startupServices are the service binaries TestChaosStartup starts: the
// router, a runner of the fixture profile, the sweeper, the exporter
// (trajectory export enabled) and the gateway with its console. The
// remote-runner starts as the subprocess-runner does (runnerservice).
var startupServices = []string{"router", "subprocess-runner", "sweeper", "exporter", "gateway"}

// startupProcess is one service binary started by TestChaosStartup.
type startupProcess struct {
	name, log string
	cmd       *exec.Cmd
	exited    chan struct{}
}

// buildStartupServices builds the binaries of startupServices into a
// temporary directory, each named as its directory under services/.
func buildStartupServices(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, s := range startupServices {
		args = append(args, "../../services/"+s)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// startStartupServices starts every binary of startupServices in bin,
// configured only by AGENTMESH_* variables, as deploy/ runs them: the
// cluster's URLs, three replicas, HTTP on a free port. The test's own
// AGENTMESH_* and AGENT_* variables are not passed on. Each is stopped
// (SIGTERM, then SIGKILL) when the test ends if it has not been.
func startStartupServices(t *testing.T, bin, urls, logs string, round int) []*startupProcess {
	t.Helper()
	root := servicetest.RepoRoot()
	var ps []*startupProcess
	for _, name := range startupServices {
		env := map[string]string{
			"AGENTMESH_NATS_URL":         urls,
			"AGENTMESH_REPLICAS":         "3",
			"AGENTMESH_HTTP_ADDR":        "127.0.0.1:0",
			"AGENTMESH_PROFILES_DIR":     filepath.Join(root, "profiles"),
			"AGENTMESH_FIXTURE_DIR":      filepath.Join(root, "testdata", "fixture"),
			"AGENTMESH_LOG_LEVEL":        "info",
			"AGENTMESH_SHUTDOWN_TIMEOUT": "10s",
			exports.EnvEnabled:           "1",
		}
		if name == "gateway" {
			env["AGENTMESH_GATEWAY_ADDR"], env["AGENTMESH_GATEWAY_CONSOLE"] = "127.0.0.1:0", "true"
		}
		if name == "subprocess-runner" {
			env["AGENTMESH_RUNNER_ID"] = fmt.Sprintf("startup-%d", round)
			env["AGENTMESH_WORKSPACE_ROOT"] = t.TempDir()
			env["AGENTMESH_RUNNER_STATE_DIR"] = t.TempDir()
		}
		p := &startupProcess{name: name, log: filepath.Join(logs, fmt.Sprintf("%s-%d.log", name, round)), exited: make(chan struct{})}
		logf, err := os.Create(p.log)
		if err != nil {
			t.Fatal(err)
		}
		p.cmd = exec.Command(filepath.Join(bin, name))
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "AGENTMESH_") && !strings.HasPrefix(kv, "AGENT_") {
				p.cmd.Env = append(p.cmd.Env, kv)
			}
		}
		for k, v := range env {
			p.cmd.Env = append(p.cmd.Env, k+"="+v)
		}
		p.cmd.Stdout, p.cmd.Stderr = logf, logf
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = p.cmd.Wait(); logf.Close(); close(p.exited) }()
		t.Cleanup(func() {
			p.stop(t)
			if t.Failed() {
				t.Logf("%s log (tail):\n%s", p.name, tail(p.log, 20))
			}
		})
		ps = append(ps, p)
	}
	return ps
}

// stop ends the service with SIGTERM, as a deployment does, and waits for
// it; it must exit 0 within 30 s.
func (p *startupProcess) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("%s exited %d on SIGTERM: %s", p.name, code, tail(p.log, 10))
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s did not stop on SIGTERM: %s", p.name, tail(p.log, 10))
	}
}

// logLine is what TestChaosStartup looks for in a service's JSON log:
// a record with this msg (a leading "*" matches any start: "* started"
// is "router started", ...) and, if set, this "for".
type logLine struct{ msg, what string }

func (l logLine) matches(msg, what string) bool {
	suffix, any := strings.CutPrefix(l.msg, "*")
	return (msg == l.msg || any && strings.HasSuffix(msg, suffix)) && (l.what == "" || what == l.what)
}

// count counts the records of the JSON log at path that match l.
func (l logLine) count(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		var rec struct{ Msg, For string }
		if json.Unmarshal([]byte(line), &rec) == nil && l.matches(rec.Msg, rec.For) {
			n++
		}
	}
	return n, nil
}

// awaitLogged waits until every service has logged a record matching
// each of want, failing the test if one exits meanwhile: a service
// waiting for the cluster must not exit.
func awaitLogged(t *testing.T, ps []*startupProcess, within time.Duration, want ...logLine) {
	t.Helper()
	natstest.Eventually(t, within, func() error {
		for _, p := range ps {
			select {
			case <-p.exited:
				t.Fatalf("%s exited (%v) while the cluster was not ready: %s", p.name, p.cmd.ProcessState, tail(p.log, 20))
			default:
			}
			for _, w := range want {
				if n, err := w.count(p.log); err != nil || n == 0 {
					return fmt.Errorf("%s has not logged %+v yet (%v): %s", p.name, w, err, tail(p.log, 3))
				}
			}
		}
		return nil
	})
}

// noFailureLogged checks that no service logged an error: waiting for
// the cluster is logged as waiting, never as a failure.
func noFailureLogged(t *testing.T, ps []*startupProcess) {
	t.Helper()
	for _, p := range ps {
		b, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"level":"ERROR"`) {
				t.Errorf("%s logged an error while it started: %s", p.name, line)
			}
		}
	}
}

// waits says what p waited for and how long, from its "waiting for
// ...: done" records, and the last error it waited through.
func waits(t *testing.T, p *startupProcess) string {
	t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	var done []string
	last := ""
	for _, line := range strings.Split(string(b), "\n") {
		var rec struct{ Msg, For, Waited, Err string }
		if json.Unmarshal([]byte(line), &rec) != nil || !strings.HasPrefix(rec.Msg, "waiting for ") {
			continue
		}
		if strings.HasSuffix(rec.Msg, ": done") {
			what := strings.TrimSuffix(strings.TrimPrefix(rec.Msg, "waiting for "), ": done")
			if rec.For != "" {
				what += " (" + rec.For + ")"
			}
			done = append(done, what+" "+rec.Waited)
		} else {
			last = rec.Err
		}
	}
	return fmt.Sprintf("%s: waited for %s; last error %q", p.name, strings.Join(done, ", "), last)
}

// streamsAnswer polls, with requests of a second, until every stream of
// the default topology answers a stream info request, and returns when
// that was (or, after within, the zero time): when the cluster is ready
// as a client sees it.
func streamsAnswer(js jetstream.JetStream, within time.Duration) time.Time {
	n := subject.Names{}
	streams := []string{n.SubmitAnchorStream(), n.SubmitStream(), n.WorkStream(), n.EventsStream(), "OBJ_" + n.TrajectoryStore(), "OBJ_" + n.ArtifactStore(), "OBJ_" + n.SnapshotStore()}
	for _, b := range []string{n.RunsBucket(), n.SessionsBucket(), n.CheckpointsBucket(), n.LeasesBucket(), n.ConsentBucket(), n.ExportsBucket(), n.RedactionBucket(), n.APIKeysBucket(), n.TurnsBucket(), n.SpendBucket(), n.LedgerBucket(), n.LimitsBucket(), n.ArtifactsBucket(), n.HeadsBucket(), n.ConversationsBucket()} {
		streams = append(streams, "KV_"+b)
	}
	for deadline := time.Now().Add(within); time.Now().Before(deadline); {
		ok := true
		for _, name := range streams {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := js.Stream(ctx, name)
			cancel()
			if err != nil {
				ok = false
				time.Sleep(100 * time.Millisecond)
				break
			}
		}
		if ok {
			return time.Now()
		}
	}
	return time.Time{}
}

// TestChaosStartup starts every service binary (startupServices), each
// configured only by its AGENTMESH_* variables, on a 3-node JetStream
// cluster that is not there yet (issue 38, acceptance 6): with no server
// running, each waits for one;
// with one node of three, which cannot elect a meta leader, each waits
// for JetStream; once the other two have joined, each comes up, without
// being restarted, and a run submitted through them succeeds. Then every
// node is SIGKILLed and restarted, the services are started again at
// once, and again each waits until the cluster has recovered and a run
// succeeds. Every wait is logged as waiting, none as an error, and no
// service exits. AGENTMESH_CHAOS_TRIALS repeats it on a new cluster.
func TestChaosStartup(t *testing.T) {
	trials := chaosTrials(t, 1)
	bin := buildStartupServices(t)
	logs := t.TempDir()
	for trial := range trials {
		c := natstest.NewCluster(t, 3)

		// Cold start: the services first, then one node, then the rest.
		start := time.Now()
		ps := startStartupServices(t, bin, c.URLs(), logs, 2*trial)
		awaitLogged(t, ps, 30*time.Second, logLine{msg: "waiting for the NATS server"})
		c.Restart(0)
		awaitLogged(t, ps, 60*time.Second, logLine{msg: "waiting for the NATS server: done"}, logLine{msg: "waiting for JetStream", what: "topology"})
		formed := time.Now()
		c.Restart(1)
		c.Restart(2)
		all := time.Now()
		awaitLogged(t, ps, 90*time.Second, logLine{msg: "waiting for JetStream: done", what: "topology"}, logLine{msg: "* started"})
		up := time.Now()
		nc, js := natstest.ConnectURL(t, c.URLs())
		meshtest.Complete(t, nc, "submitted through services that waited for the cluster")
		noFailureLogged(t, ps)
		t.Logf("startup cold trial %d: one node started %s after the services, the other two %s later; services up %s after the last node started; run succeeded %s later",
			trial, formed.Sub(start).Round(time.Millisecond), all.Sub(formed).Round(time.Millisecond), up.Sub(all).Round(time.Millisecond),
			time.Since(up).Round(time.Millisecond))
		for _, p := range ps {
			t.Log(waits(t, p))
		}
		for _, p := range ps {
			p.stop(t)
		}

		// A full restart: every node killed and restarted, the services
		// started at once.
		for i := range c.Len() {
			c.Kill(i)
		}
		restart := time.Now()
		for i := range c.Len() {
			c.Restart(i)
		}
		restarted := time.Now()
		answered := make(chan time.Time, 1)
		go func() { answered <- streamsAnswer(js, 90*time.Second) }()
		ps = startStartupServices(t, bin, c.URLs(), logs, 2*trial+1)
		awaitLogged(t, ps, 90*time.Second, logLine{msg: "* started"})
		up = time.Now()
		ready := <-answered
		meshtest.Complete(t, nc, "submitted right after a full cluster restart")
		noFailureLogged(t, ps)
		t.Logf("startup restart trial %d: nodes restarted in %s; every stream answered a client %s after that, the services were up %s after that; run succeeded %s later",
			trial, restarted.Sub(restart).Round(time.Millisecond), ready.Sub(restarted).Round(time.Millisecond), up.Sub(restarted).Round(time.Millisecond), time.Since(up).Round(time.Millisecond))
		for _, p := range ps {
			t.Log(waits(t, p))
		}
		for _, p := range ps {
			p.stop(t)
		}
		nc.Close()
		for i := range c.Len() {
			c.Kill(i)
		}
	}
}
