package claudecode_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// FuzzClaudeParser splits arbitrary bytes into lines and feeds every line
// that is a JSON object (or, for the last line, what TailRepair makes of
// it) to a fresh parser, then End (conformance.FeedEvents). It asserts no
// panic and the stream rules (conformance.CheckParsed): only valid chunk
// types, error chunks with is_error and a message, nothing after an error
// chunk, at most one result and nothing but an error after it, and errors
// that are typed wire errors.
func FuzzClaudeParser(f *testing.F) {
	for _, b := range conformance.Seeds(f, claudecode.Name, "*.ndjson") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fed := conformance.FeedEvents(claudecode.NewParser(), data, claudecode.TailRepair)
		for _, p := range conformance.CheckParsed(claudecode.Capabilities, fed.Chunks, fed.Err) {
			t.Errorf("stream rule: %s", p)
		}
	})
}
