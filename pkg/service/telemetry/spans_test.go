package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/service/telemetry"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// memory is tracing into an in-memory exporter, synchronously.
func memory(t *testing.T) (*telemetry.Tracing, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return telemetry.New(tp), exp
}

func attrsOf(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func byName(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d", name, len(exp.GetSpans()))
	return tracetest.SpanStub{}
}

func TestRejectedRunSpanHasTheClassOnly(t *testing.T) {
	tr, exp := memory(t)
	ctx, end := tr.StartRun(context.Background(), nats.Header{"Nats-Msg-Id": {"acme.r1"}})
	telemetry.Rejected(ctx, "acme", "r1", wire.Errorf(wire.AdmissionRejected, "tenant acme's queue is full; prompt was %q", "secret"))
	end(nil)
	s := byName(t, exp, "invoke_agent")
	a := attrsOf(s)
	if a["error.type"] != string(wire.AdmissionRejected) || a["agentmesh.state"] != "rejected" || a["agentmesh.run_id"] != "r1" || a["agentmesh.tenant"] != "acme" {
		t.Fatalf("attributes %v", a)
	}
	if s.Status.Code != codes.Error || s.Status.Description != string(wire.AdmissionRejected) {
		t.Fatalf("status %+v, want an error described by its class only", s.Status)
	}
}

func TestSubmitSpanEndsWithTheErrorType(t *testing.T) {
	tests := []struct {
		name string
		in   error
		want string // error.type; "" for none
	}{
		{name: "stored", in: nil},
		{name: "typed", in: fmt.Errorf("submit: %w", wire.Errorf(wire.AgenticRequestValidationError, "bad prompt %q", "secret")), want: string(wire.AgenticRequestValidationError)},
		{name: "untyped", in: errors.New("nats: timeout with secret"), want: "_OTHER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, exp := memory(t)
			h := nats.Header{}
			tr.Submit(context.Background(), &wire.RunRequest{RunID: "r1", Tenant: "acme", Profile: "fixture"}, h)(tt.in)
			s := byName(t, exp, "submit fixture")
			if h.Get("traceparent") == "" {
				t.Fatal("submission carries no traceparent")
			}
			if got := attrsOf(s)["error.type"]; got != tt.want {
				t.Fatalf("error.type = %q, want %q", got, tt.want)
			}
			if tt.in != nil && (s.Status.Code != codes.Error || s.Status.Description == tt.in.Error()) {
				t.Fatalf("status %+v: want an error without the message", s.Status)
			}
		})
	}
}

func TestAttemptSpans(t *testing.T) {
	tr, exp := memory(t)
	wk := &wire.Work{RunID: "r1", Tenant: "acme", Adapter: "openai", Profile: "oa", Pin: wire.Pin{Provider: "openai", Model: "gpt-5.5"}}
	a := tr.StartAttempt(context.Background(), nats.Header{}, wk, wire.TransportRemote, 2)
	for _, c := range []wire.Chunk{
		{Type: wire.ChunkToolUse, ToolName: "fs.read", ToolID: "c1", IsDelta: true}, // a delta opens nothing
		{Type: wire.ChunkToolUse, ToolName: "fs.read", ToolID: "c1", ToolInput: map[string]any{"path": "secret"}},
		{Type: wire.ChunkToolUse, ToolName: "fs.read", ToolID: "c1"}, // the same call again: still one span
		{Type: wire.ChunkToolUse, ToolName: "shell", ToolID: "c2"},   // never answered
		{Type: wire.ChunkToolResult, ToolID: "c1", IsError: true, ToolOutput: "secret"},
		{Type: wire.ChunkToolResult, ToolID: "unknown"},
		{Type: wire.ChunkResult, Metadata: wire.Metadata{Model: "gpt-5.5-2026", Usage: &wire.Usage{InputTokens: 9, OutputTokens: 2, ReasoningTokens: 4}}},
		{Type: wire.ChunkError, Content: "secret failure"},
	} {
		a.Chunk(&c)
	}
	a.Ended(wire.Status{State: wire.StateFailed, Error: wire.Errorf(wire.ProviderStreamError, "secret")})
	a.End()
	a.End() // idempotent
	if n := len(exp.GetSpans()); n != 3 {
		t.Fatalf("%d spans, want the attempt and two tool uses", n)
	}
	at := byName(t, exp, "chat gpt-5.5")
	want := map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-5.5",
		"gen_ai.response.model": "gpt-5.5-2026", "gen_ai.usage.input_tokens": "9", "gen_ai.usage.output_tokens": "2",
		"agentmesh.reasoning_tokens": "4", "agentmesh.attempt": "2", "agentmesh.state": "failed",
		"error.type": string(wire.ProviderStreamError), "agentmesh.transport": "remote",
	}
	got := attrsOf(at)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_creation.input_tokens", "agentmesh.cost"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s = %q set, though the run reported none", k, v)
		}
	}
	read := byName(t, exp, "execute_tool fs.read")
	if read.Parent.SpanID() != at.SpanContext.SpanID() || attrsOf(read)["error.type"] != "tool_error" || attrsOf(read)["gen_ai.tool.call.id"] != "c1" {
		t.Errorf("fs.read span: parent %s (attempt %s), attributes %v", read.Parent.SpanID(), at.SpanContext.SpanID(), attrsOf(read))
	}
	if shell := byName(t, exp, "execute_tool shell"); shell.EndTime.IsZero() {
		t.Error("an unanswered tool use's span was not ended with the attempt")
	}
	for _, s := range exp.GetSpans() {
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); v == "secret" || v == "secret failure" {
				t.Errorf("span %s exports %s=%q", s.Name, kv.Key, v)
			}
		}
	}
}

// An attempt tracks at most a bounded number of tool uses at once.
func TestAttemptBoundsOpenTools(t *testing.T) {
	tr, exp := memory(t)
	a := tr.StartAttempt(context.Background(), nats.Header{}, &wire.Work{}, wire.TransportSubprocess, 1)
	for i := range 300 {
		a.Chunk(&wire.Chunk{Type: wire.ChunkToolUse, ToolName: "t", ToolID: fmt.Sprint(i)})
	}
	a.End()
	if n := len(exp.GetSpans()); n != 257 {
		t.Fatalf("%d spans, want the attempt and 256 tool uses", n)
	}
}

// The run span names its run from the submission's Nats-Msg-Id, so a
// duplicate submission's span, which routes nothing, names it too.
func TestRunSpanNamesItsRunFromTheMessageID(t *testing.T) {
	tr, exp := memory(t)
	_, end := tr.StartRun(context.Background(), nats.Header{"Nats-Msg-Id": {"acme.r1"}})
	end(nil)
	_, end = tr.StartRun(context.Background(), nats.Header{"Nats-Msg-Id": {"not a run key"}})
	end(nil)
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	if a := attrsOf(spans[0]); a["agentmesh.run_id"] != "r1" || a["agentmesh.tenant"] != "acme" {
		t.Errorf("attributes %v, want run r1 of tenant acme", a)
	}
	if a := attrsOf(spans[1]); a["agentmesh.run_id"] != "" || a["agentmesh.tenant"] != "" {
		t.Errorf("attributes %v from a Nats-Msg-Id that names no run", a)
	}
}
