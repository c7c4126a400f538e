package claudecode_test

import (
	"encoding/json"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func ExampleInvoke() {
	b, _ := wire.Marshal(map[string]any{
		"prompt":        "-1 + 2 = ?",
		"allowed_tools": []string{"Bash"},
		"resume":        "9fb97433-4d57-4a95-a009-78c8b500afd5",
	})
	req, err := claudecode.Decode(b)
	if err != nil {
		panic(err)
	}
	inv, err := claudecode.Invoke(req, adapter.Call{Model: "claude-sonnet-4-5", MaxAttempts: 3}, "/work")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", inv.Args)
	fmt.Println(inv.Env)
	// Output:
	// ["-p" "--output-format" "stream-json" "--verbose" "--model" "claude-sonnet-4-5" "--allowedTools" "Bash" "--resume" "9fb97433-4d57-4a95-a009-78c8b500afd5" "--" "-1 + 2 = ?"]
	// map[CLAUDE_CODE_MAX_RETRIES:2]
}

func ExampleParser() {
	lines := []string{
		`{"type":"system","subtype":"init","session_id":"9fb97433-4d57-4a95-a009-78c8b500afd5","model":"claude-sonnet-4-5"}`,
		`{"type":"assistant","message":{"id":"msg_1","model":"claude-sonnet-4-5","content":[{"type":"text","text":"The answer is 42."}]},"session_id":"9fb97433-4d57-4a95-a009-78c8b500afd5"}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"The answer is 42.","num_turns":1,"total_cost_usd":0.08835,"usage":{"input_tokens":29350,"output_tokens":20},"session_id":"9fb97433-4d57-4a95-a009-78c8b500afd5"}`,
	}
	p := claudecode.NewParser()
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			panic(err)
		}
		chunks, err := p.Event(ev)
		if err != nil {
			panic(err)
		}
		for _, c := range chunks {
			fmt.Printf("%s %q session=%s\n", c.Type, c.Content, c.Metadata.SessionID)
		}
	}
	// Output:
	// system "" session=9fb97433-4d57-4a95-a009-78c8b500afd5
	// text "The answer is 42." session=
	// result "" session=9fb97433-4d57-4a95-a009-78c8b500afd5
}
