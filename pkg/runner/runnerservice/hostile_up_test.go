package runnerservice_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// upAgentEnv turns the test binary into the agent that tries to exhaust
// the host, its value an upAgentSpec (JSON, then base64); hogEnv into the
// memory hog it starts, its value the MiB to hold.
const (
	upAgentEnv = "HOSTILE_UP_SPEC"
	hogEnv     = "HOSTILE_UP_HOG"
)

// upAgentSpec is what the exhausting agent does.
type upAgentSpec struct {
	Lines  []string // the Claude Code transcript it prints, its text replaced
	HogMiB int      // the memory its hog tries to hold
	Calm   bool     // only report "calm", trying nothing
}

// The agent's mains come first, before TestMain (runnerservice_test.go),
// as the other agents' would.
func init() {
	if v := os.Getenv(hogEnv); v != "" {
		mib, _ := strconv.Atoi(v)
		hog(mib)
		os.Exit(0)
	}
	var s upAgentSpec
	if code, ok := playAgent(upAgentEnv, &s, func() ([]string, []string) {
		if s.Calm {
			return s.Lines, []string{"calm"}
		}
		return s.Lines, []string{"memory: " + s.hogInChild(), "fork: " + forkUntilRefused()}
	}); ok {
		os.Exit(code)
	}
}

// hog allocates and touches mib MiB, 16 MiB at a time, printing the MiB
// it holds after each step.
func hog(mib int) {
	var held [][]byte
	for n := 16; n <= mib; n += 16 {
		b := make([]byte, 16<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
		fmt.Println(n)
	}
	_ = held
}

// hogInChild runs the hog in a child and says how far it got.
func (s upAgentSpec) hogInChild() string {
	self, _ := os.Executable()
	cmd := exec.Command(self)
	cmd.Env = []string{hogEnv + "=" + strconv.Itoa(s.HogMiB)}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "refused (" + err.Error() + ")"
	}
	if err := cmd.Start(); err != nil {
		return "refused (" + err.Error() + ")"
	}
	held := 0
	for sc := bufio.NewScanner(out); sc.Scan(); {
		held, _ = strconv.Atoi(sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Sprintf("contained (stopped holding %d MiB of %d: %v)", held, s.HogMiB, err)
	}
	return fmt.Sprintf("ALLOWED, held %d MiB", held)
}

// TestHostileAgentUnderUp runs an agent that forks without end and then
// holds memory without end through `agentmesh up` as a newcomer runs it
// (mesh.LoadUpConfig and mesh.Up with up's default choice of services,
// a runner of every profile's adapters; no AGENTMESH_SANDBOX), its runner
// root where the test is, with the sandbox's limits set to 64 processes
// and 256 MiB: the sandbox is on, the hog is stopped near 256 MiB and the
// fork bomb refused before 64 processes. Before up read the runner's
// configuration, the sandbox was off unless asked for, and on it applied
// none of these limits: the hog held its 768 MiB and the fork bomb
// started its 5,000 children.
func TestHostileAgentUnderUp(t *testing.T) {
	profiles, root := t.TempDir(), t.TempDir()
	const limitMiB = 256
	writeUpAgent(t, profiles, upAgentSpec{HogMiB: 3 * limitMiB})
	t.Setenv("AGENTMESH_SANDBOX_PROCS", "64")
	t.Setenv("AGENTMESH_SANDBOX_MEMORY", strconv.Itoa(limitMiB<<20))
	ctx, c, log := upMesh(t, profiles, root)
	report, st := runUpAgent(ctx, t, c, root)
	t.Logf("runner uid %d; report:\n%s", os.Getuid(), report)
	if st.State != wire.StateSucceeded || st.Sandbox != "" {
		t.Fatalf("run ended %s (%v), sandbox %q; want succeeded in the sandbox", st.State, st.Error, st.Sandbox)
	}
	verdicts := verdictsOf(report)
	m := regexp.MustCompile(`^contained \(stopped holding (\d+) MiB`).FindStringSubmatch(verdicts["memory"])
	if m == nil {
		t.Errorf("memory: %q, want contained", verdicts["memory"])
	} else if held, _ := strconv.Atoi(m[1]); held > limitMiB {
		t.Errorf("memory: the hog held %d MiB, over the %d MiB limit", held, limitMiB)
	}
	m = regexp.MustCompile(`^refused after (\d+) children`).FindStringSubmatch(verdicts["fork"])
	if m == nil {
		t.Errorf("fork: %q, want refused", verdicts["fork"])
	} else if n, _ := strconv.Atoi(m[1]); n >= 64 {
		t.Errorf("fork: %d children, want fewer than the limit of 64 processes", n)
	}
	if !strings.Contains(log.String(), "sandbox on") {
		t.Errorf("up's log does not say the sandbox is on:\n%s", log)
	}
}

// TestUpSandboxOffSaysSo: AGENTMESH_SANDBOX=off, the one way out of the
// sandbox under agentmesh up, runs the CLI unconfined, up's log warns, and
// the run's status says "sandbox": "off".
func TestUpSandboxOffSaysSo(t *testing.T) {
	profiles, root := t.TempDir(), t.TempDir()
	writeUpAgent(t, profiles, upAgentSpec{Calm: true})
	t.Setenv("AGENTMESH_SANDBOX", "off")
	ctx, c, log := upMesh(t, profiles, root)
	report, st := runUpAgent(ctx, t, c, root)
	if st.State != wire.StateSucceeded || st.Sandbox != "off" || report != "calm" {
		t.Errorf("run ended %s (%v), sandbox %q, report %q; want succeeded, sandbox off, calm", st.State, st.Error, st.Sandbox, report)
	}
	if !strings.Contains(log.String(), "AGENTMESH_SANDBOX=off") || strings.Contains(log.String(), "sandbox on") {
		t.Errorf("up's log does not warn that the sandbox is off:\n%s", log)
	}
}

// writeUpAgent writes the profile "exhaust" into profiles: Claude Code's
// adapter running the test binary as the agent spec describes, printing
// Claude Code's transcript S1.
func writeUpAgent(t *testing.T, profiles string, spec upAgentSpec) {
	t.Helper()
	spec.Lines = transcriptS1(t)
	agentProfile{Name: "exhaust", SpecVar: upAgentEnv, Spec: spec, MaxActive: 1}.write(t, profiles)
}

// runUpAgent runs the profile "exhaust" in workspace ws under root and
// returns the text it delivered and its terminal status.
func runUpAgent(ctx context.Context, t *testing.T, c *client.Client, root string) (string, wire.Status) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	req, _ := wire.Marshal(map[string]any{"prompt": "use everything"})
	_, report, st := runToEnd(ctx, t, c, wire.RunRequest{V: 2, Tenant: "acme", Principal: "mallory", Profile: "exhaust", Request: req,
		Runtime: map[string]any{"workspace": "ws"}})
	return report, st
}

// runToEnd starts rr and follows it to its end: its id, the text it
// delivered and its terminal status.
func runToEnd(ctx context.Context, t *testing.T, c *client.Client, rr wire.RunRequest) (string, string, wire.Status) {
	t.Helper()
	id, evs, err := c.Start(ctx, rr)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for ev, err := range evs {
		if err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		if ev.Chunk != nil && ev.Chunk.Type == wire.ChunkText {
			text.WriteString(ev.Chunk.Content)
		}
		if ev.Terminal() {
			return id, text.String(), *ev.Status
		}
	}
	t.Fatalf("run %s: no terminal status", id)
	return id, text.String(), wire.Status{}
}
