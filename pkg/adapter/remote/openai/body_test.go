package openai_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
)

// TestRequestBody checks the provider request a first run sends: the
// pinned model, instructions, the tool under its alias with a non-strict
// schema, the options, store=false with encrypted reasoning, streaming,
// and no previous_response_id; temperature is left out for a model the
// options mark as rejecting it.
func TestRequestBody(t *testing.T) {
	srv := conformance.ReplayServer(t, openai.Name)
	fields := map[string]any{
		"prompt": "Read the README.", "system": "Be brief.", "tools": []any{fsRead(1 << 20)},
		"max_tokens": 2048, "temperature": 0.2, "reasoning_effort": "high",
	}
	tests := []struct {
		name     string
		opts     openai.Options
		wantTemp any
	}{
		{name: "temperature_sent", opts: openai.Options{NoTemperatureModels: []string{"gpt-4.1"}}, wantTemp: 0.2},
		{name: "temperature_omitted", opts: openai.Options{NoTemperatureModels: []string{model}}, wantTemp: nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAdapter(t, srv, "tool-call", tt.opts)
			if _, err := collect(t, a, conformance.Call(t, a, model, fields)); err != nil {
				t.Fatal(err)
			}
			reqs := requestsOf(srv, "tool-call")
			if len(reqs) != i+1 {
				t.Fatalf("%d requests", len(reqs))
			}
			var body map[string]any
			if err := json.Unmarshal(reqs[i].Body, &body); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{
				"model":        model,
				"instructions": "Be brief.",
				"input": []any{map[string]any{"type": "message", "role": "user",
					"content": []any{map[string]any{"type": "input_text", "text": "Read the README."}}}},
				"tools": []any{map[string]any{
					"type": "function", "name": "fs_read", "description": "Read a file of the workspace", "strict": false,
					"parameters": map[string]any{
						"type": "object",
						"properties": map[string]any{
							"path":      map[string]any{"type": "string"},
							"max_bytes": map[string]any{"type": "integer", "minimum": 1.0, "maximum": float64(1 << 20)},
						},
						"required":             []any{"path"},
						"additionalProperties": false,
					},
				}},
				"max_output_tokens": 2048.0,
				"reasoning":         map[string]any{"effort": "high", "summary": "auto"},
				"store":             false,
				"stream":            true,
				"include":           []any{"reasoning.encrypted_content"},
			}
			if tt.wantTemp != nil {
				want["temperature"] = tt.wantTemp
			}
			if !reflect.DeepEqual(body, want) {
				got, _ := json.MarshalIndent(body, "", " ")
				t.Errorf("request body:\n%s", got)
			}
		})
	}
}
