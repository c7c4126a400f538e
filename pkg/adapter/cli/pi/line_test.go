package pi

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// piParsers are the parsers conformance.SameAsEvent compares: the default
// attempt policy and a single attempt.
var piParsers = map[string]func() cli.LineParser{
	"default": func() cli.LineParser { return NewParser(adapter.Call{}) },
	"one":     func() cli.LineParser { return NewParser(adapter.Call{MaxAttempts: 1}) },
}

// TestLineSameAsEvent checks Line against Event on every capture, fuzz
// seed and golden case.
func TestLineSameAsEvent(t *testing.T) {
	conformance.CorpusSameAsEvent(t, Name, 12, piParsers)
}

// TestLineTakesCommonShapes: the fast path really takes the events a run
// is mostly made of, and leaves the rare ones.
func TestLineTakesCommonShapes(t *testing.T) {
	conformance.LineTakes(t, piParsers["default"], map[string]bool{
		`{"type":"session","version":3,"id":"01a22a8d-7f7d-7689-a314-843817dab2e1","cwd":"/w"}`:                                                                                                                          true,
		`{"type":"turn_end","message":{"role":"assistant","content":[{"type":"text","text":"x"}]},"toolResults":[]}`:                                                                                                     true,
		`{"type":"message_start","message":{"role":"assistant","content":[],"model":"m","usage":{"input":1,"cost":{"total":0.5}}}}`:                                                                                      true,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"The answ","partial":{"role":"assistant"}},"message":{"role":"assistant"}}`:                                      true,
		`{"type":"message_update","assistantMessageEvent":{"type":"thinking_end","contentIndex":0,"content":"[Reasoning redacted]","partial":{"content":[{"type":"thinking","redacted":true}]}}}`:                        true,
		`{"type":"message_update","assistantMessageEvent":{"type":"toolcall_end","contentIndex":1,"toolCall":{"type":"toolCall","id":"t1","name":"bash","arguments":{"command":"ls"}}}}`:                                 true,
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"hi"},{"type":"toolCall","id":"t1","name":"bash","arguments":{}}],"usage":{"input":3,"output":1},"stopReason":"toolUse"}}`: true,
		`{"type":"message_end","message":{"role":"toolResult","toolCallId":"t1","toolName":"bash","content":[{"type":"text","text":"ok"}],"isError":false}}`:                                                             true,
		`{"type":"tool_execution_start","toolCallId":"t1","toolName":"bash","args":{"command":"ls"}}`:                                                                                                                    true,
		`{"type":"tool_execution_end","toolCallId":"t1","toolName":"bash","result":{"content":[{"type":"image","mimeType":"image/png"}]},"isError":true}`:                                                                true,
		`{"type":"auto_retry_start","attempt":1,"errorMessage":"429 slow down"}`:                                                                                                                                         true,
		`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"500 boom"}`:                                                                                                                                  true,
		`{"type":"compaction_end","willRetry":true}`:                                                             true,
		`{"type":"auto_retry_end","success":null}`:                                                               false,
		`{"type":"auto_retry_start","attempt":"1"}`:                                                              false,
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"image"}]}}`:                     false,
		`{"type":"message_end","message":{"role":"assistant","usage":{"input":-1}}}`:                             false,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0.5,"delta":"x"}}`: false,
	})
}

// FuzzPiLine checks Line against Event (conformance.SameAsEvent) on the
// parser's seeds and what the fuzzer makes of them.
//
//	go test -run '^$' -fuzz '^FuzzPiLine$' -fuzztime 60s ./pkg/adapter/cli/pi
func FuzzPiLine(f *testing.F) {
	conformance.FuzzLine(f, Name, "*", piParsers["default"], piParsers["one"])
}

// TestLineTakesRecordedRuns: the fast path takes every object of the
// captures whose CLI exited 0.
func TestLineTakesRecordedRuns(t *testing.T) {
	conformance.LineTakesCaptures(t, Name, piParsers["default"])
}
