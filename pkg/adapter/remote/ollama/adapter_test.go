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

// TestFixtures runs every recorded response through the adapter over real
// loopback HTTP and checks the exact chunk stream, the typed terminal error,
// its retryability and the stream rules of docs/contract.md §1.3.
func TestFixtures(t *testing.T) {
	srv := conformance.ReplayServer(t, ollama.Name)
	prompt := map[string]any{"prompt": "What is the answer?"}
	weather := map[string]any{"prompt": "Weather in Toronto and Paris?", "tools": []any{map[string]any{
		"name": "get_weather", "description": "Current weather for a city",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{
			"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string", "enum": []any{"celsius", "fahrenheit"}}},
			"required": []any{"city"}}}}}
	tests := []struct {
		name    string
		in      map[string]any
		want    []wire.Chunk
		wantErr wire.Class // "" for a clean end
		saved   bool       // a checkpoint is saved
	}{
		{name: "plain-text", in: prompt, saved: true,
			want: []wire.Chunk{sys(), text("The"), text(" answer"), text(" is"), text(" 42"), text("."), result(15, 6, 412, "end_turn")}},
		{name: "thinking", in: prompt, saved: true,
			want: []wire.Chunk{sys(), think("Okay,"), think(" the user asks for the answer."), think(" I recall it is 42,"),
				think(" and the user wants a short answer."), text("It"), text(" is"), text(" 42"), text("."), result(18, 31, 1532, "end_turn")}},
		{name: "tool-call", in: weather, saved: true,
			want: []wire.Chunk{sys(), think("I need the weather"), think(" for two cities."),
				tool("call_k3b9x0qe", "get_weather", map[string]any{"city": "Toronto", "unit": "celsius"}),
				tool("call_p7o2gz50", "get_weather", map[string]any{"city": "Paris", "unit": "celsius"}),
				result(212, 58, 2210, "tool_use")}},
		{name: "usage", in: prompt, saved: true,
			want: []wire.Chunk{sys(), think("Summarize the report:"), think(" three findings, one risk."), text("The report"),
				text(" has three"), text(" findings"), text(" and one open risk"), text("."), result(1287, 356, 9127, "end_turn")}},
		{name: "provider-error", in: prompt,
			want: []wire.Chunk{sys(), text("The"), text(" answer"), text(" is"),
				errChunk(wire.ProviderError, "ollama: an error was encountered while running the model: CUDA error: out of memory")}},
		{name: "cut", in: prompt, wantErr: wire.ProviderTransportError,
			want: []wire.Chunk{sys(), text("The"), text(" answer")}},
		{name: "no-done", in: prompt, wantErr: wire.ProviderProtocolError,
			want: []wire.Chunk{sys(), text("The"), text(" answer")}},
		{name: "unknown-field", in: prompt, wantErr: wire.ProviderProtocolError,
			want: []wire.Chunk{sys(), text("The")}},
		{name: "after-done", in: prompt, wantErr: wire.ProviderProtocolError,
			want: []wire.Chunk{sys(), text("The"), text(" answer"), text(" is"), text(" 42"), text(".")}},
		{name: "http-401", in: prompt, wantErr: wire.ProviderAuthError},
		{name: "http-429", in: prompt, wantErr: wire.ProviderQuotaError},
		{name: "http-500", in: prompt, wantErr: wire.ProviderError},
		{name: "http-529", in: prompt, wantErr: wire.ProviderQuotaError},
		{name: "http-404", in: prompt, wantErr: wire.ProviderError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := run(t, newAdapter(t, srv, tt.name), tt.in, nil)
			o.Expect(t, ollama.Capabilities, tt.want, tt.wantErr, conformance.RetriedStatus(tt.name))
			if o.Saved != tt.saved {
				t.Errorf("checkpoint saved = %t, want %t", o.Saved, tt.saved)
			}
		})
	}
}

// TestStatusErrorMessages checks that an HTTP error carries Ollama's own
// message, so an operator sees what the server said.
func TestStatusErrorMessages(t *testing.T) {
	srv := conformance.ReplayServer(t, ollama.Name)
	o := run(t, newAdapter(t, srv, "http-404"), map[string]any{"prompt": "hi"}, nil)
	if o.Err == nil || !strings.Contains(o.Err.Error(), `model "qwen3:8b" not found, try pulling it first`) {
		t.Errorf("err = %v, want Ollama's message", o.Err)
	}
	if len(o.Chunks) != 0 {
		t.Errorf("chunks before an HTTP error: %s", conformance.ChunksJSON(o.Chunks))
	}
}

// TestRequestBody checks what is sent for a fresh conversation.
func TestRequestBody(t *testing.T) {
	srv := conformance.ReplayServer(t, ollama.Name)
	a := newAdapter(t, srv, "plain-text")
	o := run(t, a, map[string]any{"prompt": "What is the answer?", "system": "Be brief.", "max_tokens": 64,
		"temperature": 0.5, "reasoning_effort": "low", "model": model}, nil)
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/api/chat" {
		t.Errorf("path %q, want /api/chat", r.Path)
	}
	if h := r.Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization header %q sent; Ollama takes none", h)
	}
	var got map[string]any
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"model": model, "stream": true, "think": "low",
		"messages": []any{
			map[string]any{"role": "system", "content": "Be brief."},
			map[string]any{"role": "user", "content": "What is the answer?"},
		},
		"options": map[string]any{"num_predict": float64(64), "temperature": 0.5},
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("body:\n%s\nwant:\n%s", gb, wb)
	}
}

func TestModelMismatch(t *testing.T) {
	srv := conformance.ReplayServer(t, ollama.Name)
	o := run(t, newAdapter(t, srv, "plain-text"), map[string]any{"prompt": "hi", "model": "llama3.2"}, nil)
	if !errors.Is(o.Err, wire.AgenticRequestValidationError) || len(o.Chunks) != 0 {
		t.Errorf("chunks %d, err %v; want a validation error before any chunk", len(o.Chunks), o.Err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests sent for an invalid call", n)
	}
}
