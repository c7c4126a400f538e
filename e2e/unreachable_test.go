//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/codex"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestCLICodexUnreachable: the real Codex, confined, whose config.toml
// points it at a model API that accepts no connection (a port that was
// listened on and closed: nothing listens there).
//
//   - keyed: the runner's key proxy answers for the API, so Codex gets a
//     502 naming the refused connection at once and the run ends with
//     its one error chunk;
//   - not in the run's egress (a profile's egress: that leaves it out, as
//     every sandboxed Codex had before its egress followed config.toml),
//     and with no key: the connection is refused inside the sandbox, and
//     Codex 0.171 waits for the network without limit, printing
//     "Reconnecting... waiting for network"; the run shows those notices
//     and ends within policy.unreachable_after with ProviderTransportError
//     naming it.
func TestCLICodexUnreachable(t *testing.T) {
	i := slices.IndexFunc(clis, func(c cliCase) bool { return c.name == codex.Name })
	c := clis[i]
	if _, err := exec.LookPath(c.binary); err != nil {
		t.Fatalf("%s not on PATH (%s); `make e2e-cli` installs the pinned CLIs into .cache/cli", c.binary, c.hint)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	const bound = 20 * time.Second
	run := func(t *testing.T, keyVar string, egress []string) ([]wire.Chunk, []string, time.Duration, error) {
		tag := fmt.Sprintf("unreachable-%d-%d", os.Getpid(), time.Now().UnixNano())
		t.Cleanup(func() { checkReaped(t, tag+"/") })
		root := t.TempDir()
		e := cliEnv{home: mkdir(t, root, "home"), tmp: mkdir(t, root, "tmp"), workRoot: mkdir(t, root, "work"),
			fakeURL: closed, tag: tag + "/" + c.name, codexKeyVar: keyVar, unreachable: bound, egress: egress}
		mkdir(t, e.workRoot, c.name)
		a, err := c.adapter(t, e)
		if err != nil {
			t.Fatal(err)
		}
		b, err := wire.Marshal(c.request("What is the answer?", false))
		if err != nil {
			t.Fatal(err)
		}
		req, err := a.Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		o := conformance.Collect(t, a, adapter.Call{RunID: "unreachable", Request: req, Model: c.model, Attempt: 1, MaxAttempts: 1,
			Runtime: map[string]any{cli.RuntimeWorkspace: c.name}})
		took := time.Since(start)
		var notices []string
		for _, ch := range o.Chunks {
			if cli.IsNotice(ch) {
				notices = append(notices, ch.Content)
			}
		}
		t.Logf("after %s: %d notices %q; chunks %+v; err %v", took.Round(time.Millisecond), len(notices), notices, o.Chunks, o.Err)
		return o.Chunks, notices, took, o.Err
	}

	t.Run("keyed", func(t *testing.T) {
		chunks, _, took, err := run(t, "FAKE_OPENAI_API_KEY", nil)
		if err != nil || len(chunks) == 0 {
			t.Fatalf("err %v, chunks %d: want the error chunk", err, len(chunks))
		}
		last := chunks[len(chunks)-1]
		if last.Type != wire.ChunkError || !strings.Contains(last.Content, "connection refused") {
			t.Errorf("last chunk %+v, want the error chunk quoting the refused connection", last)
		}
		if took > bound {
			t.Errorf("the run took %s", took)
		}
	})
	t.Run("not-in-egress", func(t *testing.T) {
		chunks, notices, took, err := run(t, "", []string{"127.0.0.1:1"})
		for _, ch := range chunks {
			if ch.Type != wire.ChunkSystem {
				t.Errorf("chunk %+v: want only system chunks and notices", ch)
			}
		}
		if len(notices) == 0 || !strings.HasPrefix(notices[0], "Reconnecting") {
			t.Errorf("no reconnect notice in the stream")
		}
		we := wire.AsError(err)
		if we == nil || we.Class != wire.ProviderTransportError || !strings.Contains(we.Message, "policy.unreachable_after") {
			t.Fatalf("err %v, want ProviderTransportError naming policy.unreachable_after", err)
		}
		// The first notice comes once Codex has tried; the run ends a
		// bound after it, plus the CLI's teardown.
		if took > bound+45*time.Second {
			t.Errorf("the run took %s, want about %s", took, bound)
		}
	})
}
