package openai

import (
	"encoding/json"
)

// The request body of POST /responses, as this adapter sends it. Field
// order is fixed by the structs, so the same conversation always gives the
// same bytes.
type apiRequest struct {
	Model           string        `json:"model"`
	Instructions    string        `json:"instructions,omitempty"`
	Input           []any         `json:"input"`
	Tools           []apiTool     `json:"tools,omitempty"`
	MaxOutputTokens int           `json:"max_output_tokens,omitempty"`
	Temperature     *float64      `json:"temperature,omitempty"`
	Reasoning       *apiReasoning `json:"reasoning,omitempty"`
	Store           bool          `json:"store"`
	Stream          bool          `json:"stream"`
	Include         []string      `json:"include"`
}

type apiTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type apiReasoning struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary"`
}

// Input items. Replayed items carry no item id: under store=false the
// provider persists nothing an id could name, and an id it cannot resolve
// fails the request ("Item with id ... not found"). The reasoning item's
// encrypted_content is what carries the reasoning across requests.
type (
	inMessage struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}
	inText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	inRefusal struct {
		Type    string `json:"type"`
		Refusal string `json:"refusal"`
	}
	inReasoning struct {
		Type             string   `json:"type"`
		Summary          []inText `json:"summary"`
		EncryptedContent string   `json:"encrypted_content"`
	}
	inCall struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	inCallOutput struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
)

// includeEncrypted asks for the reasoning items' encrypted content, the
// only way to carry reasoning across stateless (store=false) requests.
const includeEncrypted = "reasoning.encrypted_content"

// body builds the request for the conversation st (its last items being the
// new turn) and the request's options.
func (c *client) body(st *state, req Request) ([]byte, error) {
	r := apiRequest{
		Model:           st.Model,
		Instructions:    st.Instructions,
		Input:           make([]any, 0, len(st.Items)),
		MaxOutputTokens: req.MaxTokens,
		Reasoning:       &apiReasoning{Effort: req.ReasoningEffort, Summary: "auto"},
		Store:           false,
		Stream:          true,
		Include:         []string{includeEncrypted},
	}
	if req.Temperature != nil && !c.noTemperature[st.Model] {
		r.Temperature = req.Temperature
	}
	for _, t := range st.Tools {
		r.Tools = append(r.Tools, apiTool{Type: "function", Name: alias(t.Name), Description: t.Description,
			Parameters: json.RawMessage(t.Schema), Strict: false})
	}
	for _, it := range st.Items {
		switch it.Kind {
		case kindUser:
			r.Input = append(r.Input, inMessage{Type: "message", Role: "user", Content: []any{inText{Type: "input_text", Text: it.Text}}})
		case kindAssistant:
			var content []any
			if it.Text != "" {
				content = append(content, inText{Type: "output_text", Text: it.Text})
			}
			if it.Refusal != "" {
				content = append(content, inRefusal{Type: "refusal", Refusal: it.Refusal})
			}
			r.Input = append(r.Input, inMessage{Type: "message", Role: "assistant", Content: content})
		case kindReasoning:
			summary := make([]inText, 0, len(it.Summary))
			for _, s := range it.Summary {
				summary = append(summary, inText{Type: "summary_text", Text: s})
			}
			r.Input = append(r.Input, inReasoning{Type: "reasoning", Summary: summary, EncryptedContent: it.Encrypted})
		case kindCall:
			r.Input = append(r.Input, inCall{Type: "function_call", CallID: it.CallID, Name: alias(it.Name), Arguments: it.Arguments})
		case kindCallOutput:
			r.Input = append(r.Input, inCallOutput{Type: "function_call_output", CallID: it.CallID, Output: it.Output})
		}
	}
	return json.Marshal(r)
}
