package trajectory_test

import (
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// markRedactor replaces each occurrence of a marker with "[X:<rule>]" and
// counts it under the marker's rule: a tiny stand-in for pkg/exporter/redact.
type markRedactor struct {
	markers map[string]string // marker → rule
	calls   int
	counts  map[string]int
}

func newMarkRedactor(markers map[string]string) *markRedactor {
	return &markRedactor{markers: markers, counts: map[string]int{}}
}

func (r *markRedactor) String(s string) string {
	r.calls++
	for m, rule := range r.markers {
		if n := strings.Count(s, m); n > 0 {
			r.counts[rule] += n
			s = strings.ReplaceAll(s, m, "[X:"+rule+"]")
		}
	}
	return s
}

func (r *markRedactor) Counts() []trajectory.Fired {
	out := make([]trajectory.Fired, 0, len(r.counts))
	for rule, n := range r.counts {
		out = append(out, trajectory.Fired{Rule: rule, Count: n})
	}
	return out
}

// passRedactor redacts nothing.
type passRedactor struct{}

func (passRedactor) String(s string) string     { return s }
func (passRedactor) Counts() []trajectory.Fired { return nil }

// omap builds a map from key, value pairs, inserting them in the order
// given or, with reverse, backwards: two maps equal in content whose
// insertion (and so iteration) order differs.
func omap(reverse bool, kv ...any) map[string]any {
	m := make(map[string]any, len(kv)/2)
	n := len(kv) / 2
	for i := range n {
		j := i
		if reverse {
			j = n - 1 - i
		}
		m[kv[2*j].(string)] = kv[2*j+1]
	}
	return m
}

var t0 = time.Date(2026, 8, 3, 12, 0, 0, 0, time.UTC)

func f64(f float64) *float64 { return &f }
func i64(i int64) *int64     { return &i }
func iptr(i int) *int        { return &i }

// sampleInput is a representative run, with mark in every string that
// Build must redact (request keys and values, labels, chunk text, tool
// names, ids, inputs and outputs at depth, free-text metadata, error
// messages and stderr tails) and nowhere else. Numbers come in the types
// msgpack decoding gives. reverse builds every map backwards.
func sampleInput(reverse bool, mark string) trajectory.Input {
	s := func(text string) string { return text + mark }
	pin := &wire.Pin{
		Provider: "anthropic", Model: "claude-test-1", ProfileHash: "ph-3f2a", RegistryVersion: "anthropic@rv-81c0",
		Pricing: map[string]string{"input": "3", "output": "15", "cache_read": "0.3"},
	}
	tools := []any{
		omap(reverse,
			"name", s("read_file"),
			"description", "Reads a file. DESCRIPTIONTEXT",
			"input_schema", omap(reverse, "type", "object",
				"properties", omap(reverse, "path", omap(reverse, "type", "string", "description", "SCHEMATEXT")),
				"required", []any{"path"})),
		omap(reverse,
			"name", s("search"),
			"input_schema", omap(reverse, "type", "object", "properties", omap(reverse, "q", omap(reverse, "type", "string", "maxLength", uint8(200))))),
	}
	req := omap(reverse,
		"prompt", s("Find the bug in main.go "),
		"system", s("You are careful. "),
		"max_tokens", uint16(1024),
		"temperature", float32(0.2),
		"top_p", 0.9,
		"stop", []any{s("STOP"), "END"},
		"metadata", omap(reverse, s("key "), s("value "), "nested", omap(reverse, "deep", []any{int8(-3), s("x"), nil, true})),
		"tools", tools,
	)
	ts := func(seq int) int64 { return t0.Add(time.Duration(seq) * 10 * time.Millisecond).UnixNano() }
	chunk := func(seq int, c wire.Chunk) wire.Event {
		return wire.Event{V: 1, RunID: "run-42", Seq: uint64(seq), TS: ts(seq), Kind: wire.KindChunk, Chunk: &c}
	}
	status := func(seq int, st wire.Status) wire.Event {
		return wire.Event{V: 1, RunID: "run-42", Seq: uint64(seq), TS: ts(seq), Kind: wire.KindStatus, Status: &st}
	}
	rc := 2
	events := []wire.Event{
		status(1, wire.Status{State: wire.StateAccepted}),
		status(2, wire.Status{State: wire.StateRouted, Pin: pin}),
		status(3, wire.Status{State: wire.StateRunning, Attempt: 1}),
		chunk(4, wire.Chunk{Type: wire.ChunkSystem, Metadata: wire.Metadata{
			Provider: s("anthropic"), Model: s("claude-test-1"), SessionID: s("sess-1"), ProviderSessionID: s("psess-1"),
			Capabilities: &wire.Capabilities{Transport: wire.TransportInProcess, Resumable: true, EmitsToolEvents: true, ReportsUsage: true, ResumeField: s("session")},
		}}),
		chunk(5, wire.Chunk{Type: wire.ChunkThinking, Content: s("Let me look. "), IsDelta: true}),
		chunk(6, wire.Chunk{Type: wire.ChunkText, Content: s("Reading <main.go> & friends "), IsDelta: true}),
		chunk(7, wire.Chunk{Type: wire.ChunkToolUse, ToolName: s("read_file"), ToolID: s("toolu_1"),
			ToolInput: omap(reverse, "path", s("main.go"), "opts", omap(reverse, s("flag"), []any{s("a"), omap(reverse, "b", s("c"))}, "n", int64(7)))}),
		chunk(8, wire.Chunk{Type: wire.ChunkToolResult, ToolID: s("toolu_1"),
			ToolOutput: omap(reverse, "text", s("package main "), "lines", uint32(120), "list", []any{s("l1"), []any{s("l2"), 1.5}})}),
		chunk(9, wire.Chunk{Type: wire.ChunkToolResult, ToolID: s("toolu_2"), ToolOutput: s("plain output "), IsError: true}),
		chunk(10, wire.Chunk{Type: wire.ChunkResult, Content: s("Done. "), Metadata: wire.Metadata{
			Usage:        &wire.Usage{InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 50},
			TotalCostUSD: f64(0.00891), Cost: "0.008715", NumTurns: iptr(2), DurationMS: i64(2300), DurationAPIMS: i64(2100),
			StopReason: s("end_turn"),
		}}),
		chunk(11, wire.Chunk{Type: wire.ChunkError, Content: s("provider said: overloaded "), IsError: true,
			Metadata: wire.Metadata{ErrorClass: wire.ProviderQuotaError}}),
		status(12, wire.Status{State: wire.StateFailed, Attempt: 1,
			Error: &wire.Error{Class: wire.ProviderQuotaError, Message: s("quota exceeded "), ReturnCode: &rc, StderrTail: s("stderr: retry later ")},
			Summary: &wire.Summary{Chunks: 8, Usage: &wire.Usage{InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 50},
				Cost: "0.008715", TotalCostUSD: f64(0.00891), DurationMS: 2410}}),
	}
	labels := map[string]string{}
	lk := []string{"team", "ticket", s("owner")}
	lv := []string{s("infra"), s("T-1"), s("alice")}
	for i := range lk {
		j := i
		if reverse {
			j = len(lk) - 1 - i
		}
		labels[lk[j]] = lv[j]
	}
	return trajectory.Input{
		Record: wire.RunRecord{
			V: 1, RunID: "run-42", Tenant: "acme", Principal: "alice", Profile: "claude", Adapter: "anthropic",
			Conversation: "conv-7", Pin: pin, State: wire.StateFailed, Consent: true,
			Created: t0.UnixMilli(), Updated: t0.Add(time.Second).UnixMilli(),
		},
		Request: req,
		Labels:  labels,
		Events:  events,
	}
}
