package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Ending says how a stream was stopped, which decides what its final error
// may be.
type Ending int

// The endings Check knows.
const (
	// Ran: the stream ran to its own end. Its error, if any, is a typed
	// *wire.Error of a known class (a transport or parser failure is never
	// a chunk, and never an untyped error).
	Ran Ending = iota
	// Cancelled: the caller cancelled the context mid-stream. The error is
	// the cancellation itself: no cleanup error replaces it.
	Cancelled
	// TimedOut: the context's deadline passed mid-stream. The error is the
	// deadline (context.DeadlineExceeded or the DeadlineExceeded class).
	TimedOut
	// Closed: the consumer stopped ranging early, so no error was observed.
	Closed
)

func (e Ending) String() string {
	switch e {
	case Ran:
		return "ran"
	case Cancelled:
		return "cancelled"
	case TimedOut:
		return "timed out"
	case Closed:
		return "closed"
	}
	return fmt.Sprintf("Ending(%d)", int(e))
}

// The key sets of docs/contract.md §1.1 and §1.2, written out from the contract rather than
// derived from the wire structs, so that a field added to a struct without
// a contract change is caught.
var (
	chunkKeys = set("type", "content", "tool_name", "tool_id", "tool_input", "tool_output",
		"is_error", "is_delta", "metadata")
	metadataKeys = set("provider", "model", "session_id", "provider_session_id", "capabilities",
		"usage", "total_cost_usd", "cost", "num_turns", "duration_ms", "duration_api_ms",
		"error_class", "stop_reason")
	capabilityKeys = set("transport", "resumable", "emits_tool_events", "reports_usage", "resume_field")
	usageKeys      = set("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
		"reasoning_tokens")
)

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// minEchoLen is the shortest thinking content Check looks for outside
// thinking chunks; shorter deltas ("The answ") occur in any text.
const minEchoLen = 12

// Check returns every way one stream breaks the stream rules of docs/contract.md §1.3
// for an adapter that declares caps: chunks are the stream's chunks in
// order, err its final error (nil at a clean end) and end how it was
// stopped. It returns nil for a conforming stream. It only reads its
// arguments and is safe for concurrent use.
func Check(caps wire.Capabilities, chunks []wire.Chunk, err error, end Ending) []string {
	return check(caps, chunks, err, end, true)
}

// CheckParsed is Check, for a stream that ran to its end, without the
// rules that judge what the provider said rather than what the adapter
// made of it: that a tool_result follows the tool_use of its id, that
// reasoning does not reappear outside thinking chunks, and that the
// result does not repeat the text. It is for a parser fed events no
// provider sends (a fuzzer's), which a faithful parser passes on.
func CheckParsed(caps wire.Capabilities, chunks []wire.Chunk, err error) []string {
	return check(caps, chunks, err, Ran, false)
}

// check is Check; provider says whether the rules on what the provider
// said apply.
func check(caps wire.Capabilities, chunks []wire.Chunk, err error, end Ending, provider bool) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	at := func(i int, format string, args ...any) {
		bad("chunk %d (%s): %s", i+1, chunks[i].Type, fmt.Sprintf(format, args...))
	}

	errorAt, resultAt := -1, -1
	toolUses := map[string]bool{}
	var thinking []string
	for i, c := range chunks {
		if !c.Type.Valid() {
			at(i, "type %q is not a chunk type of the contract (§1.1, §6.1)", c.Type)
		}
		// type=="error" iff is_error; a tool result may also fail.
		switch {
		case c.Type == wire.ChunkError && !c.IsError:
			at(i, "an error chunk must have is_error=true")
		case c.IsError && c.Type != wire.ChunkError && c.Type != wire.ChunkToolResult:
			at(i, "is_error=true on a %s chunk (only error and tool_result chunks may carry it)", c.Type)
		}
		hasTool := c.ToolName != "" || c.ToolID != "" || c.ToolInput != nil || c.ToolOutput != nil
		switch c.Type {
		case wire.ChunkSystem:
			// A notice (the agent has not reached its model API, §1.3)
			// carries its text and the class of its trouble.
			notice := c.Metadata.ErrorClass != ""
			if ec := c.Metadata.ErrorClass; notice && (!ec.Known() || !ec.IsA(wire.ProviderError) || c.Content == "") {
				at(i, "a notice (system chunk with metadata.error_class %q) needs a ProviderError class and its text", ec)
			}
			if c.Content != "" && !notice {
				at(i, "a system chunk carries text %q", c.Content)
			}
			if hasTool {
				at(i, "a system chunk carries tool fields")
			}
		case wire.ChunkThinking:
			if c.Content == "" {
				at(i, "an empty thinking chunk (missing reasoning means no chunk)")
			}
			thinking = append(thinking, c.Content)
		case wire.ChunkToolUse:
			if c.ToolName == "" {
				at(i, "a tool_use chunk without tool_name")
			}
			if c.ToolID != "" {
				toolUses[c.ToolID] = true
			}
		case wire.ChunkToolResult:
			if provider && c.ToolID != "" && !toolUses[c.ToolID] {
				at(i, "tool_result for tool_id %q, which no earlier tool_use carried", c.ToolID)
			}
		case wire.ChunkError:
			if c.Content == "" {
				at(i, "an error chunk without a message")
			}
			if ec := c.Metadata.ErrorClass; ec != "" && (!ec.Known() || !ec.IsA(wire.ProviderError)) {
				at(i, "metadata.error_class %q is not a ProviderError class", ec)
			}
		case wire.ChunkInput, wire.ChunkTurnEnd:
			if n := c.Metadata.NumTurns; n == nil || *n < 1 || (c.Type == wire.ChunkInput && *n < 2) {
				at(i, "a %s chunk without the turn's number in metadata.num_turns", c.Type)
			}
			if c.Type == wire.ChunkInput && c.Content == "" {
				at(i, "an input chunk without its prompt")
			}
		case wire.ChunkPermissionRequested:
			if _, ok := c.ToolInput["options"].([]any); !ok || c.ToolID == "" {
				at(i, "a permission_requested chunk without its request id (tool_id) or options (tool_input.options)")
			}
		case wire.ChunkPermissionResolved:
			if ec := c.Metadata.ErrorClass; c.ToolID == "" || (ec != "" && ec != wire.PermissionTimeout) {
				at(i, "a permission_resolved chunk without its request id, or with error_class %q (only PermissionTimeout)", ec)
			}
		}
		if c.Type != wire.ChunkError && c.Type != wire.ChunkPermissionResolved && c.Type != wire.ChunkSystem && c.Metadata.ErrorClass != "" {
			at(i, "metadata.error_class on a %s chunk", c.Type)
		}

		// Order: nothing after the error chunk; at most one result, and
		// after it at most the one error chunk.
		switch {
		case errorAt >= 0:
			at(i, "follows the error chunk (chunk %d); nothing may follow it", errorAt+1)
		case resultAt >= 0 && c.Type != wire.ChunkError:
			at(i, "follows the result chunk (chunk %d); the result comes after all content", resultAt+1)
		}
		switch c.Type {
		case wire.ChunkError:
			if errorAt < 0 {
				errorAt = i
			}
		case wire.ChunkResult:
			if resultAt < 0 {
				resultAt = i
			}
		}

		// Sessions: the canonical key only for a resumable adapter, the
		// observational one only for the others.
		md := c.Metadata
		if md.SessionID != "" && !caps.Resumable {
			at(i, "metadata.session_id %q from a non-resumable adapter (it must be provider_session_id)", md.SessionID)
		}
		if md.ProviderSessionID != "" && caps.Resumable {
			at(i, "metadata.provider_session_id %q from a resumable adapter (it must be session_id)", md.ProviderSessionID)
		}
		if md.Capabilities != nil && *md.Capabilities != caps {
			at(i, "metadata.capabilities %+v differ from the declaration %+v", *md.Capabilities, caps)
		}
		if md.Usage != nil && !caps.ReportsUsage {
			at(i, "metadata.usage from an adapter declaring reports_usage=false")
		}
		if (c.Type == wire.ChunkToolUse || c.Type == wire.ChunkToolResult) && !caps.EmitsToolEvents {
			at(i, "a %s chunk from an adapter declaring emits_tool_events=false", c.Type)
		}
		for _, p := range keyProblems(c) {
			at(i, "%s", p)
		}
	}

	// The result holds only terminal text not already emitted as text.
	if resultAt >= 0 && provider {
		var text strings.Builder
		for _, c := range chunks[:resultAt] {
			if c.Type == wire.ChunkText {
				text.WriteString(c.Content)
			}
		}
		if rc := chunks[resultAt].Content; rc != "" && strings.HasSuffix(text.String(), rc) {
			at(resultAt, "content %q repeats text already emitted", rc)
		}
	}
	// Reasoning only in thinking chunks.
	for _, th := range thinking {
		if len(th) < minEchoLen || !provider {
			continue
		}
		for i, c := range chunks {
			if c.Type != wire.ChunkThinking && strings.Contains(c.Content, th) {
				at(i, "carries reasoning %q that was emitted as thinking", th)
			}
		}
	}

	// The final error.
	switch end {
	case Ran:
		if err != nil {
			var we *wire.Error
			switch {
			case !errors.As(err, &we):
				bad("the stream ended with an untyped error %T %q (a failure must be a *wire.Error)", err, err)
			case !we.Class.Known():
				bad("the stream ended with error class %q, which is not a class of docs/contract.md §1.5", we.Class)
			}
			if errorAt >= 0 {
				bad("an error %q follows the error chunk; nothing may follow it", err)
			}
		}
	case Cancelled:
		if !errors.Is(err, context.Canceled) {
			bad("a cancelled stream ended with %v, want the cancellation (context.Canceled)", describe(err))
		}
	case TimedOut:
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, wire.DeadlineExceeded) {
			bad("a stream past its deadline ended with %v, want the deadline", describe(err))
		}
	case Closed:
		if err != nil {
			bad("a stream the consumer closed yielded the error %q", err)
		}
	}
	return problems
}

func describe(err error) string {
	if err == nil {
		return "no error"
	}
	return fmt.Sprintf("%T %q", err, err)
}

// keyProblems checks the chunk's JSON and msgpack forms against the closed
// key sets of docs/contract.md §1.1 and §1.2.
func keyProblems(c wire.Chunk) []string {
	var problems []string
	check := func(form string, m map[string]any) {
		for _, k := range unknownKeys(m, chunkKeys) {
			problems = append(problems, fmt.Sprintf("%s key %q is not a chunk field", form, k))
		}
		md, ok := m["metadata"].(map[string]any)
		if !ok {
			if m["metadata"] != nil {
				problems = append(problems, fmt.Sprintf("%s metadata is %T, not a map", form, m["metadata"]))
			}
			return
		}
		for _, k := range unknownKeys(md, metadataKeys) {
			problems = append(problems, fmt.Sprintf("%s metadata key %q is outside the closed set", form, k))
		}
		if caps, ok := md["capabilities"].(map[string]any); ok {
			for _, k := range unknownKeys(caps, capabilityKeys) {
				problems = append(problems, fmt.Sprintf("%s metadata.capabilities key %q is not a capability", form, k))
			}
		}
		if usage, ok := md["usage"].(map[string]any); ok {
			for _, k := range unknownKeys(usage, usageKeys) {
				problems = append(problems, fmt.Sprintf("%s metadata.usage key %q is not a token class", form, k))
			}
		}
	}
	if b, err := json.Marshal(c); err != nil {
		problems = append(problems, fmt.Sprintf("json: %v", err))
	} else {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			problems = append(problems, fmt.Sprintf("json: %v", err))
		}
		check("json", m)
	}
	if b, err := wire.Marshal(c); err != nil {
		problems = append(problems, fmt.Sprintf("msgpack: %v", err))
	} else {
		var m map[string]any
		if err := wire.DecodeStrict(b, &m); err != nil {
			problems = append(problems, fmt.Sprintf("msgpack: %v", err))
		}
		check("msgpack", m)
	}
	return problems
}

func unknownKeys(m map[string]any, known map[string]bool) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !known[k] {
			out = append(out, k)
		}
	}
	return out
}
