package mesh_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
)

// TestTenantsRaceOneRunID: two tenants submit one run id at the same time,
// in every contract version: v1 with the bare run id as Nats-Msg-Id (as
// contract v1 has it), v2 and v3 with <tenant>.<run_id>. Neither
// suppresses the other: both submissions are stored (no duplicate ack)
// and both runs end succeeded, each on its tenant's record and events. A
// tenant that first publishes, on its own subject, a submission carrying
// the other tenant's Nats-Msg-Id gets its own run rejected and suppresses
// nothing: the other's run, submitted next, succeeds. A repeat of one
// tenant's submission is still one run (docs/contract.md §4.1).
func TestTenantsRaceOneRunID(t *testing.T) {
	srv := natstest.RunJetStream(t)
	startNodeWith(t, srv, mesh.Config{}, profile.Builtin(), newFixture(t))
	nc, js := natstest.Connect(t, srv)
	c, err := client.New(nc, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	tenants := []string{"acme", "globex"}
	// submit publishes tenant's run runID in contract version v with
	// Nats-Msg-Id id, as a submitter of that version would.
	submit := func(ctx context.Context, t *testing.T, tenant, runID string, v int, id string) *jetstream.PubAck {
		t.Helper()
		body, err := msgpack.Marshal(&v1Request{V: v, RunID: runID, Tenant: tenant, Principal: "p", Profile: "fixture",
			Request: map[string]any{"prompt": "from " + tenant}})
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg("agentmesh.submit." + tenant)
		msg.Header.Set(jetstream.MsgIDHeader, id)
		msg.Data = body
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Errorf("%s submits %s: %v", tenant, runID, err)
			return &jetstream.PubAck{}
		}
		return ack
	}
	for v := 1; v <= wire.MaxVersion; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			runID := fmt.Sprintf("race-v%d", v)
			var wg sync.WaitGroup
			for _, tenant := range tenants {
				wg.Go(func() {
					id := subject.RunMsgID(tenant, runID)
					if v == wire.Version {
						id = runID // contract v1's bare run id
					}
					if ack := submit(ctx, t, tenant, runID, v, id); ack.Duplicate {
						t.Errorf("%s's submission of %s was taken for a duplicate", tenant, runID)
					}
				})
			}
			wg.Wait()
			for _, tenant := range tenants {
				st, err := c.Wait(ctx, tenant, runID)
				if err != nil || st.State != wire.StateSucceeded {
					t.Errorf("%s's run %s: %+v, %v; want succeeded", tenant, runID, st, err)
				}
				out := runText(ctx, t, c, tenant, runID)
				if want := "echo: from " + tenant; out != want {
					t.Errorf("%s's run %s echoed %q, want %q", tenant, runID, out, want)
				}
			}
		})
	}
	t.Run("another tenant's id", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		const runID = "spoofed"
		// globex sends acme's id first, then acme submits.
		submit(ctx, t, "globex", runID, 2, subject.RunMsgID("acme", runID))
		st, err := c.Wait(ctx, "globex", runID)
		if err != nil || st.State != wire.StateRejected || st.Error == nil || st.Error.Class != wire.AgenticRequestValidationError {
			t.Errorf("globex's run with acme's id: %+v, %v; want rejected", st, err)
		}
		if ack := submit(ctx, t, "acme", runID, 2, subject.RunMsgID("acme", runID)); ack.Duplicate {
			t.Errorf("acme's submission was taken for a duplicate of globex's")
		}
		if st, err := c.Wait(ctx, "acme", runID); err != nil || st.State != wire.StateSucceeded {
			t.Errorf("acme's run: %+v, %v; want succeeded", st, err)
		}
	})
	t.Run("a repeat is one run", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		const runID = "repeated"
		for range 3 {
			submit(ctx, t, "acme", runID, wire.MaxVersion, subject.RunMsgID("acme", runID))
		}
		if st, err := c.Wait(ctx, "acme", runID); err != nil || st.State != wire.StateSucceeded {
			t.Fatalf("run: %+v, %v; want succeeded", st, err)
		}
		time.Sleep(300 * time.Millisecond) // for a second run, were there one
		var accepted, terminal int
		for ev, err := range c.Events(ctx, "acme", runID, 1) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Status != nil && ev.Status.State == wire.StateAccepted {
				accepted++
			}
			if ev.Terminal() {
				terminal++
				break
			}
		}
		if accepted != 1 || terminal != 1 {
			t.Errorf("three submissions of one run: %d accepted, %d terminal statuses; want one of each", accepted, terminal)
		}
	})
}

// runText is the text a run's chunks carry.
func runText(ctx context.Context, t *testing.T, c *client.Client, tenant, runID string) string {
	t.Helper()
	var text string
	for ev, err := range c.Events(ctx, tenant, runID, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Chunk != nil && ev.Chunk.Type == wire.ChunkText {
			text += ev.Chunk.Content
		}
		if ev.Terminal() {
			break
		}
	}
	return text
}
