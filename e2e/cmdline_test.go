//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/fakemodel"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestCLICommandLine is the operator's path (issue 3, acceptance 5):
// `agentmesh up` with the repository's profiles/ and a runner environment
// that points each CLI at the fake model API, then `agentmesh run -p
// <profile> "…"` for each of the four CLIs from the command line.
func TestCLICommandLine(t *testing.T) {
	for _, c := range clis {
		if _, err := exec.LookPath(c.binary); err != nil {
			t.Fatalf("%s not on PATH (%s); `make e2e-cli` installs it", c.binary, c.hint)
		}
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	bin := buildAgentmesh(t, repo, root)

	fake := fakemodel.New(fakemodel.Auto)
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })

	// One runner environment for all four CLIs, as an operator would set
	// it: one HOME holding every CLI's configuration, and the variables
	// the profiles' env_allow lists.
	tag := fmt.Sprintf("cmdline-%d-%d", os.Getpid(), time.Now().UnixNano())
	e := cliEnv{
		home: mkdir(t, root, "home"), tmp: mkdir(t, root, "tmp"), workRoot: mkdir(t, root, "work"),
		fakeURL: fake.URL(), tag: tag + "/up",
		codexKeyVar: "OPENAI_API_KEY", // the key variable profiles/codex.yaml allows
	}
	// Every CLI runs confined, as a subprocess runner confines it.
	env := merge(e.base(), map[string]string{"PATH": os.Getenv("PATH"), "AGENTMESH_SANDBOX": "on"})
	for _, c := range clis {
		env = merge(env, c.configure(t, e))
	}
	t.Cleanup(func() { checkReaped(t, tag+"/") })

	upLog, stop := startUp(t, bin, env,
		"--listen", "127.0.0.1:0", "--http", "", "--gateway", "",
		"--data-dir", filepath.Join(root, "data"),
		"--profiles-dir", filepath.Join(repo, "profiles"),
		"--fixture-dir", filepath.Join(repo, "testdata", "fixture"),
		"--workspace-root", e.workRoot)
	natsURL := upNATS(t, upLog)
	waitForRouter(t, natsURL, upLog)

	for _, c := range clis {
		t.Run(c.name, func(t *testing.T) {
			p := fmt.Sprintf("What is the answer? (e2e command line %s %d)", c.name, time.Now().UnixNano())
			ctx, cancel := context.WithTimeout(context.Background(), runWait)
			defer cancel()
			run := exec.CommandContext(ctx, bin, "run", "-p", c.name, "--deadline", runDeadline.String(), p)
			run.Env = environ(map[string]string{"PATH": os.Getenv("PATH"), "HOME": e.home, "AGENTMESH_NATS_URL": natsURL})
			out, err := run.CombinedOutput()
			t.Logf("agentmesh run -p %s %q:\n%s", c.name, p, out)
			if err != nil {
				t.Fatalf("agentmesh run -p %s: %v\nfake saw:\n%s", c.name, err, describeRequestsFor(fake, p))
			}
			if !strings.Contains(string(out), "42") {
				t.Fatalf("the output lacks the fake's answer %q", fakemodel.AnswerText)
			}
		})
	}
	stop()
	if t.Failed() {
		t.Logf("agentmesh up log:\n%s", upLog.String())
	}
}

// buildAgentmesh builds ./cmd/agentmesh of the repository at repo into dir
// and returns the binary's path.
func buildAgentmesh(t *testing.T, repo, dir string) string {
	t.Helper()
	return goBuild(t, repo, dir, "./cmd/agentmesh")
}

// goBuild builds the command pkg (./cmd/agentmesh, ./services/router, ...)
// of the repository at repo into dir, with $GO if set, and returns the
// binary's path.
func goBuild(t *testing.T, repo, dir, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, filepath.Base(pkg))
	gobin := os.Getenv("GO")
	if gobin == "" {
		gobin = "go"
	}
	build := exec.Command(gobin, "build", "-o", bin, pkg)
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// startUp starts `bin up args...` in its own process group with an
// environment made only of env, and returns its combined output and a
// stop function, also registered as a cleanup: stop sends SIGTERM and
// fails the test if up exits with an error or is still running 60s later
// (then its whole process group is killed).
func startUp(t *testing.T, bin string, env map[string]string, args ...string) (*servicetest.Buffer, func()) {
	t.Helper()
	up := exec.Command(bin, append([]string{"up"}, args...)...)
	up.Env = environ(env)
	upLog := &servicetest.Buffer{}
	up.Stdout, up.Stderr = upLog, upLog
	up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = up.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- up.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agentmesh up: %v\n%s", err, upLog.String())
			}
		case <-time.After(60 * time.Second):
			_ = syscall.Kill(-up.Process.Pid, syscall.SIGKILL)
			<-done
			t.Errorf("agentmesh up did not stop within 60s of SIGTERM\n%s", upLog.String())
		}
	}
	t.Cleanup(stop)
	return upLog, stop
}

// waitForRouter waits until the mesh that `agentmesh up` runs has its
// submit consumer, i.e. a submitted run will be routed.
func waitForRouter(t *testing.T, url string, upLog *servicetest.Buffer) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if last = routerReady(url); last == nil {
			return
		}
		time.Sleep(100 * time.Millisecond) // polling another process; nothing to wait on
	}
	t.Fatalf("agentmesh up not ready within 60s: %v\n%s", last, upLog.String())
}

func routerReady(url string) error {
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var names subject.Names
	_, err = js.Consumer(ctx, names.SubmitStream(), names.RouterConsumer())
	return err
}

// upNATS waits for `agentmesh up --listen 127.0.0.1:0` to log the NATS URL
// its server took, and returns it.
func upNATS(t *testing.T, upLog *servicetest.Buffer) string {
	t.Helper()
	var url string
	natstest.Eventually(t, 60*time.Second, func() error {
		n := upNATSLine.FindStringSubmatch(upLog.String())
		if n == nil {
			return fmt.Errorf("agentmesh up has not logged its NATS URL yet:\n%s", upLog.String())
		}
		url = n[1]
		return nil
	})
	return url
}

// environ is a child environment made only of vars.
func environ(vars map[string]string) []string {
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

func describeRequestsFor(f *fakemodel.Server, p string) string {
	return describeRequests(requestsHolding(f, p))
}
