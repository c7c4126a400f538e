package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
)

// acpFakeEnv makes this test binary the fake ACP agent (TestMain).
const acpFakeEnv = "AGENTMESH_TEST_ACP_FAKE"

// acpProfiles writes a profiles dir holding one profile of adapter acp
// whose agent is this test binary as the fake agent, with the shortest
// idle timeout the profile accepts. The agent keeps its sessions in a
// directory that is also its CLAUDE_CONFIG_DIR, so that a sandboxed run
// gets it read-write.
func acpProfiles(t *testing.T) string {
	t.Helper()
	return acpProfilesWith(t, "{permission_timeout: 20s, idle_timeout: 1s}")
}

// acpProfilesWith is acpProfiles with the profile's session settings.
func acpProfilesWith(t *testing.T, session string) string {
	t.Helper()
	dir := t.TempDir()
	doc := fmt.Sprintf(`schema: 1
name: acp-fake
adapter: acp
transport: subprocess
capabilities: {resumable: false, emits_tool_events: true, reports_usage: true}
model: fake
pricing: {input: "1", output: "2", cache_read: "0", cache_write: "0", reasoning: "2"}
binary: %s
install_hint: the test binary
env: {%s: "1", GORACE: "atexit_sleep_ms=0", ACPFAKE_STATE: %q, CLAUDE_CONFIG_DIR: %[3]q}
session: %s
policy: {max_attempts: 1, max_active: 2}
`, os.Args[0], acpFakeEnv, t.TempDir(), session)
	if err := os.WriteFile(filepath.Join(dir, "acp-fake.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A session driven from the command line: agentmesh run shows the
// permission request and how to answer it, agentmesh approve and deny
// answer it, agentmesh send queues the next turn, and a follow-up to the
// ended session exits 1 naming SessionEnded.
func TestSessionFromTheCommandLine(t *testing.T) {
	m := startUpWith(t, acpProfiles(t), false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	io, out, errOut := testIO(nil)
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"run", "--server", m.url, "-p", "acp-fake", "clean up [permission]"}, io)
	}()
	wait := func(s string) {
		t.Helper()
		natstest.Eventually(t, 20*time.Second, func() error {
			if !strings.Contains(out.String(), s) {
				return fmt.Errorf("no %q yet:\n%s\nstderr:\n%s", s, out, errOut)
			}
			return nil
		})
	}
	wait("[permission requested perm-1]")
	id := acceptedLine.FindStringSubmatch(out.String())
	if id == nil {
		t.Fatalf("no accepted line:\n%s", out)
	}
	if got := m.must(t, ctx, exitOK, "approve", id[1], "perm-1"); !strings.Contains(got, "answered allow") {
		t.Errorf("approve: %s", got)
	}
	wait("[turn end")
	if got := m.must(t, ctx, exitOK, "send", id[1], "again [permission]"); !strings.Contains(got, "queued as turn 2") {
		t.Errorf("send: %s", got)
	}
	wait("[permission requested perm-2]")
	if got := m.must(t, ctx, exitOK, "deny", id[1], "perm-2"); !strings.Contains(got, "answered reject") {
		t.Errorf("deny: %s", got)
	}
	select {
	case c := <-code:
		if c != exitOK {
			t.Fatalf("run exited %d:\n%s\nstderr:\n%s", c, out, errOut)
		}
	case <-ctx.Done():
		t.Fatalf("the session did not end at its idle timeout:\n%s", out)
	}
	for _, want := range []string{"I ran the command.", "[turn 2] again [permission]", "I was not allowed to run it.", "[succeeded"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("run output lacks %q:\n%s", want, out)
		}
	}
	if c, _, stderr := m.cli(ctx, "send", id[1], "too late"); c != exitFail || !strings.Contains(stderr, "SessionEnded") {
		t.Errorf("send to the ended session: exit %d, stderr %q", c, stderr)
	}
	if c, _, _ := m.cli(ctx, "approve", id[1]); c != exitUsage {
		t.Errorf("approve without a request id: exit %d", c)
	}
}

// A session on a conversation is suspended once idle for its grace (its
// run ends succeeded); agentmesh send to it then starts the run that
// resumes it on its conversation, which loads the agent's session: its
// reply is turn 2's.
func TestSendResumesASuspendedSession(t *testing.T) {
	m := startUpWith(t, acpProfilesWith(t, "{suspend_after: 1s, idle_timeout: 1m}"), false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := m.must(t, ctx, exitOK, "run", "-p", "acp-fake", "--conversation", "conv-cli", "first")
	id := acceptedLine.FindStringSubmatch(out)
	if id == nil || !strings.Contains(out, "echo: first (turn 1)") || !strings.Contains(out, "[succeeded") {
		t.Fatalf("run:\n%s", out)
	}
	got := m.must(t, ctx, exitOK, "send", id[1], "second")
	resumed := regexp.MustCompile(`resumed as run ([A-Za-z0-9_-]+) on its conversation`).FindStringSubmatch(got)
	if resumed == nil || !strings.Contains(got, "is not live") {
		t.Fatalf("send to the suspended session:\n%s", got)
	}
	if got := m.must(t, ctx, exitOK, "follow", resumed[1]); !strings.Contains(got, "echo: second (turn 2)") {
		t.Errorf("the resumed session's run, want its turn 2:\n%s", got)
	}
	// A session not on a conversation is not suspended (it ends at its
	// deadline here), nor resumed.
	_, out, _ = m.cli(ctx, "run", "-p", "acp-fake", "--deadline", "3s", "first")
	if id = acceptedLine.FindStringSubmatch(out); id == nil || !strings.Contains(out, "[timed_out") {
		t.Fatalf("run:\n%s", out)
	}
	if c, _, stderr := m.cli(ctx, "send", id[1], "too late"); c != exitFail || !strings.Contains(stderr, "SessionEnded") {
		t.Errorf("send to an ended session without a conversation: exit %d, stderr %q", c, stderr)
	}
}
