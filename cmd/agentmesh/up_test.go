package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// testMesh is `agentmesh up` running in the test.
type testMesh struct {
	url            string
	stdout, stderr *servicetest.Buffer
}

// startUp runs up on a random port with a fresh data dir until the test
// ends, and fails the test unless up then returns nil promptly.
func startUp(t *testing.T, demo bool) *testMesh {
	t.Helper()
	return startUpWith(t, "../../profiles", demo)
}

// startUpWith is startUp with the profiles of dir.
func startUpWith(t *testing.T, profiles string, demo bool) *testMesh {
	t.Helper()
	return startUpOptions(t, upOptions{listen: "127.0.0.1:0", dataDir: t.TempDir(), http: "127.0.0.1:0", fixtureDir: "../../testdata/fixture", profiles: profiles, workspace: t.TempDir(), demo: demo})
}

// startUpOptions is startUp with the options o.
func startUpOptions(t *testing.T, o upOptions) *testMesh {
	t.Helper()
	m, _ := startUpStop(t, o)
	return m
}

// startUpStop starts up with the options o and returns the mesh and a
// function that stops it (once; the test's cleanup calls it too),
// failing the test unless up then returns nil promptly.
func startUpStop(t *testing.T, o upOptions) (*testMesh, func()) {
	t.Helper()
	io, out, errOut := testIO(nil)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- up(ctx, o, io, func(url string) { ready <- url }) }()
	stop := sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("up returned %v; stderr:\n%s", err, errOut)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("up did not return within 30s of its context ending; stderr:\n%s", errOut)
		}
	})
	t.Cleanup(stop)
	select {
	case url := <-ready:
		return &testMesh{url: url, stdout: out, stderr: errOut}, stop
	case err := <-done:
		done <- err // for stop
		t.Fatalf("up returned before ready: %v; stderr:\n%s", err, errOut)
	case <-time.After(30 * time.Second):
		t.Fatalf("up not ready within 30s; stderr:\n%s", errOut)
	}
	return nil, nil
}

// cli runs an agentmesh client command against the mesh.
func (m *testMesh) cli(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	io, out, errOut := testIO(nil)
	n := 1 // the flags go after the command, and its subcommand if it has one
	switch args[0] {
	case "consent", "redaction", "exports", "runs", "keys", "artifacts", "workspace":
		n = 2
	case "budget", "quota":
		n = 2
	}
	code = run(ctx, append(append(slices.Clone(args[:n]), "--server", m.url), args[n:]...), io)
	return code, out.String(), errOut.String()
}

// must runs the agentmesh command args against m, fails the test unless it
// exits want, and returns its stdout.
func (m *testMesh) must(t *testing.T, ctx context.Context, want int, args ...string) string {
	t.Helper()
	code, out, errOut := m.cli(ctx, args...)
	if code != want {
		t.Fatalf("agentmesh %s: exit %d, want %d; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out
}

var (
	acceptedLine = regexp.MustCompile(`(?m)^\[accepted run ([A-Za-z0-9_-]+)\]$`)
	attemptNum   = regexp.MustCompile(`\[running attempt \d+\]`)
	duration     = regexp.MustCompile(` chunks, [0-9.]+[a-zµ]+`)
)

// normalize replaces what varies between runs in the human output: the run
// id, the attempt number and the duration.
func normalize(out, runID string) string {
	out = strings.ReplaceAll(out, runID, "ID")
	out = attemptNum.ReplaceAllString(out, "[running attempt N]")
	return duration.ReplaceAllString(out, " chunks")
}

func TestUpDemo(t *testing.T) {
	m := startUp(t, true)
	natstest.Eventually(t, 20*time.Second, func() error {
		if !strings.Contains(m.stdout.String(), "[succeeded") {
			return fmt.Errorf("no demo run output yet:\n%s", m.stdout)
		}
		return nil
	})
	for _, want := range []string{"[routed fixture/fixture-1]", "echo: hello from agentmesh", `→ tool echo {"text":"hello from agentmesh"}`} {
		if !strings.Contains(m.stdout.String(), want) {
			t.Errorf("demo output has no %q:\n%s", want, m.stdout)
		}
	}
	for _, want := range []string{"registry_version=", "nats=" + m.url} {
		if !strings.Contains(m.stderr.String(), want) {
			t.Errorf("up logs have no %q:\n%s", want, m.stderr)
		}
	}
	addr := regexp.MustCompile(`msg="http listening" addr=(\S+)`).FindStringSubmatch(m.stderr.String())
	if addr == nil {
		t.Fatalf("up logs have no http address:\n%s", m.stderr)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		resp, err := http.Get("http://" + addr[1] + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /readyz: %s", resp.Status)
		}
		return nil
	})
}

// TestUpSyncPolicy reads back the sync policy of up's embedded server, as
// the server itself reports it: always by default, and the interval
// --sync names.
func TestUpSyncPolicy(t *testing.T) {
	for flag, want := range map[string]string{"": "sync=always", "1s": "sync=1s"} {
		o := upOptions{listen: "127.0.0.1:0", dataDir: t.TempDir(), http: "", fixtureDir: "../../testdata/fixture", profiles: "../../profiles", workspace: t.TempDir(), sync: flag}
		m, stop := startUpStop(t, o)
		if !regexp.MustCompile(`msg="agentmesh up" .*` + want + ` `).MatchString(m.stderr.String()) {
			t.Errorf("--sync %q: up's start line has no %s:\n%s", flag, want, m.stderr)
		}
		stop()
	}
}

func TestUpRunStatusCancel(t *testing.T) {
	m := startUp(t, false)
	ctx := context.Background()

	t.Run("run", func(t *testing.T) {
		code, out, errOut := m.cli(ctx, "run", "-p", "fixture", "hi")
		if code != exitOK {
			t.Fatalf("exit code %d; stdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		id := acceptedLine.FindStringSubmatch(out)
		if id == nil {
			t.Fatalf("no accepted line:\n%s", out)
		}
		want := `[accepted run ID]
[routed fixture/fixture-1]
[running attempt N]
[system provider=fixture model=fixture-1 provider_session=fx-ID]
thinking: The prompt has 2 bytes; echo it.
echo: hi
→ tool echo {"text":"hi"}
← tool result "hi"
[result usage in=1 out=2 cost=0 stop=end_turn]
[succeeded · 6 chunks, usage in=1 out=2, cost 0]
`
		if got := normalize(out, id[1]); got != want {
			t.Errorf("stdout:\n%s\nwant (normalized):\n%s", got, want)
		}

		code, out, _ = m.cli(ctx, "status", id[1])
		if code != exitOK || !regexp.MustCompile(`(?m)^state\s+succeeded$`).MatchString(out) || !strings.Contains(out, "fixture/fixture-1") {
			t.Errorf("status: exit %d, stdout:\n%s", code, out)
		}
		code, out, _ = m.cli(ctx, "status", "--json", id[1])
		var rec wire.RunRecord
		if err := json.Unmarshal([]byte(out), &rec); err != nil || code != exitOK {
			t.Fatalf("status --json: exit %d, %v:\n%s", code, err, out)
		}
		if rec.RunID != id[1] || rec.State != wire.StateSucceeded || rec.Pin == nil || rec.Pin.Provider != "fixture" {
			t.Errorf("status --json = %+v", rec)
		}
		code, out, _ = m.cli(ctx, "cancel", id[1])
		if want := fmt.Sprintf("run %s had already ended: succeeded\n", id[1]); code != exitOK || out != want {
			t.Errorf("cancel of an ended run: exit %d, stdout %q; want 0, %q", code, out, want)
		}
	})

	t.Run("json", func(t *testing.T) {
		code, out, errOut := m.cli(ctx, "run", "-p", "fixture", "--script", "hello", "--json", "hi")
		if code != exitOK {
			t.Fatalf("exit code %d; stderr:\n%s", code, errOut)
		}
		var text strings.Builder
		var last wire.Event
		for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var ev wire.Event
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("line %d: %v: %s", i+1, err, line)
			}
			if ev.Seq != uint64(i+1) {
				t.Errorf("line %d has seq %d", i+1, ev.Seq)
			}
			if ev.Chunk != nil && ev.Chunk.Type == wire.ChunkText {
				text.WriteString(ev.Chunk.Content)
			}
			last = ev
		}
		if text.String() != "Hello, world!" || !last.Terminal() || last.Status.State != wire.StateSucceeded {
			t.Errorf("text %q, last event %+v; want Hello, world! and succeeded", text.String(), last)
		}
	})

	t.Run("failed and rejected runs exit 1", func(t *testing.T) {
		code, out, _ := m.cli(ctx, "run", "-p", "fixture", "--script", "provider-error", "hi")
		if code != exitFail || !strings.Contains(out, "Working on it\n[error ProviderQuotaError] quota exceeded for this key; retry later\n[failed ") {
			t.Errorf("provider error: exit %d, stdout:\n%s", code, out)
		}
		code, out, _ = m.cli(ctx, "run", "-p", "no-such-profile", "hi")
		if code != exitFail || !strings.Contains(out, `[rejected ProfileError: unknown profile: "no-such-profile"]`) {
			t.Errorf("unknown profile: exit %d, stdout:\n%s", code, out)
		}
		code, out, _ = m.cli(ctx, "run", "-p", "fixture", "--script", "slow", "--delay-ms", "100", "--deadline", "400ms", "hi")
		if code != exitFail || !strings.Contains(out, "[timed_out") {
			t.Errorf("deadline: exit %d, stdout:\n%s", code, out)
		}
		code, _, errOut := m.cli(ctx, "status", "never-submitted")
		if code != exitFail || !strings.Contains(errOut, "not found") {
			t.Errorf("status of an unknown run: exit %d, stderr %q", code, errOut)
		}
	})

	t.Run("cancel a running run", func(t *testing.T) {
		out, errOut, done := m.runSlow(ctx, t, "tick 1", "--delay-ms", "200", "--run-id", "slow-1", "hi")
		code, cout, cerr := m.cli(ctx, "cancel", "slow-1")
		if code != exitOK || cout != "cancelled run slow-1\n" {
			t.Errorf("cancel: exit %d, stdout %q, stderr %q", code, cout, cerr)
		}
		if code := <-done; code != exitFail || !strings.Contains(out.String(), "\n[cancelled") || strings.Contains(out.String(), "tick 20") {
			t.Errorf("run: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	})

	t.Run("interrupt cancels the run", func(t *testing.T) {
		runCtx, interrupt := context.WithCancel(ctx)
		defer interrupt()
		out, errOut, done := m.runSlow(runCtx, t, "tick 1", "--delay-ms", "200", "hi")
		interrupt()
		// Ctrl-C's exit code, as docs/getting-started.md says, also
		// when the cancel it sent ended the run (it was 1).
		if code := <-done; code != exitInterrupted || !strings.Contains(out.String(), "\n[cancelled") {
			t.Errorf("run: exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, exitInterrupted, out, errOut)
		}
		if !strings.Contains(errOut.String(), "interrupted: cancelling run") {
			t.Errorf("stderr = %q, want the interruption reported", errOut)
		}
	})
}

// TestUpLeavesAdaptersToOtherRunners: with --runner-adapters none, up
// runs no runner of its own, so a fixture run stays routed until a runner
// of the mesh's (here an in-process one, as subprocess-runner would be)
// joins, and then succeeds. An unknown adapter there is a usage error
// naming it.
func TestUpLeavesAdaptersToOtherRunners(t *testing.T) {
	m := startUpOptions(t, upOptions{listen: "127.0.0.1:0", dataDir: t.TempDir(), fixtureDir: "../../testdata/fixture",
		profiles: "../../profiles", workspace: t.TempDir(), runnerAdapters: []string{}})
	nc, _ := natstest.ConnectURL(t, m.url)
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := wire.Marshal(map[string]any{"prompt": "for another runner"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Submit(ctx, wire.RunRequest{Tenant: "default", Principal: "test", Profile: "fixture", Request: req})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		rec, err := c.Status(ctx, "default", id)
		if err != nil || rec.State != wire.StateRouted {
			return fmt.Errorf("run %s: %s, %v; want routed", id, rec.State, err)
		}
		return nil
	})
	// No runner of up's takes it.
	time.Sleep(500 * time.Millisecond) // giving a runner that should not exist the chance to act
	if rec, err := c.Status(ctx, "default", id); err != nil || rec.State != wire.StateRouted {
		t.Fatalf("run %s: %s, %v; want still routed, with no runner in up", id, rec.State, err)
	}
	meshtest.Start(t, m.url, mesh.Config{WithoutRouter: true, WithoutSweeper: true, WithoutExporter: true})
	st, err := c.Wait(ctx, "default", id)
	if err != nil || st.State != wire.StateSucceeded {
		t.Fatalf("run %s ended %+v, %v; want succeeded on the runner that joined", id, st, err)
	}

	io, _, errOut := testIO(nil)
	err = up(context.Background(), upOptions{listen: "127.0.0.1:0", dataDir: t.TempDir(), fixtureDir: "../../testdata/fixture",
		profiles: "../../profiles", workspace: t.TempDir(), runnerAdapters: []string{"no-such-adapter"}}, io, nil)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), `--runner-adapters: unknown adapter "no-such-adapter"`) {
		t.Fatalf("up --runner-adapters no-such-adapter = %v; want a usage error naming it\n%s", err, errOut)
	}
}
