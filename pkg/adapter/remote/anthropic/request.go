package anthropic

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter/reqfield"
	"github.com/agentmesh/agentmesh/pkg/adapter/toolschema"
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

// ToolResult answers one pending tool call of the conversation: ToolID is
// the provider's call id, as the tool_use chunk carried it; a string Output
// is sent as is, any other value as its JSON text, nil as no content.
type ToolResult = toolschema.Result

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
func Decode(b []byte) (Request, error) { return reqfield.Read(Name, b, read) }

// read takes the request's fields from d and checks them (reqfield.Read).
func read(d *reqfield.Decoder) Request {
	// tool_results given, even a bad one, stands in for the prompt.
	d.RequireUnless("prompt", "tool_results")
	req := Request{
		Prompt:           d.String("prompt"),
		System:           d.String("system"),
		Model:            d.String("model"),
		MaxTokens:        d.Int("max_tokens", 1, MaxTokensLimit),
		ThinkingBudget:   d.Int("thinking_budget", MinThinkingBudget, MaxTokensLimit-1),
		WebSearchMaxUses: d.Int("web_search_max_uses", 1, MaxWebSearchUses),
		ToolResults:      toolschema.Results(d, "tool_results", toolschema.ResultRules{}),
	}
	req.Tools = toolschema.Tools(d, "tools", toolRules(req.WebSearchMaxUses > 0))
	if t := d.Float("temperature", 0, 1); d.Has("temperature") {
		req.Temperature = &t
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
	return req
}

// toolRules are the provider's rules for a tool beyond the shared ones: a
// bounded name without NUL bytes, unique also as a provider alias and, with
// web search on, not the web search tool's; a schema of type object.
func toolRules(webSearch bool) toolschema.Rules {
	return toolschema.Rules{
		Name: func(name string) error {
			if strings.IndexByte(name, 0) >= 0 || len(name) > maxToolName {
				return fmt.Errorf("at most %d bytes and no NUL byte", maxToolName)
			}
			if webSearch && alias(name) == webSearchName {
				return errors.New("taken by the web search server tool, which web_search_max_uses enables")
			}
			return nil
		},
		Schema: func(schema map[string]any) error {
			if typ, _ := schema["type"].(string); typ != "object" {
				return errors.New("the provider takes only schemas of type object")
			}
			return nil
		},
		Alias: alias,
	}
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
