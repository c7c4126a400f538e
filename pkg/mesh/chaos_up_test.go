//go:build linux

package mesh_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// upProcess is an agentmesh up binary serving a data directory on a fixed
// loopback port, so that a client reconnects to it after a restart.
type upProcess struct {
	bin, dir, port, logs string
	args                 []string
	n                    int // starts so far
	cmd                  *exec.Cmd
	exited               chan struct{}
}

// buildAgentmesh builds ./cmd/agentmesh into a temporary directory.
func buildAgentmesh(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agentmesh")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/agentmesh")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/agentmesh: %v\n%s", err, out)
	}
	return bin
}

// freePort is a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// start starts up and waits until it has logged that it runs. It is
// SIGKILLed when the test ends if the test has not stopped it.
func (u *upProcess) start(t *testing.T) {
	t.Helper()
	u.n++
	logPath := filepath.Join(u.logs, fmt.Sprintf("up-%d.log", u.n))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	u.cmd = exec.Command(u.bin, append([]string{"up", "--listen", "127.0.0.1:" + u.port, "--data-dir", u.dir}, u.args...)...)
	// Its environment without the test's AGENTMESH_* variables, but for
	// the short lease this test sets.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTMESH_") {
			u.cmd.Env = append(u.cmd.Env, kv)
		}
	}
	u.cmd.Env = append(u.cmd.Env, "AGENTMESH_LEASE_TTL=5s", "AGENTMESH_SWEEPER_RECONCILE_EVERY=1s", "AGENTMESH_LOG_LEVEL=info")
	u.cmd.Stdout, u.cmd.Stderr = logf, logf
	u.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	cmd := u.cmd
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	u.exited = exited
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s (tail):\n%s", filepath.Base(logPath), tail(logPath, 15))
		}
	})
	natstest.Eventually(t, time.Minute, func() error {
		select {
		case <-exited:
			t.Fatalf("up exited at start: %s", tail(logPath, 20))
		default:
		}
		b, _ := os.ReadFile(logPath)
		if !strings.Contains(string(b), `msg="agentmesh up"`) {
			return errors.New("up has not started yet")
		}
		return nil
	})
}

// kill SIGKILLs up and waits until it is gone.
func (u *upProcess) kill(t *testing.T) {
	t.Helper()
	if err := u.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	<-u.exited
}

// TestChaosUpKilled SIGKILLs agentmesh up (the binary built from
// ./cmd/agentmesh: one embedded server, fsyncing every write by default,
// and every service) while runs of three tenants are going and consent
// changes, and starts it again on the same data directory and port. Every
// run acknowledged must end once, with all its events and a record that
// agrees; only runs that had output when up died may fail (their runner
// died with it), as the sweeper or the restarted runner ends them. Every
// spend entry and consent change acknowledged must be there. It runs only
// in make chaos.
func TestChaosUpKilled(t *testing.T) {
	trials := chaosOnly(t)
	fixtures, err := filepath.Abs("../../testdata/fixture")
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := filepath.Abs("../../profiles")
	if err != nil {
		t.Fatal(err)
	}
	u := &upProcess{bin: buildAgentmesh(t), dir: filepath.Join(t.TempDir(), "data"), port: freePort(t), logs: t.TempDir(),
		args: []string{"--http", "", "--gateway", "", "--fixture-dir", fixtures, "--profiles-dir", profiles,
			"--runner-adapters", "fixture", "--workspace-root", t.TempDir()}}
	u.start(t)
	nc, err := nats.Connect("nats://127.0.0.1:"+u.port, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	grants, err := consent.Open(context.Background(), js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		kills []time.Time
	)
	// A run acknowledged before a kill, failed with its output cut off:
	// its runner died with up.
	justified := func(r *chaosRun, st wire.Status, committed bool) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range kills {
			if r.acked.Before(k) && committed && st.State == wire.StateFailed && errors.Is(st.Error, wire.ProviderTransportError) {
				return true
			}
		}
		return false
	}
	var counts chaosCounts
	for trial := range trials {
		h := &chaosHistory{}
		l := h.startChaosLoad(t, c, grants, fmt.Sprintf("u%d", trial), chaosInFlight, chaosDelayMS)
		if err := l.waitFinished(chaosInFlight, 2*time.Minute); err != nil {
			l.stop()
			t.Fatal(err)
		}
		mu.Lock()
		kills = append(kills, time.Now())
		mu.Unlock()
		u.kill(t)
		killed := time.Now()
		u.start(t)
		t.Logf("trial %d: killed up with %d runs ended; up again after %s", trial, l.finished.Load(), time.Since(killed).Round(10*time.Millisecond))
		err := l.waitFinished(l.finished.Load()+chaosInFlight, 3*time.Minute)
		l.stop()
		if err != nil {
			t.Fatal(err)
		}
		before, checked := counts, time.Now()
		h.check(t, c, js, 2*time.Minute, justified, &counts)
		t.Logf("trial %d: %d runs, %d ok, %d failed with their runner, checked in %s; unavailable %.1fs so far", trial, counts.runs-before.runs,
			counts.ok-before.ok, counts.justified-before.justified, time.Since(checked).Round(100*time.Millisecond), counts.unavailable.Seconds())
		if counts.bad() > before.bad() {
			break
		}
	}
	counts.report(t, "up killed")
}
