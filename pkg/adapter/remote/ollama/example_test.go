package ollama_test

import (
	"encoding/json"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/ollama"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func ExampleParser() {
	lines := []string{
		`{"model":"qwen3:8b","message":{"role":"assistant","content":"","thinking":"Look it up."},"done":false}`,
		`{"model":"qwen3:8b","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_7fj2k1qa","function":{"index":0,"name":"get_weather","arguments":{"city":"Toronto"}}}]},"done":false}`,
		`{"model":"qwen3:8b","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":188,"eval_count":27}`,
	}
	p := ollama.NewParser()
	var chunks []wire.Chunk
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			panic(err)
		}
		cs, err := p.Line(m)
		if err != nil {
			panic(err)
		}
		chunks = append(chunks, cs...)
	}
	end, err := p.End()
	if err != nil {
		panic(err)
	}
	for _, c := range append(chunks, end...) {
		switch c.Type {
		case wire.ChunkToolUse:
			fmt.Printf("%s %s %s %v\n", c.Type, c.ToolID, c.ToolName, c.ToolInput)
		case wire.ChunkResult:
			fmt.Printf("%s %s in=%d out=%d\n", c.Type, c.Metadata.StopReason, c.Metadata.Usage.InputTokens, c.Metadata.Usage.OutputTokens)
		default:
			fmt.Printf("%s %q\n", c.Type, c.Content)
		}
	}
	// Output:
	// thinking "Look it up."
	// tool_use call_7fj2k1qa get_weather map[city:Toronto]
	// result tool_use in=188 out=27
}

func ExampleDecode() {
	b, _ := wire.Marshal(map[string]any{
		"tool_results": []any{map[string]any{"tool_id": "call_7fj2k1qa", "output": map[string]any{"temp_c": 21}}},
		"max_tokens":   256,
	})
	req, err := ollama.Decode(b)
	if err != nil {
		panic(err)
	}
	fmt.Println(req.ToolResults[0].ToolID, req.MaxTokens)

	_, err = ollama.Decode(mustMarshal(map[string]any{"system": "Be brief.", "stream": false}))
	fmt.Println(err)
	// Output:
	// call_7fj2k1qa 256
	// AgenticRequestValidationError: ollama request: field "prompt": required, a non-empty string, unless tool_results is given; unknown field "stream"
}

func mustMarshal(v any) []byte {
	b, err := wire.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
