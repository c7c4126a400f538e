package codex

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// waitingForNetwork is what Codex 0.171 prints when its model API cannot
// be reached: it retries without limit, whatever its retry settings.
const waitingForNetwork = `{"type":"thread.started","thread_id":"01a25177-fc54-71d0-8d0b-0a97861df896"}
{"type":"turn.started"}
{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}
{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}
`

// TestUnreachableAfter: a Codex that only reports it is waiting for the
// network is torn down after the profile's bound; its notices are in the
// stream, and the run ends with ProviderTransportError naming the bound.
func TestUnreachableAfter(t *testing.T) {
	e := newEnv(t, fakeConfigTOML)
	stdout := filepath.Join(t.TempDir(), "stdout.jsonl")
	if err := os.WriteFile(stdout, []byte(waitingForNetwork), 0o644); err != nil {
		t.Fatal(err)
	}
	f := conformance.Fake{Stdout: stdout, Hang: true}
	cfg := DefaultConfig()
	cfg.WorkspaceRoot = e.root
	cfg.Grace = 500 * time.Millisecond
	cfg.EnvSet = map[string]string{EnvCodexHome: e.home}
	cfg.UnreachableAfter = 700 * time.Millisecond
	cfg, _ = f.Play(t, cfg)
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	chunks, err := e.run(a, map[string]any{"prompt": "hi"}, adapter.Call{Model: "gpt-5.5"})
	took := time.Since(start)
	var notices int
	for _, c := range chunks {
		if cli.IsNotice(c) {
			notices++
			if !strings.HasPrefix(c.Content, "Reconnecting... waiting for network") || c.Metadata.ErrorClass != wire.ProviderTransportError {
				t.Errorf("notice %+v", c)
			}
		}
	}
	if notices != 2 {
		t.Errorf("%d notices in %+v, want Codex's 2", notices, chunks)
	}
	we := wire.AsError(err)
	if we == nil || we.Class != wire.ProviderTransportError || !strings.Contains(we.Message, "policy.unreachable_after") || !strings.Contains(we.Message, "waiting for network") {
		t.Fatalf("err %v, want a ProviderTransportError naming policy.unreachable_after and the last notice", err)
	}
	if took > 10*time.Second {
		t.Errorf("the run took %s to end", took)
	}
}
