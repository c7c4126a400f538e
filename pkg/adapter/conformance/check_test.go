package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

var caps = wire.Capabilities{Transport: wire.TransportSubprocess, Resumable: true, EmitsToolEvents: true,
	ReportsUsage: true, ResumeField: "resume"}

// TestCheck makes sure each stream rule is really checked: every stream
// below breaks exactly one rule, and Check must name it.
func TestCheck(t *testing.T) {
	sys := wire.Chunk{Type: wire.ChunkSystem, Metadata: wire.Metadata{SessionID: "s-1"}}
	text := wire.Chunk{Type: wire.ChunkText, Content: "The answer is 42."}
	result := wire.Chunk{Type: wire.ChunkResult, Metadata: wire.Metadata{Usage: &wire.Usage{InputTokens: 1, OutputTokens: 2}}}
	errChunk := wire.Chunk{Type: wire.ChunkError, Content: "quota", IsError: true, Metadata: wire.Metadata{ErrorClass: wire.ProviderQuotaError}}
	use := wire.Chunk{Type: wire.ChunkToolUse, ToolName: "echo", ToolID: "t1"}
	res := wire.Chunk{Type: wire.ChunkToolResult, ToolID: "t1", ToolOutput: "ok", IsError: true}
	noTools := caps
	noTools.EmitsToolEvents = false
	notResumable := caps
	notResumable.Resumable, notResumable.ResumeField = false, ""
	other := caps
	other.ReportsUsage = false

	tests := []struct {
		name    string
		caps    wire.Capabilities
		in      []wire.Chunk
		err     error
		end     conformance.Ending
		wantErr string // a substring of one problem; "" for a conforming stream
	}{
		{name: "conforming", in: []wire.Chunk{sys, use, res, text, result}},
		{name: "conforming provider error", in: []wire.Chunk{sys, text, errChunk}},
		{name: "conforming typed failure", in: []wire.Chunk{sys, text}, err: wire.Errorf(wire.ProviderProtocolError, "bad")},
		{name: "conforming empty EOF", in: nil},
		{name: "conforming cancel", in: []wire.Chunk{sys}, err: context.Canceled, end: conformance.Cancelled},
		{name: "conforming deadline", in: []wire.Chunk{sys}, err: wire.Errorf(wire.DeadlineExceeded, "late"), end: conformance.TimedOut},
		{name: "conforming close", in: []wire.Chunk{sys}, end: conformance.Closed},
		{name: "unknown type", in: []wire.Chunk{{Type: "raw_event"}}, wantErr: "not a chunk type of the contract"},
		{name: "error without is_error", in: []wire.Chunk{{Type: wire.ChunkError, Content: "x"}}, wantErr: "must have is_error=true"},
		{name: "text with is_error", in: []wire.Chunk{{Type: wire.ChunkText, Content: "x", IsError: true}}, wantErr: "is_error=true on a text chunk"},
		{name: "system with text", in: []wire.Chunk{{Type: wire.ChunkSystem, Content: "hello"}}, wantErr: "system chunk carries text"},
		{name: "empty thinking", in: []wire.Chunk{{Type: wire.ChunkThinking}}, wantErr: "empty thinking"},
		{name: "reasoning as text", in: []wire.Chunk{{Type: wire.ChunkThinking, Content: "I recall it is 42."}, {Type: wire.ChunkText, Content: "I recall it is 42."}},
			wantErr: "carries reasoning"},
		{name: "two results", in: []wire.Chunk{result, result}, wantErr: "follows the result"},
		{name: "text after result", in: []wire.Chunk{text, result, text}, wantErr: "follows the result"},
		{name: "result repeats text", in: []wire.Chunk{text, {Type: wire.ChunkResult, Content: "is 42."}}, wantErr: "repeats text"},
		{name: "chunk after error", in: []wire.Chunk{errChunk, text}, wantErr: "follows the error chunk"},
		{name: "error after error chunk", in: []wire.Chunk{errChunk}, err: wire.Errorf(wire.ProviderStreamError, "x"), wantErr: "follows the error chunk"},
		{name: "error class outside ProviderError", in: []wire.Chunk{{Type: wire.ChunkError, Content: "x", IsError: true,
			Metadata: wire.Metadata{ErrorClass: wire.AgenticHandlerError}}}, wantErr: "not a ProviderError class"},
		{name: "error class on text", in: []wire.Chunk{{Type: wire.ChunkText, Content: "x", Metadata: wire.Metadata{ErrorClass: wire.ProviderError}}},
			wantErr: "error_class on a text chunk"},
		{name: "tool_use without name", in: []wire.Chunk{{Type: wire.ChunkToolUse, ToolID: "t"}}, wantErr: "without tool_name"},
		{name: "tool_result of no tool_use", in: []wire.Chunk{res}, wantErr: "no earlier tool_use"},
		{name: "tool events not declared", caps: noTools, in: []wire.Chunk{use}, wantErr: "emits_tool_events=false"},
		{name: "usage not declared", caps: other, in: []wire.Chunk{result}, wantErr: "reports_usage=false"},
		{name: "session_id when not resumable", caps: notResumable, in: []wire.Chunk{sys}, wantErr: "non-resumable"},
		{name: "provider_session_id when resumable", in: []wire.Chunk{{Type: wire.ChunkSystem, Metadata: wire.Metadata{ProviderSessionID: "p"}}},
			wantErr: "must be session_id"},
		{name: "capabilities differ", in: []wire.Chunk{{Type: wire.ChunkSystem, Metadata: wire.Metadata{Capabilities: &notResumable}}},
			wantErr: "differ from the declaration"},
		{name: "untyped failure", in: []wire.Chunk{text}, err: errors.New("EOF"), wantErr: "untyped error"},
		{name: "unknown class", in: []wire.Chunk{text}, err: &wire.Error{Class: "Oops"}, wantErr: "not a class"},
		{name: "cleanup error replaces cancel", in: []wire.Chunk{text}, err: wire.Errorf(wire.ProviderProcessError, "exit 143"),
			end: conformance.Cancelled, wantErr: "want the cancellation"},
		{name: "deadline swallowed", in: []wire.Chunk{text}, end: conformance.TimedOut, wantErr: "want the deadline"},
		{name: "error after close", in: []wire.Chunk{text}, err: context.Canceled, end: conformance.Closed, wantErr: "closed yielded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.caps
			if c == (wire.Capabilities{}) {
				c = caps
			}
			got := conformance.Check(c, tt.in, tt.err, tt.end)
			if tt.wantErr == "" {
				if len(got) > 0 {
					t.Errorf("Check = %q, want no problem", got)
				}
				return
			}
			if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), tt.wantErr) {
				t.Errorf("Check = %q, want a problem containing %q", got, tt.wantErr)
			}
		})
	}
}

func ExampleCheck() {
	chunks := []wire.Chunk{
		{Type: wire.ChunkSystem, Metadata: wire.Metadata{Provider: "demo"}},
		{Type: wire.ChunkText, Content: "Hello"},
		{Type: wire.ChunkError, Content: "rate limited", IsError: true, Metadata: wire.Metadata{ErrorClass: wire.ProviderQuotaError}},
		{Type: wire.ChunkText, Content: "and more"},
	}
	for _, p := range conformance.Check(caps, chunks, nil, conformance.Ran) {
		fmt.Println(p)
	}
	// Output:
	// chunk 4 (text): follows the error chunk (chunk 3); nothing may follow it
}
