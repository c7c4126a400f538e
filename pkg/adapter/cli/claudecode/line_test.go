package claudecode_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

func newLineParser() cli.LineParser { return claudecode.NewParser() }

// TestLineSameAsEvent checks Line against Event on every capture, fuzz
// seed and golden case.
func TestLineSameAsEvent(t *testing.T) {
	conformance.CorpusSameAsEvent(t, claudecode.Name, 5, map[string]func() cli.LineParser{"": newLineParser})
}

// TestLineTakesCommonShapes: the fast path really takes the events a run
// is mostly made of.
func TestLineTakesCommonShapes(t *testing.T) {
	for _, line := range []string{
		`{"type":"assistant","message":{"id":"msg_1","model":"m","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},"session_id":"b0b0b0b0-0000-4000-8000-000000000001"}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok","is_error":false}]}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"h"}}}`,
		`{"type":"rate_limit_event"}`,
	} {
		if _, handled, err := claudecode.NewParser().Line([]byte(line)); !handled || err != nil {
			t.Errorf("Line(%s) = handled %t, %v", line, handled, err)
		}
	}
}

// FuzzClaudeLine checks Line against Event (conformance.SameAsEvent) on
// the parser's seeds and what the fuzzer makes of them.
func FuzzClaudeLine(f *testing.F) {
	conformance.FuzzLine(f, claudecode.Name, "*.ndjson", newLineParser, nil)
}
