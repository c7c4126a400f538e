package gemini

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

func newLineParser() cli.LineParser { return newParser() }

// TestLineSameAsEvent checks Line against Event on every capture, fuzz
// seed and golden case.
func TestLineSameAsEvent(t *testing.T) {
	conformance.CorpusSameAsEvent(t, Name, 12, map[string]func() cli.LineParser{"": newLineParser})
}

// TestLineTakesCommonShapes: the fast path really takes the events a run
// is mostly made of, and leaves the rare ones.
func TestLineTakesCommonShapes(t *testing.T) {
	conformance.LineTakes(t, newLineParser, map[string]bool{
		`{"type":"init","timestamp":"t","session_id":"f9f8d0ce-8f8e-497e-b1f8-e1b327e8af6e","model":"gemini-2.5-flash"}`:                                                  true,
		`{"type":"message","role":"user","content":"What is the answer?"}`:                                                                                                true,
		`{"type":"message","role":"assistant","content":"The answ","delta":true}`:                                                                                         true,
		`{"type":"tool_use","tool_name":"run_shell_command","tool_id":"t1","parameters":{"command":"ls"}}`:                                                                true,
		`{"type":"tool_result","tool_id":"t1","status":"error","error":{"type":"x","message":"denied"}}`:                                                                  true,
		`{"type":"result","status":"success","stats":{"total_tokens":8348,"input_tokens":8336,"output_tokens":12,"cached":0,"input":8336,"duration_ms":210,"models":{}}}`: true,
		`{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: quota]"}}`:                                                                    true,
		`{"session_id":"f8799b92-dd97-4235-bfeb-d8ee9e98b87c","response":"The answer is 42.","stats":{}}`:                                                                 true,
		`{"type":"error","severity":"warning","message":"loop"}`:                                                                                                          false,
		`{"type":"message","role":"system","content":"x"}`:                                                                                                                false,
		`{"type":"result","status":"success","stats":{"input":-1}}`:                                                                                                       false,
		`{"type":"tool_use","tool_name":"x","tool_id":"t","parameters":[1]}`:                                                                                              false,
	})
}

// FuzzGeminiLine checks Line against Event (conformance.SameAsEvent) on
// the parser's seeds and what the fuzzer makes of them.
//
//	go test -run '^$' -fuzz '^FuzzGeminiLine$' -fuzztime 60s ./pkg/adapter/cli/gemini
func FuzzGeminiLine(f *testing.F) {
	conformance.FuzzLine(f, Name, "*", newLineParser, nil)
}

// TestLineTakesRecordedRuns: the fast path takes every object of the
// captures whose CLI exited 0.
func TestLineTakesRecordedRuns(t *testing.T) { conformance.LineTakesCaptures(t, Name, newLineParser) }
