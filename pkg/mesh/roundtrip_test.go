package mesh_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/anthropic"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func toolUses(evs []wire.Event) []wire.Chunk {
	var out []wire.Chunk
	for _, ev := range evs {
		if ev.Kind == wire.KindChunk && ev.Chunk.Type == wire.ChunkToolUse {
			out = append(out, *ev.Chunk)
		}
	}
	return out
}

func allText(evs []wire.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Kind == wire.KindChunk && ev.Chunk.Type == wire.ChunkText {
			b.WriteString(ev.Chunk.Content)
		}
	}
	return b.String()
}

// A remote tool round trip through the ordinary runtime: the first run on
// a conversation ends with a tool call, the second carries its result and
// continues from the checkpoint. Between them the profile alias moves to
// another model and the router restarts: the conversation stays on its
// pinned model. Nothing checkpoint-only ever appears in an event.
func TestRemoteToolRoundTripThroughTheMesh(t *testing.T) {
	fs, err := replay.Start("../../testdata/remote/openai")
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	srv := natstest.RunJetStream(t)
	a, err := openai.New(remote.Config{BaseURL: fs.URL() + "/tool-roundtrip", AllowLoopback: true}, openai.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prof := func(name, model string, aliases ...string) profile.Profile {
		return profile.Profile{Name: name, Adapter: "openai", Transport: wire.TransportRemote, Model: model, Aliases: aliases,
			BaseURL: fs.URL() + "/tool-roundtrip", AllowLoopback: true,
			Pricing: map[string]string{"input": "1.25", "output": "10", "cache_read": "0.125", "reasoning": "10"}}
	}
	registry := func(ps ...profile.Profile) *profile.Registry {
		r, err := profile.New(ps...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := startNodeWith(t, srv, mesh.Config{}, registry(prof("oa-55", "gpt-5.5", "gpt"), prof("oa-56", "gpt-5.6")), a)
	c := newClient(t, srv)
	tool := map[string]any{"name": "fs.read", "description": "Read a file of the workspace", "input_schema": map[string]any{
		"type": "object", "properties": map[string]any{
			"path":      map[string]any{"type": "string"},
			"max_bytes": map[string]any{"type": "integer", "minimum": 1, "maximum": 65536},
		}, "required": []any{"path"}, "additionalProperties": false,
	}}
	run1 := converse(t, c, "gpt", "conv", map[string]any{"prompt": "What does answer.txt say?", "tools": []any{tool}})
	if st := last(run1); st.State != wire.StateSucceeded || st.Pin.Model != "gpt-5.5" {
		t.Fatalf("first run: %s %+v", describe(run1), st)
	}
	calls := toolUses(run1)
	if len(calls) != 1 || calls[0].ToolName != "fs.read" || calls[0].ToolID == "" {
		t.Fatalf("first run's tool calls = %+v, want one fs.read with the provider's id", calls)
	}
	stopNode(t, first)

	startNodeWith(t, srv, mesh.Config{}, registry(prof("oa-55", "gpt-5.5"), prof("oa-56", "gpt-5.6", "gpt")), a)
	run2 := converse(t, c, "gpt", "conv", map[string]any{"tool_results": []any{
		map[string]any{"tool_id": calls[0].ToolID, "output": "42\n"},
	}})
	if st := last(run2); st.State != wire.StateSucceeded || st.Pin.Model != "gpt-5.5" {
		t.Fatalf("second run: %s on %+v, want succeeded on the pinned gpt-5.5", describe(run2), st.Pin)
	}
	if !strings.Contains(allText(run2), "42") {
		t.Fatalf("second run's answer = %q", allText(run2))
	}
	// The continuation data went to the provider and never into an event.
	reqs := fs.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "encrypted_content") {
		t.Fatalf("the second request did not replay the encrypted reasoning")
	}
	events, _ := json.Marshal(append(run1, run2...))
	for _, secret := range []string{"encrypted_content", "gAAAAA", "resp_", "rs_", "fc_"} {
		if strings.Contains(string(events), secret) {
			t.Errorf("checkpoint-only data %q appears in an event", secret)
		}
	}
}

func TestAnthropicSignedThinkingStaysInTheCheckpoint(t *testing.T) {
	fs, err := replay.Start("../../testdata/remote/anthropic")
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	srv := natstest.RunJetStream(t)
	a, err := anthropic.New(remote.Config{BaseURL: fs.URL() + "/roundtrip", AllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := profile.New(profile.Profile{Name: "anthropic", Adapter: "anthropic", Transport: wire.TransportRemote,
		Model: "claude-sonnet-4-5", BaseURL: fs.URL() + "/roundtrip", AllowLoopback: true,
		Pricing: map[string]string{"input": "3", "output": "15", "cache_read": "0.30", "cache_write": "3.75", "reasoning": "15"}})
	if err != nil {
		t.Fatal(err)
	}
	startNodeWith(t, srv, mesh.Config{}, profiles, []adapter.Adapter{a}...)
	c := newClient(t, srv)
	tool := map[string]any{"name": "weather.get", "description": "The current weather at a place.", "input_schema": map[string]any{
		"type": "object", "properties": map[string]any{
			"location": map[string]any{"type": "string"},
			"unit":     map[string]any{"type": "string", "enum": []any{"celsius", "fahrenheit"}},
		}, "required": []any{"location"}, "additionalProperties": false,
	}}
	run1 := converse(t, c, "anthropic", "conv", map[string]any{"prompt": "Weather in Paris?", "tools": []any{tool}, "thinking_budget": 2048, "max_tokens": 4096})
	calls := toolUses(run1)
	if st := last(run1); st.State != wire.StateSucceeded || len(calls) != 1 || calls[0].ToolName != "weather.get" {
		t.Fatalf("first run: %s, calls %+v", describe(run1), calls)
	}
	run2 := converse(t, c, "anthropic", "conv", map[string]any{"tool_results": []any{
		map[string]any{"tool_id": calls[0].ToolID, "output": `{"temp_c": 18}`},
	}})
	if st := last(run2); st.State != wire.StateSucceeded {
		t.Fatalf("second run: %s %v", describe(run2), st.Error)
	}
	if !strings.Contains(string(fs.Requests()[1].Body), "signature") {
		t.Fatal("the second request did not replay the signed thinking")
	}
	events, _ := json.Marshal(append(run1, run2...))
	for _, secret := range []string{"signature", "ErUBCkYIBxgCIkB0SIGN", "msg_"} {
		if strings.Contains(string(events), secret) {
			t.Errorf("checkpoint-only data %q appears in an event", secret)
		}
	}
}

// stopNode stops a node started by startNodeWith before the test ends.
func stopNode(t *testing.T, n *node) {
	t.Helper()
	n.stop()
	select {
	case err := <-n.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mesh did not stop")
	}
	n.done <- nil // for the cleanup startNodeWith registered
}
