package codex

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// lineParsers are the parsers conformance.SameAsEvent compares: a new
// thread, and a resumed one with a known baseline.
var lineParsers = map[string]func() cli.LineParser{
	"new":     func() cli.LineParser { return NewParser("m", "") },
	"resumed": func() cli.LineParser { return resumedParser() },
}

func resumedParser() *Parser {
	p := NewParser("m", "01a22a8b-564f-7be0-9f56-beadbebf0082")
	p.baseline = &counts{input: 10, output: 1}
	return p
}

// TestLineSameAsEvent checks Line against Event on every capture, fuzz
// seed and golden case.
func TestLineSameAsEvent(t *testing.T) {
	conformance.CorpusSameAsEvent(t, Name, 12, lineParsers)
}

// TestLineTakesCommonShapes: the fast path really takes the events a run
// is mostly made of, and leaves the rare ones.
func TestLineTakesCommonShapes(t *testing.T) {
	conformance.LineTakes(t, lineParsers["new"], map[string]bool{
		`{"type":"thread.started","thread_id":"01a22a8b-564f-7be0-9f56-beadbebf0082"}`: true,
		`{"type":"turn.started"}`: true,
		`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"hi"}}`:                                                                     true,
		`{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"hm"}}`:                                                                         true,
		`{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}`: true,
		`{"type":"item.completed","item":{"id":"item_1","type":"error","message":"warning"}}`:                                                                     true,
		`{"type":"turn.completed","usage":{"input_tokens":9835,"cached_input_tokens":0,"output_tokens":20}}`:                                                      true,
		`{"type":"error","message":"Reconnecting... 1/5"}`:                                                                                                        true,
		`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":null}}`:                                                                     false,
		`{"type":"item.completed","item":{"id":"item_0","type":"file_change","changes":[]}}`:                                                                      false,
		`{"type":"turn.completed","usage":{"input_tokens":-1}}`:                                                                                                   false,
		`{"type":"turn.failed","error":{"message":"boom"}}`:                                                                                                       false,
		`{"type":null}`: false,
	})
}

// FuzzCodexLine checks Line against Event (conformance.SameAsEvent) on
// the parser's seeds and what the fuzzer makes of them.
//
//	go test -run '^$' -fuzz '^FuzzCodexLine$' -fuzztime 60s ./pkg/adapter/cli/codex
func FuzzCodexLine(f *testing.F) {
	conformance.FuzzLine(f, Name, "*", lineParsers["new"], lineParsers["resumed"])
}

// TestLineTakesRecordedRuns: the fast path takes every object of the
// captures whose CLI exited 0.
func TestLineTakesRecordedRuns(t *testing.T) {
	conformance.LineTakesCaptures(t, Name, lineParsers["new"])
}
