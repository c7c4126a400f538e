package sweeper_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// TestOrphanedSessionEndsSessionLost: a session run whose runner died
// between turns (its last event a turn's end) or while it asked
// permission ends SessionLost once the runner's lease expires, as its
// runner ends one it finds orphaned; a run lost mid-turn (its last event a
// text chunk) ends ProviderTransportError. Each plays the router and the
// runner (its work item published, its lease never renewed) as Example
// does, on the shortest lease TTL the topology takes.
func TestOrphanedSessionEndsSessionLost(t *testing.T) {
	turns := 1
	for _, tc := range []struct {
		name string
		last wire.Chunk
		want wire.Class
	}{
		{"between turns", wire.Chunk{Type: wire.ChunkTurnEnd, Metadata: wire.Metadata{NumTurns: &turns, StopReason: "end_turn"}}, wire.SessionLost},
		{"asking permission", wire.Chunk{Type: wire.ChunkPermissionRequested, ToolID: "perm-1", ToolInput: map[string]any{"title": "rm -rf /"}}, wire.SessionLost},
		{"mid-turn", wire.Chunk{Type: wire.ChunkText, Content: "partial"}, wire.ProviderTransportError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.RunJetStream(t)
			nc, js := natstest.Connect(t, srv)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := topology.Ensure(ctx, js, topology.Config{LeaseTTL: time.Second}); err != nil {
				t.Fatal(err)
			}
			d := service.Deps{NC: nc, JS: js, Log: slog.New(slog.DiscardHandler), Health: &service.Health{},
				Metrics: service.NewMetrics(prometheus.NewRegistry())}
			store, err := runs.Open(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.Create(ctx, wire.RunRecord{RunID: "run-1", Tenant: "acme", Principal: "alice",
				Profile: "acp-fake", Adapter: "acp", State: wire.StateRouted, Created: time.Now().UnixMilli()}); err != nil {
				t.Fatal(err)
			}
			w := store.Events().New("acme", "run-1")
			if err := w.StatusesFenced(ctx, wire.Status{State: wire.StateAccepted}, wire.Status{State: wire.StateRouted}); err != nil {
				t.Fatal(err)
			}
			work, err := wire.Marshal(wire.Work{V: wire.MaxVersion, RunID: "run-1", Tenant: "acme", Principal: "alice", Adapter: "acp"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := js.Publish(ctx, d.Names.Work(string(wire.TransportSubprocess), "acp", "acme"), work,
				jetstream.WithMsgID(subject.RunMsgID("acme", "run-1"))); err != nil {
				t.Fatal(err)
			}
			// The runner: its lease, never renewed, a turn's text, then
			// the last chunk before it dies.
			lease, err := store.HoldRunner(ctx, "runner-a")
			if err != nil {
				t.Fatal(err)
			}
			if w, err = store.Events().Open(ctx, "acme", "run-1"); err != nil {
				t.Fatal(err)
			}
			w.Author("runner-a", lease.Epoch(), 1)
			if err := w.StatusFenced(ctx, wire.Status{State: wire.StateRunning, Attempt: 1}); err != nil {
				t.Fatal(err)
			}
			for _, ch := range []wire.Chunk{{Type: wire.ChunkText, Content: "turn one"}, tc.last} {
				if err := w.ChunkFenced(ctx, ch); err != nil {
					t.Fatal(err)
				}
			}

			s, err := sweeper.New(ctx, d, sweeper.Config{})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			defer func() { cancel(); <-done }()
			c, err := client.New(nc, d.Names)
			if err != nil {
				t.Fatal(err)
			}
			st, err := c.Wait(ctx, "acme", "run-1")
			if err != nil || st.State != wire.StateFailed || !errors.Is(st.Error, tc.want) {
				t.Fatalf("ended %s (%v), %v; want failed %s", st.State, st.Error, err, tc.want)
			}
		})
	}
}
