package mesh_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vmihailenco/msgpack/v5"
)

// The follower below is written from version 1 of the contract alone,
// the first published one (the project's first design notes: "field v =
// 1", a RunRequest on agentmesh.submit.<tenant> with header Nats-Msg-Id:
// <run_id>, events on agentmesh.events.<tenant>.<run_id> in the stream
// AGENTMESH_EVENTS, each of kind status or chunk, seq 1-based and gapless,
// exactly one terminal state and it is the last event). Its messages are
// its own structs with v1's field names, decoded leniently as a client of
// any msgpack library would; nothing of pkg/wire or pkg/client is used on
// its side of the wire.

// v1Request is contract v1's RunRequest.
type v1Request struct {
	V            int               `msgpack:"v"`
	RunID        string            `msgpack:"run_id"`
	Tenant       string            `msgpack:"tenant"`
	Principal    string            `msgpack:"principal"`
	Profile      string            `msgpack:"profile"`
	Request      map[string]any    `msgpack:"request"`
	Runtime      map[string]any    `msgpack:"runtime,omitempty"`
	Conversation string            `msgpack:"conversation,omitempty"`
	DeadlineMS   int64             `msgpack:"deadline_ms,omitempty"`
	Labels       map[string]string `msgpack:"labels,omitempty"`
}

// v1Event is contract v1's Event: kind status or chunk.
type v1Event struct {
	V      int       `msgpack:"v"`
	RunID  string    `msgpack:"run_id"`
	Seq    uint64    `msgpack:"seq"`
	TS     int64     `msgpack:"ts"`
	Kind   string    `msgpack:"kind"`
	Status *v1Status `msgpack:"status"`
	Chunk  *v1Chunk  `msgpack:"chunk"`
}

// v1Status is contract v1's status: state, pin, error, attempt, summary.
type v1Status struct {
	State   string         `msgpack:"state"`
	Pin     map[string]any `msgpack:"pin"`
	Error   map[string]any `msgpack:"error"`
	Attempt int            `msgpack:"attempt"`
	Summary map[string]any `msgpack:"summary"`
}

// v1Chunk is contract v1's Chunk.
type v1Chunk struct {
	Type       string         `msgpack:"type"`
	Content    *string        `msgpack:"content"`
	ToolName   *string        `msgpack:"tool_name"`
	ToolID     *string        `msgpack:"tool_id"`
	ToolInput  map[string]any `msgpack:"tool_input"`
	ToolOutput any            `msgpack:"tool_output"`
	IsError    bool           `msgpack:"is_error"`
	IsDelta    bool           `msgpack:"is_delta"`
	Metadata   map[string]any `msgpack:"metadata"`
}

// v1Terminal is contract v1's terminal states.
var v1Terminal = map[string]bool{"succeeded": true, "failed": true, "cancelled": true, "timed_out": true, "rejected": true}

// v1Follow submits a run of the fixture script script on profile prof as
// contract v1 describes and follows its events to the terminal status,
// returning its chunks, the states of its statuses and the terminal
// status. It fails t on anything a v1 follower could not read: a v other
// than 1, a kind other than status or chunk, a gap or a repeat in seq, or
// an event after the terminal one.
func v1Follow(t *testing.T, url, prof, script string) (chunks []v1Chunk, states []string, terminal v1Status) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runID := fmt.Sprintf("v1-follower-%d", time.Now().UnixNano())
	cons, err := js.OrderedConsumer(ctx, "AGENTMESH_EVENTS", jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"agentmesh.events." + tenant + "." + runID},
	})
	if err != nil {
		t.Fatal(err)
	}
	body, err := msgpack.Marshal(&v1Request{
		V: 1, RunID: runID, Tenant: tenant, Principal: "alice", Profile: prof,
		Request: map[string]any{"prompt": "a v1 follower", "script": script},
	})
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg("agentmesh.submit." + tenant)
	msg.Header.Set("Nats-Msg-Id", runID)
	msg.Data = body
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	var next uint64 = 1
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
		if err != nil {
			t.Fatalf("after seq %d (chunks %d): %v", next-1, len(chunks), err)
		}
		var ev v1Event
		if err := msgpack.Unmarshal(m.Data(), &ev); err != nil {
			t.Fatalf("seq %d: undecodable: %v", next, err)
		}
		switch {
		case ev.V != 1:
			t.Fatalf("seq %d: v=%d (kind %q); a v1 follower reads v=1 only", next, ev.V, ev.Kind)
		case ev.RunID != runID || ev.Seq != next:
			t.Fatalf("event of run %s seq %d, want run %s seq %d", ev.RunID, ev.Seq, runID, next)
		case ev.Kind == "chunk" && ev.Chunk != nil && ev.Status == nil:
			chunks = append(chunks, *ev.Chunk)
		case ev.Kind == "status" && ev.Status != nil && ev.Chunk == nil:
			states = append(states, ev.Status.State)
			if v1Terminal[ev.Status.State] {
				if pending, err := cons.Next(jetstream.FetchMaxWait(200 * time.Millisecond)); err == nil {
					t.Fatalf("an event after the terminal status: %q", pending.Data())
				}
				return chunks, states, *ev.Status
			}
		default:
			t.Fatalf("seq %d: kind %q with status %v, chunk %v: not a v1 event", next, ev.Kind, ev.Status != nil, ev.Chunk != nil)
		}
		next++
	}
}

// longScript writes a fixture script of a system chunk, n text deltas
// and a result into a new directory, beside copies of the shipped
// scripts, and returns the directory.
func longScript(t *testing.T, name string, n int) (dir string, want []wire.Chunk) {
	t.Helper()
	want = append(want, wire.Chunk{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: "fixture", Model: "fixture-1", SessionID: "fx-" + name}})
	for i := range n {
		want = append(want, wire.Chunk{Type: wire.ChunkText, Content: fmt.Sprintf("part %03d ", i), IsDelta: true})
	}
	want = append(want, wire.Chunk{Type: wire.ChunkResult, Metadata: wire.Metadata{StopReason: "end_turn"}})
	b, err := json.Marshal(map[string]any{"chunks": want})
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../testdata/fixture")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, want
}

// startLongScriptNode starts a mesh node on srv whose fixture adapter
// serves longScript's script.
func startLongScriptNode(t *testing.T, srv *server.Server, name string, n int) []wire.Chunk {
	t.Helper()
	dir, want := longScript(t, name, n)
	fx, err := fixture.New(fixture.Config{ScriptsDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	startNodeWith(t, srv, mesh.Config{}, profile.Builtin(), fx)
	return want
}

// TestAV1FollowerSeesEveryChunkAndTheTerminalStatus is issue 26's
// acceptance: a follower written only from contract v1 (one chunk per
// event, one status per event) against today's mesh sees every chunk the
// run produced, in order under a gapless seq, and the terminal status:
// on a long run whose chunks a newer reader gets batched, on the
// fixture's default stream, through a retry, and on a run that fails
// after output.
func TestAV1FollowerSeesEveryChunkAndTheTerminalStatus(t *testing.T) {
	srv := natstest.RunJetStream(t)
	want := startLongScriptNode(t, srv, "long", 200)
	chunks, states, st := v1Follow(t, srv.ClientURL(), "fixture", "long")
	if st.State != "succeeded" || st.Pin == nil || st.Summary == nil || fmt.Sprint(st.Summary["chunks"]) != fmt.Sprint(len(want)) {
		t.Fatalf("terminal status %+v, want succeeded with its pin and a summary of %d chunks", st, len(want))
	}
	if fmt.Sprint(states) != "[accepted routed running succeeded]" {
		t.Errorf("statuses %v, want accepted, routed, running and succeeded, one event each", states)
	}
	if len(chunks) != len(want) {
		t.Fatalf("the follower saw %d chunks, the run produced %d", len(chunks), len(want))
	}
	for i, c := range chunks {
		content := ""
		if c.Content != nil {
			content = *c.Content
		}
		if c.Type != string(want[i].Type) || content != want[i].Content || c.IsDelta != want[i].IsDelta {
			t.Fatalf("chunk %d = %s %q, want %s %q", i, c.Type, content, want[i].Type, want[i].Content)
		}
	}
	for _, tt := range []struct {
		script, state, types string
	}{
		{"", "succeeded", "[system thinking text tool_use tool_result result]"},
		{"retry-then-ok", "succeeded", "[system text result]"},
		{"fail-after-output", "failed", "[text]"},
	} {
		chunks, states, st := v1Follow(t, srv.ClientURL(), "fixture", tt.script)
		var types []string
		for _, c := range chunks {
			types = append(types, c.Type)
		}
		if st.State != tt.state || fmt.Sprint(types) != tt.types {
			t.Errorf("script %q: %v %v, terminal %+v; want %s ending %s", tt.script, states, types, st, tt.types, tt.state)
		}
		if tt.state == "failed" && (st.Error == nil || st.Error["class"] != "ProviderTransportError") {
			t.Errorf("script %q: terminal error %v, want ProviderTransportError", tt.script, st.Error)
		}
	}
}

// TestAV1FollowerThroughAFallback: a v1 run that moves to its profile's
// fallback (published by the runner that moved it, §4.13) keeps v1
// events on the fallback's runner.
func TestAV1FollowerThroughAFallback(t *testing.T) {
	const fixtureProfile = "schema: 1\nname: %s\nadapter: fixture\ntransport: in_process\ncapabilities: {resumable: false, emits_tool_events: true, reports_usage: true}\nmodel: %[1]s-model\npricing: {input: \"0\", output: \"0\"}\npolicy: {max_attempts: %[2]d%[3]s}\n"
	srv := catalogServer(t, map[string]string{
		"first.yaml":  fmt.Sprintf(fixtureProfile, "first", 1, ", fallback: [second]"),
		"second.yaml": fmt.Sprintf(fixtureProfile, "second", 3, ""),
	}, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	chunks, states, st := v1Follow(t, srv.ClientURL(), "first", "retry-then-ok")
	if st.State != "succeeded" || len(chunks) != 3 {
		t.Fatalf("statuses %v, %d chunks, terminal %+v; want succeeded with 3 chunks", states, len(chunks), st)
	}
	routed := 0
	for _, s := range states {
		if s == "routed" {
			routed++
		}
	}
	if routed != 2 {
		t.Errorf("statuses %v, want routed twice (first, then its fallback)", states)
	}
}

// TestANewerClientStillGetsBatches: the mesh's own client, which declares
// the newest contract version it reads (wire.MaxVersion), gets the same
// run's chunks batched on the wire (events of kind chunks, stamped
// wire.BatchVersion or later) and, expanded, every chunk in order under a
// gapless seq.
func TestANewerClientStillGetsBatches(t *testing.T) {
	srv := natstest.RunJetStream(t)
	want := startLongScriptNode(t, srv, "long", 200)
	c := newClient(t, srv)
	req := clienttest.FixtureRun(t, tenant, fixtureReq{Prompt: "a v3 client", Script: "long"})
	id, evs := clienttest.Run(t, c, req)
	checkGapless(t, evs)
	var got []wire.Chunk
	for _, ev := range evs {
		if ev.Kind == wire.KindChunk {
			got = append(got, *ev.Chunk)
		}
	}
	if st := last(evs); st.State != wire.StateSucceeded || len(got) != len(want) {
		t.Fatalf("%s with %d chunks, want succeeded with %d", st.State, len(got), len(want))
	}
	for i := range got {
		if got[i].Type != want[i].Type || got[i].Content != want[i].Content {
			t.Fatalf("chunk %d = %s %q, want %s %q", i, got[i].Type, got[i].Content, want[i].Type, want[i].Content)
		}
	}
	_, js := natstest.Connect(t, srv)
	raw := clienttest.Stored(t, js, subject.Names{}, tenant, id)
	batches, statuses := 0, 0
	for _, ev := range raw {
		switch ev.Kind {
		case wire.KindChunks:
			batches++
			if ev.V < wire.BatchVersion {
				t.Errorf("a batch of seqs %d to %d stamped v%d", ev.Seq, ev.Last, ev.V)
			}
		case wire.KindStatuses:
			statuses++
		}
	}
	if batches == 0 || statuses != 1 {
		t.Fatalf("%d chunk batches and %d status batches of %d stored events, want some and 1 (accepted and routed)", batches, statuses, len(raw))
	}
}
