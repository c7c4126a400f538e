package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/acp"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// ACPFakeEnv, set to any non-empty value in a process's environment, makes
// the bench test binary act as the fake ACP agent: its TestMain calls
// acpfake.Main instead of running tests.
const ACPFakeEnv = "AGENTMESH_BENCH_ACP_FAKE"

// ACPProfile is the name of ACP's profile (adapter acp over the fake).
const ACPProfile = "acp-fake"

// acpIdle is the sessions' idle timeout: a safety net only, since
// SessionTurns cancels each session once its second turn has ended. Long
// enough that no loaded machine ends a session between its turn_end and
// the follow-up; short enough that a session left behind by a failed
// sample ends on its own well before the mesh's stop timeout.
const acpIdle = 10 * time.Second

// ACP is adapter acp with this test binary as its agent and ACPFakeEnv in
// the child's environment, so every run of it starts acpfake in a child
// process: an ACP agent that answers each prompt at once (a thought, then
// its reply in two text chunks), with no model behind it.
type ACP struct {
	adapter *acp.Adapter
	binary  string
}

// NewACP returns the ACP, its workspace root a temporary directory of tb.
// The binary is os.Executable, as for NewCLI.
func NewACP(tb testing.TB) *ACP {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatalf("bench: executable: %v", err)
	}
	a, err := acp.New(acp.Config{
		Config: cli.Config{
			Binary: exe, InstallHint: "the bench test binary: run it through go test ./bench", WorkspaceRoot: tb.TempDir(),
			EnvSet: map[string]string{ACPFakeEnv: "1", "GORACE": "atexit_sleep_ms=0"},
		},
		IdleTimeout: acpIdle,
	})
	if err != nil {
		tb.Fatalf("bench: acp adapter: %v", err)
	}
	return &ACP{adapter: a, binary: exe}
}

// Adapter is adapter acp over the fake, for a mesh's registry
// (MeshConfig.Adapters).
func (a *ACP) Adapter() adapter.Adapter { return a.adapter }

// Profile is the subprocess profile ACPProfile that routes to Adapter
// (MeshConfig.Profiles).
func (a *ACP) Profile() profile.Profile {
	return profile.Profile{
		Name: ACPProfile, Adapter: acp.Name, Transport: wire.TransportSubprocess,
		Model: "fake", Binary: a.binary, InstallHint: "the bench test binary",
		Pricing: map[string]string{"input": "0", "output": "0", "cache_read": "0", "cache_write": "0", "reasoning": "0"},
	}
}

// acpRequest is adapter acp's request on the wire.
type acpRequest struct {
	Prompt string `msgpack:"prompt"`
}

// Turns are the two latencies of SessionTurns, sample by sample.
type Turns struct {
	// First is each session's submit → first content chunk of turn 1:
	// the agent's process start, the ACP handshake and the first prompt.
	First Latencies
	// FollowUp is each session's client.Send → first content chunk of
	// turn 2, in the agent that answered turn 1.
	FollowUp Latencies
}

// SessionTurns runs warmup then samples sessions of ACPProfile (the mesh
// must have been started with the ACP's Adapter and Profile), one after
// the other. Each is submitted at contract v3 (client.Start), so it is a
// live session; the clock of its first turn runs from the call to
// client.Start to its first content chunk (thinking or text, after the
// system chunk). After turn 1's turn_end it sends a follow-up
// (client.Send), whose clock runs from the call until the first content
// chunk after the input chunk. After turn 2's turn_end it cancels the run
// (client.Cancel) and follows it to its terminal status, which must be
// cancelled, so that the agent process is gone before the next sample.
// The client's released consumers are reaped at the end, untimed.
func (m *Mesh) SessionTurns(ctx context.Context, samples, warmup int) (Turns, error) {
	if samples < 1 || warmup < 0 {
		return Turns{}, fmt.Errorf("%w: session turns need samples > 0 and warmup >= 0, got %d and %d", ErrInvalidConfig, samples, warmup)
	}
	req, err := wire.Marshal(&acpRequest{Prompt: "bench"})
	if err != nil {
		return Turns{}, err
	}
	var out Turns
	for i := range warmup + samples {
		first, follow, err := m.session(ctx, req)
		if err != nil {
			return Turns{}, err
		}
		if i >= warmup {
			out.First = append(out.First, first)
			out.FollowUp = append(out.FollowUp, follow)
		}
		if (i+1)%reapEvery == 0 {
			if err := reap(ctx, m.js, m.events); err != nil {
				return Turns{}, err
			}
		}
	}
	return out, reap(ctx, m.js, m.events)
}

// session runs one sample of SessionTurns. A failed sample cancels its run
// on the way out (the idle timeout would end it otherwise).
func (m *Mesh) session(ctx context.Context, req []byte) (first, follow time.Duration, err error) {
	start := time.Now()
	id, events, err := m.submitAndFollow(ctx, wire.RunRequest{Tenant: Tenant, Principal: "bench", Profile: ACPProfile, Request: req})
	if err != nil {
		return 0, 0, err
	}
	cancelled := false
	defer func() {
		if err != nil && !cancelled {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = m.client.Cancel(cctx, Tenant, id)
		}
	}()
	turn := 1
	var last wire.Event
	for ev, evErr := range events {
		if evErr != nil {
			return 0, 0, fmt.Errorf("session %s: turn %d, last event %s: %w", id, turn, describe(last), evErr)
		}
		last = ev
		if ev.Kind != wire.KindChunk || ev.Chunk == nil {
			continue
		}
		switch ev.Chunk.Type {
		case wire.ChunkThinking, wire.ChunkText:
			switch {
			case turn == 1 && first == 0:
				first = time.Since(start)
			case turn == 2 && follow == 0:
				follow = time.Since(start)
			}
		case wire.ChunkTurnEnd:
			switch turn {
			case 1:
				if first == 0 {
					return 0, 0, fmt.Errorf("session %s: turn 1 ended with no content chunk", id)
				}
				start = time.Now()
				rep, err := m.client.Send(ctx, Tenant, id, "bench follow-up")
				if err != nil {
					return 0, 0, fmt.Errorf("session %s: send: %w", id, err)
				}
				if rep.Turn != 2 {
					return 0, 0, fmt.Errorf("session %s: the follow-up became turn %d, want 2", id, rep.Turn)
				}
				turn = 2
			case 2:
				if follow == 0 {
					return 0, 0, fmt.Errorf("session %s: turn 2 ended with no content chunk", id)
				}
				if _, err := m.client.Cancel(ctx, Tenant, id); err != nil {
					return 0, 0, fmt.Errorf("session %s: cancel: %w", id, err)
				}
				cancelled = true
				turn = 3
			}
		}
	}
	switch {
	case !last.Terminal():
		return 0, 0, fmt.Errorf("session %s: events ended at %s without a terminal status", id, describe(last))
	case turn != 3:
		return 0, 0, fmt.Errorf("session %s: ended %s in turn %d: %v", id, last.Status.State, turn, last.Status.Error)
	case last.Status.State != wire.StateCancelled:
		return 0, 0, fmt.Errorf("session %s: ended %s after its cancel, want cancelled: %v", id, last.Status.State, last.Status.Error)
	}
	return first, follow, nil
}
