package anthropic

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/reqfield"
	"github.com/agentmesh/agentmesh/pkg/toolschema"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Bounds of the numeric request fields.
const (
	// MaxTokensLimit bounds max_tokens; the provider enforces each model's
	// own, lower output limit.
	MaxTokensLimit = 200_000
	// MinThinkingBudget is the provider's smallest thinking budget.
	MinThinkingBudget = 1024
	// MaxWebSearchUses bounds web_search_max_uses.
	MaxWebSearchUses = 100
)

// ToolResult answers one pending tool call of the conversation.
type ToolResult struct {
	// ToolID is the provider's call id, as the tool_use chunk carried it.
	ToolID string `msgpack:"tool_id"`
	// Output is the tool's output: a string is sent as is, any other value
	// as its JSON text; nil sends no content.
	Output any `msgpack:"output,omitempty"`
	// IsError says the tool failed; Output then describes the failure.
	IsError bool `msgpack:"is_error,omitempty"`
}

// Request is the typed request of the anthropic adapter, decoded strictly
// from msgpack (snake_case keys):
//
//	prompt               the user's text for this turn (required unless tool_results is given)
//	system               the system prompt; a continuation without one keeps the conversation's
//	tools                client tools [{name, description, input_schema}]; input_schema is a
//	                     JSON schema of type object. Names outside the provider's alphabet
//	                     (dotted platform names) are sent as deterministic aliases and restored
//	                     before any chunk; a continuation without tools keeps the conversation's
//	tool_results         [{tool_id, output, is_error}] answering every pending tool call of the
//	                     conversation's checkpoint, no more and no fewer
//	model                optional; when set it must equal the pinned model
//	max_tokens           the output cap of this turn (default 8192, plus thinking_budget when set)
//	temperature          0..1; not together with thinking
//	thinking_budget      enables extended thinking with this many tokens (≥ 1024, below
//	                     max_tokens); a continuation without it keeps the conversation's
//	web_search_max_uses  enables the provider's web search server tool with this many uses per
//	                     turn; a continuation without it keeps the conversation's
type Request struct {
	Prompt           string            `msgpack:"prompt,omitempty"`
	System           string            `msgpack:"system,omitempty"`
	Tools            []toolschema.Tool `msgpack:"tools,omitempty"`
	ToolResults      []ToolResult      `msgpack:"tool_results,omitempty"`
	Model            string            `msgpack:"model,omitempty"`
	MaxTokens        int               `msgpack:"max_tokens,omitempty"`
	Temperature      *float64          `msgpack:"temperature,omitempty"`
	ThinkingBudget   int               `msgpack:"thinking_budget,omitempty"`
	WebSearchMaxUses int               `msgpack:"web_search_max_uses,omitempty"`
}

// Decode validates a msgpack request strictly. Every problem (an unknown
// field, a wrong type, a missing prompt, a bad tool or tool result, a value
// out of range, an impossible combination) is named in one
// AgenticRequestValidationError. It starts nothing and is safe for
// concurrent use.
func Decode(b []byte) (Request, error) {
	// pkg/reqfield has typed getters for scalars and string lists only:
	// the list-of-map and float fields are taken out of the map here, the
	// rest goes through reqfield, and the problems of both are reported
	// together through d.Bad.
	var m map[string]any
	if err := wire.DecodeStrict(b, &m); err != nil {
		return Request{}, wire.Errorf(wire.AgenticRequestValidationError, "%s request: %v", Name, err)
	}
	rawTools, hasTools := m["tools"]
	rawResults, hasResults := m["tool_results"]
	rawTemp, hasTemp := m["temperature"]
	delete(m, "tools")
	delete(m, "tool_results")
	delete(m, "temperature")
	rest, err := wire.Marshal(m)
	if err != nil {
		return Request{}, wire.Errorf(wire.AgenticRequestValidationError, "%s request: %v", Name, err)
	}
	d, err := reqfield.Decode(Name, rest)
	if err != nil {
		return Request{}, err
	}
	req := Request{
		Prompt:           d.String("prompt"),
		System:           d.String("system"),
		Model:            d.String("model"),
		MaxTokens:        d.Int("max_tokens", 1, MaxTokensLimit),
		ThinkingBudget:   d.Int("thinking_budget", MinThinkingBudget, MaxTokensLimit-1),
		WebSearchMaxUses: d.Int("web_search_max_uses", 1, MaxWebSearchUses),
	}
	if hasTools && rawTools != nil {
		req.Tools = decodeTools(d, rawTools, req.WebSearchMaxUses > 0)
	}
	if hasResults && rawResults != nil {
		req.ToolResults = decodeToolResults(d, rawResults)
	}
	if hasTemp && rawTemp != nil {
		req.Temperature = decodeTemperature(d, rawTemp)
	}
	if req.Prompt == "" && !(hasResults && rawResults != nil) {
		d.Bad("prompt", "required, a non-empty string, unless tool_results is given")
	}
	if strings.IndexByte(req.Prompt, 0) >= 0 {
		d.Bad("prompt", "contains a NUL byte")
	}
	if req.ThinkingBudget > 0 && req.MaxTokens > 0 && req.ThinkingBudget >= req.MaxTokens {
		d.Bad("thinking_budget", "%d must be below max_tokens %d", req.ThinkingBudget, req.MaxTokens)
	}
	if req.ThinkingBudget > 0 && req.Temperature != nil {
		d.Bad("temperature", "cannot be set together with thinking_budget (the provider refuses it)")
	}
	if err := d.Err(); err != nil {
		return Request{}, err
	}
	return req, nil
}

// decodeTools reads the tools list: each a map {name, description,
// input_schema}; names unique, also as provider aliases.
func decodeTools(d *reqfield.Decoder, v any, webSearch bool) []toolschema.Tool {
	const k = "tools"
	items, ok := v.([]any)
	if !ok {
		d.Bad(k, "want an array of tools, got %T", v)
		return nil
	}
	out := make([]toolschema.Tool, 0, len(items))
	byAlias := map[string]string{}
	bad := false
	for i, it := range items {
		t, ok := it.(map[string]any)
		if !ok {
			d.BadElem(k, i, "want a map {name, description, input_schema}, got %T", it)
			bad = true
			continue
		}
		var tool toolschema.Tool
		for _, key := range slices.Sorted(maps.Keys(t)) {
			val := t[key]
			switch key {
			case "name":
				s, ok := val.(string)
				if !ok || s == "" {
					d.BadElem(k, i, "name: want a non-empty string")
					bad = true
				}
				tool.Name = s
			case "description":
				s, ok := val.(string)
				if !ok && val != nil {
					d.BadElem(k, i, "description: want a string")
					bad = true
				}
				tool.Description = s
			case "input_schema":
				s, ok := val.(map[string]any)
				if !ok {
					d.BadElem(k, i, "input_schema: want a JSON schema object")
					bad = true
					continue
				}
				tool.Schema = s
			default:
				d.BadElem(k, i, "unknown field %.64q", key)
				bad = true
			}
		}
		if tool.Name != "" && (strings.IndexByte(tool.Name, 0) >= 0 || len(tool.Name) > maxToolName) {
			d.BadElem(k, i, "name: at most %d bytes and no NUL byte", maxToolName)
			bad = true
		}
		if _, present := t["name"]; !present {
			d.BadElem(k, i, "name: required")
			bad = true
		}
		if _, present := t["input_schema"]; !present {
			d.BadElem(k, i, "input_schema: required")
			bad = true
		} else if tool.Schema != nil {
			if typ, _ := tool.Schema["type"].(string); typ != "object" {
				d.BadElem(k, i, "input_schema: the provider takes only schemas of type object")
				bad = true
			}
			if err := toolschema.CheckSchema(tool.Schema); err != nil {
				d.BadElem(k, i, "input_schema: %v", err)
				bad = true
			}
		}
		if tool.Name != "" {
			a := alias(tool.Name)
			if other, dup := byAlias[a]; dup {
				if other == tool.Name {
					d.BadElem(k, i, "duplicate tool name %q", tool.Name)
				} else {
					d.BadElem(k, i, "tool names %q and %q both become the provider name %q", other, tool.Name, a)
				}
				bad = true
			}
			byAlias[a] = tool.Name
			if webSearch && a == webSearchName {
				d.BadElem(k, i, "the name %q is the web search server tool's, which web_search_max_uses enables", webSearchName)
				bad = true
			}
		}
		out = append(out, tool)
	}
	if bad {
		return nil
	}
	return out
}

// decodeToolResults reads the tool_results list: each a map {tool_id,
// output, is_error} with a unique, non-empty tool_id.
func decodeToolResults(d *reqfield.Decoder, v any) []ToolResult {
	const k = "tool_results"
	items, ok := v.([]any)
	if !ok {
		d.Bad(k, "want an array of tool results, got %T", v)
		return nil
	}
	if len(items) == 0 {
		d.Bad(k, "empty; omit it or answer the pending tool calls")
		return nil
	}
	out := make([]ToolResult, 0, len(items))
	seen := map[string]bool{}
	bad := false
	for i, it := range items {
		r, ok := it.(map[string]any)
		if !ok {
			d.BadElem(k, i, "want a map {tool_id, output, is_error}, got %T", it)
			bad = true
			continue
		}
		var res ToolResult
		for _, key := range slices.Sorted(maps.Keys(r)) {
			val := r[key]
			switch key {
			case "tool_id":
				s, ok := val.(string)
				if !ok || s == "" {
					d.BadElem(k, i, "tool_id: want a non-empty string")
					bad = true
				}
				res.ToolID = s
			case "output":
				res.Output = val
			case "is_error":
				b, ok := val.(bool)
				if !ok && val != nil {
					d.BadElem(k, i, "is_error: want a boolean")
					bad = true
				}
				res.IsError = b
			default:
				d.BadElem(k, i, "unknown field %.64q", key)
				bad = true
			}
		}
		if _, present := r["tool_id"]; !present {
			d.BadElem(k, i, "tool_id: required")
			bad = true
		}
		if res.ToolID != "" {
			if seen[res.ToolID] {
				d.BadElem(k, i, "tool_id %q is answered twice", res.ToolID)
				bad = true
			}
			seen[res.ToolID] = true
		}
		out = append(out, res)
	}
	if bad {
		return nil
	}
	return out
}

// decodeTemperature reads a number in [0, 1] (an integer 0 or 1 too).
func decodeTemperature(d *reqfield.Decoder, v any) *float64 {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		f = float64(toInt64(n))
	default:
		d.Bad("temperature", "want a number, got %T", v)
		return nil
	}
	if math.IsNaN(f) || f < 0 || f > 1 {
		d.Bad("temperature", "%v is out of range [0, 1]", f)
		return nil
	}
	return &f
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int8:
		return int64(n)
	case int16:
		return int64(n)
	case int32:
		return int64(n)
	case int64:
		return n
	case uint8:
		return int64(n)
	case uint16:
		return int64(n)
	case uint32:
		return int64(n)
	case uint64:
		if n > math.MaxInt64 {
			return math.MaxInt64
		}
		return int64(n)
	}
	return 0
}

// toolIDs lists the ids of results, for messages.
func toolIDs(results []ToolResult) []string {
	ids := make([]string, 0, len(results))
	for _, r := range results {
		ids = append(ids, r.ToolID)
	}
	slices.Sort(ids)
	return ids
}

// validationf is a request problem found when the request meets the
// conversation (the checkpoint), after Decode.
func validationf(format string, args ...any) *wire.Error {
	return wire.Errorf(wire.AgenticRequestValidationError, "%s request: %s", Name, fmt.Sprintf(format, args...))
}
