package openai_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// fixtureCases are the recorded responses of testdata/remote/openai, each
// run as one attempt. The exact chunk stream and final error of each are in
// want/<name>.jsonl (rewrite them with -update, then review the diff);
// types, stop reasons and error classes are also stated here.
var fixtureCases = []struct {
	name  string
	req   map[string]any
	types string     // the chunk types, in order
	stop  string     // the result's stop_reason
	class wire.Class // the final error's class ("" for none); never retryable
	chunk wire.Class // the error chunk's class, for a provider-declared failure
}{
	{name: "text", req: map[string]any{"prompt": conformance.Prompt, "reasoning_effort": "none"},
		types: "system text text text text text result", stop: "end_turn"},
	{name: "reasoning", req: map[string]any{"prompt": conformance.Prompt},
		types: "system thinking thinking thinking thinking thinking thinking thinking text text text text result", stop: "end_turn"},
	{name: "tool-call", req: map[string]any{"prompt": "Read the README.", "tools": []any{fsRead(1 << 20)}},
		types: "system thinking thinking thinking tool_use result", stop: "tool_use"},
	{name: "usage", req: map[string]any{"prompt": "Summarize."},
		types: "system thinking thinking text text text text text result", stop: "end_turn"},
	{name: "incomplete", req: map[string]any{"prompt": "Tell me a story.", "max_tokens": 16},
		types: "system text text text text result", stop: "max_tokens"},
	{name: "cut", req: map[string]any{"prompt": conformance.Prompt},
		types: "system text text", class: wire.ProviderTransportError},
	{name: "stream-error", req: map[string]any{"prompt": conformance.Prompt},
		types: "system text text error", chunk: wire.ProviderError},
	{name: "response-failed", req: map[string]any{"prompt": conformance.Prompt},
		types: "system error", chunk: wire.ProviderQuotaError},
	{name: "unknown-event", req: map[string]any{"prompt": conformance.Prompt},
		types: "system", class: wire.ProviderProtocolError},
	{name: "http-401", req: map[string]any{"prompt": conformance.Prompt}, class: wire.ProviderAuthError},
	{name: "http-429", req: map[string]any{"prompt": conformance.Prompt}, class: wire.ProviderQuotaError},
	{name: "http-400-context", req: map[string]any{"prompt": conformance.Prompt}, class: wire.ProviderContextError},
	{name: "http-500", req: map[string]any{"prompt": conformance.Prompt}, class: wire.ProviderError},
	{name: "http-503", req: map[string]any{"prompt": conformance.Prompt}, class: wire.ProviderError}, // a 5xx, though its text says overloaded
	{name: "http-529", req: map[string]any{"prompt": conformance.Prompt}, class: wire.ProviderQuotaError},
}

// TestFixtures runs every recorded response through the real HTTP path and
// checks the exact chunk stream and typed terminal error, the stream rules,
// and the request line and headers.
func TestFixtures(t *testing.T) {
	srv := conformance.ReplayServer(t, openai.Name)
	for _, tt := range fixtureCases {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdapter(t, srv, tt.name, openai.Options{})
			chunks, err := collect(t, a, conformance.Call(t, a, model, tt.req))

			var types []string
			for _, c := range chunks {
				types = append(types, string(c.Type))
			}
			if got := strings.Join(types, " "); got != tt.types {
				t.Errorf("chunk types = %q, want %q", got, tt.types)
			}
			gotClass, retryable := class(err)
			if gotClass != tt.class {
				t.Errorf("final error = %v, want class %q", err, tt.class)
			}
			if want := conformance.RetriedStatus(tt.name); retryable != want {
				t.Errorf("final error %v has retryable %t, want %t: of the answered requests only a 429, 529 or 5xx is", err, retryable, want)
			}
			if err != nil && !errors.Is(err, tt.class) {
				t.Errorf("errors.Is(%v, %s) = false", err, tt.class)
			}
			if n := len(chunks); n > 0 {
				last := chunks[n-1]
				if last.Type == wire.ChunkResult && last.Metadata.StopReason != tt.stop {
					t.Errorf("stop_reason = %q, want %q", last.Metadata.StopReason, tt.stop)
				}
				if last.Type == wire.ChunkError && last.Metadata.ErrorClass != tt.chunk {
					t.Errorf("error chunk class = %q, want %q", last.Metadata.ErrorClass, tt.chunk)
				}
			}
			for _, p := range conformance.Check(openai.Capabilities, chunks, err, conformance.Ran) {
				t.Errorf("stream rule: %s", p)
			}
			if strings.Contains(conformance.ChunksJSON(chunks)+errText(err), credential) {
				t.Errorf("the credential leaked into the output")
			}
			golden(t, tt.name, chunks, err)

			reqs := requestsOf(srv, tt.name)
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Path != "/v1/responses" {
				t.Errorf("path = %q, want /v1/responses", r.Path)
			}
			if got := r.Header.Get("Authorization"); got != "Bearer "+credential {
				t.Errorf("Authorization = %q", got)
			}
			if got := r.Header.Get("Accept"); got != "text/event-stream" {
				t.Errorf("Accept = %q", got)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// golden compares the outcome with want/<name>.jsonl: one chunk a line,
// then {"error": <the final wire error or null>}.
func golden(t *testing.T, name string, chunks []wire.Chunk, err error) {
	t.Helper()
	end, jerr := json.Marshal(map[string]*wire.Error{"error": wire.AsError(err)})
	if jerr != nil {
		t.Fatal(jerr)
	}
	conformance.Compare(t, conformance.Testdata(t, "remote", openai.Name, "want", name+".jsonl"),
		[]byte(conformance.ChunksJSON(chunks)+string(end)+"\n"))
}
