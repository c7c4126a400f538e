package ollama_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/ollama"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

var weatherTool = map[string]any{
	"name": "get_weather", "description": "Current weather for a city",
	"input_schema": map[string]any{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string", "minLength": 1}}, "required": []any{"city"}, "additionalProperties": false},
}

// sentMessages decodes the messages of the i-th request of case name.
func sentMessages(t *testing.T, srvReqs []byte) (map[string]any, []any) {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(srvReqs, &body); err != nil {
		t.Fatal(err)
	}
	msgs, _ := body["messages"].([]any)
	return body, msgs
}

func jsonEq(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s:\n%s\nwant:\n%s", what, g, w)
	}
}

// TestToolRoundTrip runs a whole tool round trip through two Stream calls
// on one conversation, as the runner does: the first ends with tool_use
// (a succeeded run, stop_reason tool_use) and saves the history; the second
// carries the tool result, replays the history and ends with text.
func TestToolRoundTrip(t *testing.T) {
	srv := conformance.ReplayServer(t, ollama.Name)
	a := newAdapter(t, srv, "tool-roundtrip")
	first := run(t, a, map[string]any{"prompt": "Weather in Toronto?", "system": "Use tools.", "tools": []any{weatherTool}}, nil)
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	jsonEq(t, "first run", first.Chunks, []wire.Chunk{sys(), think("Look up Toronto's weather first."),
		tool("call_7fj2k1qa", "get_weather", map[string]any{"city": "Toronto"}), result(188, 27, 1310, "tool_use")})
	if !first.Saved {
		t.Fatal("the first run saved no checkpoint")
	}

	second := run(t, a, map[string]any{"tool_results": []any{map[string]any{"tool_id": "call_7fj2k1qa",
		"output": map[string]any{"temp_c": 21, "sky": "sunny"}}}}, first.Checkpoint)
	if second.Err != nil {
		t.Fatal(second.Err)
	}
	jsonEq(t, "second run", second.Chunks, []wire.Chunk{sys(), text("It is"), text(" 21 °C"), text(" and sunny"),
		text(" in Toronto"), text("."), result(231, 14, 803, "end_turn")})

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	body, msgs := sentMessages(t, reqs[1].Body)
	jsonEq(t, "the second request's history", msgs, []any{
		map[string]any{"role": "system", "content": "Use tools."},
		map[string]any{"role": "user", "content": "Weather in Toronto?"},
		map[string]any{"role": "assistant", "content": "", "thinking": "Look up Toronto's weather first.",
			"tool_calls": []any{map[string]any{"id": "call_7fj2k1qa", "function": map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Toronto"}}}}},
		map[string]any{"role": "tool", "content": `{"sky":"sunny","temp_c":21}`, "tool_name": "get_weather", "tool_call_id": "call_7fj2k1qa"},
	})
	if tools, _ := body["tools"].([]any); len(tools) != 1 {
		t.Errorf("the second request sends %d tools, want the conversation's 1", len(tools))
	}
	// Ollama has no opaque continuation data (no signatures, encrypted
	// reasoning or response ids): what only the checkpoint carries is the
	// replayed history, e.g. the system message. It is in the second
	// request and in no chunk of either run.
	if !strings.Contains(string(reqs[1].Body), "Use tools.") {
		t.Error("the second request does not replay the system message")
	}
	if all := conformance.ChunksJSON(append(first.Chunks, second.Chunks...)); strings.Contains(all, "Use tools.") {
		t.Errorf("the system message reached a chunk:\n%s", all)
	}

	// The conversation goes on from the second run's checkpoint: a new
	// prompt, no pending call.
	third := run(t, a, map[string]any{"prompt": "Thanks!"}, second.Checkpoint)
	if third.Err != nil {
		t.Fatal(third.Err)
	}
	_, msgs = sentMessages(t, srv.Requests()[2].Body)
	if n := len(msgs); n != 6 {
		t.Fatalf("third request: %d messages, want 6", n)
	}
	jsonEq(t, "the last two messages", msgs[4:], []any{
		map[string]any{"role": "assistant", "content": "It is 21 °C and sunny in Toronto."},
		map[string]any{"role": "user", "content": "Thanks!"},
	})
}

// TestToolRoundTripWithoutIDs: a server older than 0.12.10 sends tool calls
// without ids. The adapter invents none; results without a tool_id answer
// the calls in order, and a failed tool is marked in the content.
func TestToolRoundTripWithoutIDs(t *testing.T) {
	srv := conformance.ReplayServer(t, ollama.Name)
	a := newAdapter(t, srv, "tool-roundtrip-noid")
	first := run(t, a, map[string]any{"prompt": "Weather in Toronto and Paris?", "tools": []any{weatherTool}}, nil)
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	jsonEq(t, "first run", first.Chunks, []wire.Chunk{sys(),
		tool("", "get_weather", map[string]any{"city": "Toronto"}), tool("", "get_weather", map[string]any{"city": "Paris"}),
		result(188, 31, 1310, "tool_use")})

	second := run(t, a, map[string]any{"tool_results": []any{
		map[string]any{"output": "21 °C"},
		map[string]any{"output": "timeout", "is_error": true},
	}}, first.Checkpoint)
	if second.Err != nil {
		t.Fatal(second.Err)
	}
	_, msgs := sentMessages(t, srv.Requests()[1].Body)
	jsonEq(t, "tool messages", msgs[2:], []any{
		map[string]any{"role": "tool", "content": "21 °C", "tool_name": "get_weather"},
		map[string]any{"role": "tool", "content": "Tool execution failed: timeout", "tool_name": "get_weather"},
	})
}

// TestContinuationRejected: a continuation that does not fit the
// conversation fails validation before anything is sent.
func TestContinuationRejected(t *testing.T) {
	srv := conformance.ReplayServer(t, ollama.Name)
	a := newAdapter(t, srv, "tool-roundtrip")
	first := run(t, a, map[string]any{"prompt": "Weather in Toronto?", "system": "Use tools.", "tools": []any{weatherTool}}, nil)
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	noid := newAdapter(t, srv, "tool-roundtrip-noid")
	noidFirst := run(t, noid, map[string]any{"prompt": "Weather?", "tools": []any{weatherTool}}, nil)
	if noidFirst.Err != nil {
		t.Fatal(noidFirst.Err)
	}
	plain := newAdapter(t, srv, "plain-text")
	done := run(t, plain, map[string]any{"prompt": "hi"}, nil)
	if done.Err != nil {
		t.Fatal(done.Err)
	}
	result := func(id string) map[string]any { return map[string]any{"tool_id": id, "output": "ok"} }
	tests := []struct {
		name       string
		checkpoint []byte
		in         map[string]any
		wantErr    string
	}{
		{name: "unanswered", checkpoint: first.Checkpoint, in: map[string]any{"prompt": "and?"},
			wantErr: "1 tool call(s) that must be answered"},
		{name: "unknown id", checkpoint: first.Checkpoint, in: map[string]any{"tool_results": []any{result("call_nope")}},
			wantErr: `tool_id "call_nope" is not a pending tool call`},
		{name: "extra id", checkpoint: first.Checkpoint, in: map[string]any{"tool_results": []any{result("call_7fj2k1qa"), result("call_x")}},
			wantErr: `tool_id "call_x" is not a pending`},
		{name: "missing id", checkpoint: first.Checkpoint, in: map[string]any{"tool_results": []any{map[string]any{"output": "x"}}},
			wantErr: `the pending tool call "call_7fj2k1qa" (get_weather) has no result`},
		{name: "too few id-less", checkpoint: noidFirst.Checkpoint, in: map[string]any{"tool_results": []any{map[string]any{"output": "x"}}},
			wantErr: "#2 (get_weather, no id) has no result"},
		{name: "too many id-less", checkpoint: noidFirst.Checkpoint, in: map[string]any{"tool_results": []any{
			map[string]any{"output": "x"}, map[string]any{"output": "y"}, map[string]any{"output": "z"}}},
			wantErr: "1 result(s) without a tool_id answer no pending call"},
		{name: "no pending", checkpoint: done.Checkpoint, in: map[string]any{"tool_results": []any{result("call_7fj2k1qa")}},
			wantErr: "has no pending tool call"},
		{name: "fresh with results", in: map[string]any{"tool_results": []any{result("call_7fj2k1qa")}},
			wantErr: "has no pending tool call"},
		{name: "system changed", checkpoint: first.Checkpoint, in: map[string]any{"system": "Other.", "tool_results": []any{result("call_7fj2k1qa")}},
			wantErr: "its system message cannot change"},
	}
	before := len(srv.Requests())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := run(t, a, tt.in, tt.checkpoint)
			if !errors.Is(o.Err, wire.AgenticRequestValidationError) || !strings.Contains(o.Err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want a validation error containing %q", o.Err, tt.wantErr)
			}
			if len(o.Chunks) != 0 || o.Saved {
				t.Errorf("chunks %d, saved %t: a rejected continuation produces nothing", len(o.Chunks), o.Saved)
			}
		})
	}
	if n := len(srv.Requests()) - before; n != 0 {
		t.Errorf("%d requests sent for rejected continuations", n)
	}
}

// TestInvalidToolArguments: the model's arguments are validated centrally
// against the declared schema before the tool result is accepted.
func TestInvalidToolArguments(t *testing.T) {
	srv := conformance.ReplayServer(t, ollama.Name)
	a := newAdapter(t, srv, "tool-call") // calls get_weather with {"city", "unit"}
	strict := map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}}, "additionalProperties": false}}
	first := run(t, a, map[string]any{"prompt": "Weather?", "tools": []any{strict}}, nil)
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	o := run(t, a, map[string]any{"tool_results": []any{
		map[string]any{"tool_id": "call_k3b9x0qe", "output": "21"}, map[string]any{"tool_id": "call_p7o2gz50", "output": "17"}}},
		first.Checkpoint)
	if !errors.Is(o.Err, wire.AgenticRequestValidationError) || !strings.Contains(o.Err.Error(), `#: additional properties 'unit' not allowed`) {
		t.Errorf("err = %v, want the schema violation", o.Err)
	}
	// A call of a tool that was never declared is refused the same way.
	undeclared := run(t, a, map[string]any{"prompt": "Weather?"}, nil)
	if undeclared.Err != nil {
		t.Fatal(undeclared.Err)
	}
	o = run(t, a, map[string]any{"tool_results": []any{
		map[string]any{"tool_id": "call_k3b9x0qe", "output": "21"}, map[string]any{"tool_id": "call_p7o2gz50", "output": "17"}}},
		undeclared.Checkpoint)
	if !errors.Is(o.Err, wire.AgenticRequestValidationError) || !strings.Contains(o.Err.Error(), "did not declare") {
		t.Errorf("err = %v, want an undeclared-tool validation error", o.Err)
	}
	if len(srv.Requests()) != 2 {
		t.Errorf("%d requests; the rejected continuations must send none", len(srv.Requests()))
	}
}

func TestCorruptCheckpoint(t *testing.T) {
	srv := conformance.ReplayServer(t, ollama.Name)
	o := run(t, newAdapter(t, srv, "plain-text"), map[string]any{"prompt": "hi"}, []byte{0xc1})
	if !errors.Is(o.Err, wire.ProviderProtocolError) || len(o.Chunks) != 0 {
		t.Errorf("chunks %d, err %v; want a ProviderProtocolError before any chunk", len(o.Chunks), o.Err)
	}
}
