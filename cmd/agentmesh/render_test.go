package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

func status(st wire.Status) wire.Event {
	return wire.Event{V: 1, RunID: "r1", Kind: wire.KindStatus, Status: &st}
}

func chunk(c wire.Chunk) wire.Event {
	return wire.Event{V: 1, RunID: "r1", Kind: wire.KindChunk, Chunk: &c}
}

func ptr[T any](v T) *T { return &v }

func TestHumanPrinter(t *testing.T) {
	pin := &wire.Pin{Provider: "fixture", Model: "fixture-1"}
	tests := []struct {
		name string
		in   []wire.Event
		want string
	}{{
		name: "default fixture stream",
		in: []wire.Event{
			status(wire.Status{State: wire.StateAccepted}),
			status(wire.Status{State: wire.StateRouted, Pin: pin}),
			status(wire.Status{State: wire.StateRunning, Attempt: 1}),
			chunk(wire.Chunk{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: "fixture", Model: "fixture-1", ProviderSessionID: "fx-r1"}}),
			chunk(wire.Chunk{Type: wire.ChunkThinking, Content: "The prompt has 2 bytes; echo it."}),
			chunk(wire.Chunk{Type: wire.ChunkText, Content: "echo: hi"}),
			chunk(wire.Chunk{Type: wire.ChunkToolUse, ToolName: "echo", ToolID: "toolu_1", ToolInput: map[string]any{"text": "hi"}}),
			chunk(wire.Chunk{Type: wire.ChunkToolResult, ToolID: "toolu_1", ToolOutput: "hi"}),
			chunk(wire.Chunk{Type: wire.ChunkResult, Metadata: wire.Metadata{Usage: &wire.Usage{InputTokens: 1, OutputTokens: 2}, StopReason: "end_turn"}}),
			status(wire.Status{State: wire.StateSucceeded, Pin: pin, Attempt: 1, Summary: &wire.Summary{Chunks: 6, Usage: &wire.Usage{InputTokens: 1, OutputTokens: 2}, DurationMS: 1500}}),
		},
		want: `[accepted run r1]
[routed fixture/fixture-1]
[running attempt 1]
[system provider=fixture model=fixture-1 provider_session=fx-r1]
thinking: The prompt has 2 bytes; echo it.
echo: hi
→ tool echo {"text":"hi"}
← tool result "hi"
[result usage in=1 out=2 stop=end_turn]
[succeeded · 6 chunks, 1.5s, usage in=1 out=2]
`,
	}, {
		name: "deltas concatenate and a type change ends the line",
		in: []wire.Event{
			chunk(wire.Chunk{Type: wire.ChunkThinking, Content: "let me ", IsDelta: true}),
			chunk(wire.Chunk{Type: wire.ChunkThinking, Content: "think", IsDelta: true}),
			chunk(wire.Chunk{Type: wire.ChunkText, Content: "Hello", IsDelta: true}),
			chunk(wire.Chunk{Type: wire.ChunkText, Content: ", world!", IsDelta: true}),
			chunk(wire.Chunk{Type: wire.ChunkText, Content: "tick 1\n", IsDelta: true}),
			chunk(wire.Chunk{Type: wire.ChunkText, Content: "tick 2\n", IsDelta: true}),
			chunk(wire.Chunk{Type: wire.ChunkResult, Content: "final words", Metadata: wire.Metadata{NumTurns: ptr(2), DurationMS: ptr(int64(12))}}),
		},
		want: `thinking: let me think
Hello, world!tick 1
tick 2
final words
[result turns=2 duration=12ms]
`,
	}, {
		name: "errors",
		in: []wire.Event{
			chunk(wire.Chunk{Type: wire.ChunkText, Content: "Working on it", IsDelta: true}),
			chunk(wire.Chunk{Type: wire.ChunkToolResult, ToolOutput: map[string]any{"code": 2}, IsError: true}),
			chunk(wire.Chunk{Type: wire.ChunkError, Content: "quota exceeded", IsError: true, Metadata: wire.Metadata{ErrorClass: wire.ProviderQuotaError}}),
			status(wire.Status{State: wire.StateFailed, Error: &wire.Error{Class: wire.ProviderProcessError, Message: "exit 3", ReturnCode: ptr(3)}}),
		},
		want: `Working on it
← tool error {"code":2}
[error ProviderQuotaError] quota exceeded
[failed ProviderProcessError: exit 3 (returncode 3)]
`,
	}, {
		name: "rejected",
		in: []wire.Event{
			status(wire.Status{State: wire.StateAccepted}),
			status(wire.Status{State: wire.StateRejected, Error: &wire.Error{Class: wire.AdmissionRejected, Message: "queue full", Retryable: true}}),
		},
		want: `[accepted run r1]
[rejected AdmissionRejected: queue full (retryable)]
`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			p := newHumanPrinter(&out, false)
			for _, ev := range tt.in {
				if err := p.event(ev); err != nil {
					t.Fatal(err)
				}
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestHumanPrinterColor(t *testing.T) {
	var out bytes.Buffer
	p := newHumanPrinter(&out, true)
	_ = p.event(chunk(wire.Chunk{Type: wire.ChunkThinking, Content: "hmm"}))
	_ = p.event(chunk(wire.Chunk{Type: wire.ChunkText, Content: "plain"}))
	if want := styleDim + "thinking: hmm" + styleReset + "\nplain\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func TestJSONPrinter(t *testing.T) {
	var out bytes.Buffer
	p := newJSONPrinter(&out)
	in := []wire.Event{
		status(wire.Status{State: wire.StateAccepted}),
		chunk(wire.Chunk{Type: wire.ChunkText, Content: "hi", IsDelta: true}),
	}
	for i := range in {
		in[i].Seq = uint64(i + 1)
		if err := p.event(in[i]); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(in) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(in), &out)
	}
	for i, l := range lines {
		var ev wire.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if ev.Seq != in[i].Seq || ev.Kind != in[i].Kind {
			t.Errorf("line %d = seq %d kind %s, want seq %d kind %s", i+1, ev.Seq, ev.Kind, in[i].Seq, in[i].Kind)
		}
	}
	if want := `"chunk":{"type":"text","content":"hi","is_error":false,"is_delta":true,"metadata":{}}`; !strings.Contains(lines[1], want) {
		t.Errorf("line 2 = %s, want it to contain %s", lines[1], want)
	}
}
