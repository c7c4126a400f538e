package openai_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Values of testdata/remote/openai/tool-roundtrip.json.
const (
	rtCallID    = "call_Rt7Yh2Kp9Lm4Nq8Ws1Ez5Xc3"
	rtResponse1 = "resp_3d4e5f60718293a4b5c6d7e8f90a1b2c"
	rtResponse2 = "resp_4e5f60718293a4b5c6d7e8f90a1b2c3d"
	rtReasoning = "rs_3d4e5f60718293a4roundtrip"
	rtCallItem  = "fc_3d4e5f60718293a4roundtrip"
	rtMessage   = "msg_4e5f60718293a4b5roundtrip"
	rtEncrypted = "gAAAAABpVQ3oVGhpcmQtcmVhc29uaW5nLWJsb2ItMDAz_Zx8Cv6Bn4Mq2We0Rt8Yu6Io4Pa2Sd0Fg8Hj6Kl4-ENC-CHARLIE=="
)

// TestToolRoundTrip runs a conversation as the runner does, through three
// Stream calls joined only by Checkpoint and SaveCheckpoint: a tool call,
// its result and the answer, then a follow-up prompt. The later requests
// replay the history statelessly, and nothing checkpoint-only (encrypted
// reasoning, response and item ids) appears in any chunk.
func TestToolRoundTrip(t *testing.T) {
	srv := conformance.ReplayServer(t, openai.Name)
	a := newAdapter(t, srv, "tool-roundtrip", openai.Options{})

	// 1: the model calls fs.read (sent as fs_read).
	c1 := conformance.Call(t, a, model, map[string]any{"prompt": "What does answer.txt say?", "system": "You are terse.", "tools": []any{fsRead(1 << 20)}})
	var saved1 []byte
	c1.SaveCheckpoint = func(b []byte) { saved1 = bytes.Clone(b) }
	chunks1, err := collect(t, a, c1)
	if err != nil {
		t.Fatalf("first run: %v", err)
	}
	var use *wire.Chunk
	for i := range chunks1 {
		if chunks1[i].Type == wire.ChunkToolUse {
			use = &chunks1[i]
		}
	}
	if use == nil {
		t.Fatalf("no tool_use chunk:\n%s", conformance.ChunksJSON(chunks1))
	}
	want := map[string]any{"path": "answer.txt"}
	if use.ToolName != "fs.read" || use.ToolID != rtCallID || !reflect.DeepEqual(use.ToolInput, want) {
		t.Errorf("tool_use = %s %s %v, want fs.read %s %v", use.ToolName, use.ToolID, use.ToolInput, rtCallID, want)
	}
	if last := chunks1[len(chunks1)-1]; last.Type != wire.ChunkResult || last.Metadata.StopReason != "tool_use" {
		t.Errorf("last chunk = %+v, want a result with stop_reason tool_use", last)
	}
	if saved1 == nil {
		t.Fatal("the first run saved no checkpoint")
	}

	// 2: the tool result goes back; the model answers.
	c2 := conformance.Call(t, a, model, map[string]any{"tool_results": []any{map[string]any{"tool_id": rtCallID, "output": "42\n"}}})
	c2.Checkpoint = saved1
	var saved2 []byte
	c2.SaveCheckpoint = func(b []byte) { saved2 = bytes.Clone(b) }
	chunks2, err := collect(t, a, c2)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if got := text(chunks2); got != "answer.txt says: 42." {
		t.Errorf("second run's text = %q", got)
	}
	last := chunks2[len(chunks2)-1]
	if last.Type != wire.ChunkResult || last.Metadata.StopReason != "end_turn" ||
		*last.Metadata.Usage != (wire.Usage{InputTokens: 146, CacheReadTokens: 256, OutputTokens: 12}) {
		t.Errorf("second run's result = %s", conformance.ChunksJSON([]wire.Chunk{last}))
	}

	// 3: a follow-up prompt continues the same conversation (the server
	// repeats its last response).
	c3 := conformance.Call(t, a, model, map[string]any{"prompt": "Thanks. And in words?"})
	c3.Checkpoint = saved2
	c3.SaveCheckpoint = func([]byte) {}
	chunks3, err := collect(t, a, c3)
	if err != nil {
		t.Fatalf("third run: %v", err)
	}

	reqs := requestsOf(srv, "tool-roundtrip")
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	user := func(s string) map[string]any {
		return map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": s}}}
	}
	reasoning := map[string]any{"type": "reasoning", "encrypted_content": rtEncrypted,
		"summary": []any{map[string]any{"type": "summary_text", "text": "**Checking the file**\n\nThe answer should be in answer.txt."}}}
	fcall := map[string]any{"type": "function_call", "call_id": rtCallID, "name": "fs_read", "arguments": `{"path":"answer.txt"}`}
	output := map[string]any{"type": "function_call_output", "call_id": rtCallID, "output": "42\n"}
	answer := map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "answer.txt says: 42."}}}
	wantInputs := [][]any{
		{user("What does answer.txt say?")},
		{user("What does answer.txt say?"), reasoning, fcall, output},
		{user("What does answer.txt say?"), reasoning, fcall, output, answer, user("Thanks. And in words?")},
	}
	for i, r := range reqs {
		var body map[string]any
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		if !reflect.DeepEqual(body["input"], wantInputs[i]) {
			got, _ := json.MarshalIndent(body["input"], "", " ")
			t.Errorf("request %d: input =\n%s", i+1, got)
		}
		if _, ok := body["previous_response_id"]; ok {
			t.Errorf("request %d carries previous_response_id", i+1)
		}
		if body["store"] != false || body["stream"] != true || !reflect.DeepEqual(body["include"], []any{"reasoning.encrypted_content"}) {
			t.Errorf("request %d: store=%v stream=%v include=%v", i+1, body["store"], body["stream"], body["include"])
		}
		if body["instructions"] != "You are terse." {
			t.Errorf("request %d: instructions = %v (the conversation's must be kept)", i+1, body["instructions"])
		}
		tools, _ := body["tools"].([]any)
		if len(tools) != 1 || tools[0].(map[string]any)["name"] != "fs_read" || tools[0].(map[string]any)["strict"] != false {
			t.Errorf("request %d: tools = %v", i+1, body["tools"])
		}
		// Item ids and response ids are never replayed.
		for _, id := range []string{rtResponse1, rtResponse2, rtReasoning, rtCallItem, rtMessage} {
			if bytes.Contains(r.Body, []byte(id)) {
				t.Errorf("request %d carries the provider id %s", i+1, id)
			}
		}
	}
	if !bytes.Contains(reqs[1].Body, []byte(rtEncrypted)) {
		t.Error("the second request does not replay the encrypted reasoning")
	}

	// Checkpoint-only data: in the checkpoint, never in a chunk.
	all := conformance.ChunksJSON(chunks1) + conformance.ChunksJSON(chunks2) + conformance.ChunksJSON(chunks3)
	for _, s := range []string{rtEncrypted, rtResponse1, rtResponse2, rtReasoning, rtCallItem, rtMessage, "gAAAAA"} {
		if strings.Contains(all, s) {
			t.Errorf("a chunk carries checkpoint-only data %q", s)
		}
	}
	for _, s := range []string{rtEncrypted, rtResponse1} {
		if !bytes.Contains(saved1, []byte(s)) {
			t.Errorf("the first checkpoint lacks %q", s)
		}
	}
	if !bytes.Contains(saved2, []byte(rtResponse2)) {
		t.Errorf("the second checkpoint lacks the response id %q", rtResponse2)
	}
}

func text(chunks []wire.Chunk) string {
	var b strings.Builder
	for _, c := range chunks {
		if c.Type == wire.ChunkText {
			b.WriteString(c.Content)
		}
	}
	return b.String()
}

// pendingCall runs the tool-call fixture with fs.read's max_bytes capped at
// maxBytes and returns the checkpoint with the call pending.
func pendingCall(t *testing.T, a adapter.Adapter, maxBytes int) []byte {
	t.Helper()
	c := conformance.Call(t, a, model, map[string]any{"prompt": "Read the README.", "tools": []any{fsRead(maxBytes)}})
	var saved []byte
	c.SaveCheckpoint = func(b []byte) { saved = bytes.Clone(b) }
	if _, err := collect(t, a, c); err != nil {
		t.Fatal(err)
	}
	if saved == nil {
		t.Fatal("no checkpoint saved")
	}
	return saved
}

// The call of testdata/remote/openai/tool-call.json: fs.read with
// {"path": "README.md", "max_bytes": 4096}.
const toolCallID = "call_Xq4nT8vLw2ZpR6sKj0mYb3Hd"

// TestInvalidToolArgumentsRejected: the model's arguments break the
// declared schema (max_bytes 4096 > 1024). The tool_use is emitted as the
// model made it, but no result for it is accepted: the arguments are
// validated centrally before, and nothing reaches the provider.
func TestInvalidToolArgumentsRejected(t *testing.T) {
	srv := conformance.ReplayServer(t, openai.Name)
	a := newAdapter(t, srv, "tool-call", openai.Options{})
	saved := pendingCall(t, a, 1024)
	for _, isErr := range []bool{false, true} {
		c := conformance.Call(t, a, model, map[string]any{"tool_results": []any{map[string]any{"tool_id": toolCallID, "output": "# README", "is_error": isErr}}})
		c.Checkpoint = saved
		c.SaveCheckpoint = func([]byte) { t.Error("a rejected run saved a checkpoint") }
		chunks, err := collect(t, a, c)
		if !errors.Is(err, wire.AgenticRequestValidationError) || len(chunks) != 0 {
			t.Fatalf("is_error=%t: chunks %d, err %v; want AgenticRequestValidationError and no chunk", isErr, len(chunks), err)
		}
		if !strings.Contains(err.Error(), "#/max_bytes: maximum: got 4096, want 1024") || !strings.Contains(err.Error(), toolCallID) {
			t.Errorf("err = %v; want it to name the call and the violated bound", err)
		}
	}
	if n := len(requestsOf(srv, "tool-call")); n != 1 {
		t.Errorf("%d requests reached the provider, want only the first run's", n)
	}
	// The same arguments under the schema the model was given are valid.
	ok := pendingCall(t, a, 1<<20)
	c := conformance.Call(t, a, model, map[string]any{"tool_results": []any{map[string]any{"tool_id": toolCallID, "output": map[string]any{"bytes": 8}}}})
	c.Checkpoint = ok
	if _, err := collect(t, a, c); err != nil {
		t.Errorf("valid arguments: %v", err)
	}
}

// TestContinuationChecks: a run whose request does not fit the
// conversation fails before anything is sent.
func TestContinuationChecks(t *testing.T) {
	srv := conformance.ReplayServer(t, openai.Name)
	a := newAdapter(t, srv, "tool-call", openai.Options{})
	saved := pendingCall(t, a, 1<<20)
	done := func() []byte { // a conversation with no pending call
		b := newAdapter(t, srv, "text", openai.Options{})
		c := conformance.Call(t, b, model, map[string]any{"prompt": "hi"})
		var s []byte
		c.SaveCheckpoint = func(x []byte) { s = x }
		if _, err := collect(t, b, c); err != nil {
			t.Fatal(err)
		}
		return s
	}()
	result := func(id string) map[string]any {
		return map[string]any{"tool_results": []any{map[string]any{"tool_id": id, "output": "x"}}}
	}
	tests := []struct {
		name       string
		fields     map[string]any
		checkpoint []byte
		model      string
		want       wire.Class
		wantText   string
	}{
		{name: "results_without_conversation", fields: result(toolCallID), want: wire.AgenticRequestValidationError, wantText: "answers no pending tool call"},
		{name: "results_without_pending_call", fields: result(toolCallID), checkpoint: done, want: wire.AgenticRequestValidationError, wantText: "answers no pending tool call"},
		{name: "unknown_tool_id", fields: result("call_unknown"), checkpoint: saved, want: wire.AgenticRequestValidationError, wantText: `"call_unknown" answers no pending tool call`},
		{name: "pending_call_unanswered", fields: map[string]any{"prompt": "go on"}, checkpoint: saved, want: wire.AgenticRequestValidationError, wantText: "has no result"},
		{name: "model_not_pinned_one", fields: map[string]any{"prompt": "hi", "model": "gpt-4.1"}, want: wire.AgenticRequestValidationError, wantText: "not the pinned model"},
		{name: "checkpoint_of_another_model", fields: result(toolCallID), checkpoint: saved, model: "gpt-5.5-mini", want: wire.PinMismatch},
		{name: "corrupt_checkpoint", fields: map[string]any{"prompt": "hi"}, checkpoint: []byte{0x81, 0xa1, 'v'}, want: wire.ProviderProtocolError},
		{name: "checkpoint_of_another_version", fields: map[string]any{"prompt": "hi"}, checkpoint: conformance.Encode(t, map[string]any{"v": 9, "model": model, "items": []any{}}), want: wire.ProviderProtocolError},
	}
	before := len(srv.Requests())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := conformance.Call(t, a, model, tt.fields)
			c.Checkpoint = tt.checkpoint
			if tt.model != "" {
				c.Model = tt.model
			}
			chunks, err := collect(t, a, c)
			if len(chunks) != 0 || !errors.Is(err, tt.want) || !strings.Contains(errText(err), tt.wantText) {
				t.Errorf("chunks %d, err %v; want no chunk and %s containing %q", len(chunks), err, tt.want, tt.wantText)
			}
		})
	}
	t.Run("request_of_another_adapter", func(t *testing.T) {
		_, err := collect(t, a, adapter.Call{Request: "prompt", Model: model})
		if !errors.Is(err, wire.AgenticHandlerError) {
			t.Errorf("err = %v, want AgenticHandlerError", err)
		}
	})
	if n := len(srv.Requests()); n != before {
		t.Errorf("%d requests reached the provider", n-before)
	}
}

// TestCheckpointTooLarge: a conversation whose checkpoint would not fit in
// a stored message fails the run at its end instead of being stored a turn
// behind (or not at all).
func TestCheckpointTooLarge(t *testing.T) {
	srv := conformance.ReplayServer(t, openai.Name)
	a := newAdapter(t, srv, "text", openai.Options{})
	c := conformance.Call(t, a, model, map[string]any{"prompt": strings.Repeat("x", 1_000_000)})
	c.SaveCheckpoint = func([]byte) { t.Error("a checkpoint over the bound was saved") }
	chunks, err := collect(t, a, c)
	if !errors.Is(err, wire.ProviderContextError) {
		t.Fatalf("err = %v, want ProviderContextError", err)
	}
	for _, ch := range chunks {
		if ch.Type == wire.ChunkResult {
			t.Error("a result chunk before the failure")
		}
	}
}
