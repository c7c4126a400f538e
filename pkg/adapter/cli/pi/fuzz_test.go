package pi

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// FuzzPiParser feeds every line of the input that is a JSON object to one
// fresh parser, as the transport would (conformance.FeedEvents), and
// checks the stream rules (conformance.Check) and that End never fails.
// The seed corpus is testdata/fuzz/pi: the real transcripts and the
// synthetic golden cases.
func FuzzPiParser(f *testing.F) {
	for _, b := range conformance.Seeds(f, Name, "*.ndjson") {
		f.Add(b, uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, maxAttempts uint8) {
		fed := conformance.FeedEvents(NewParser(adapter.Call{MaxAttempts: int(maxAttempts % 8)}), data, nil)
		for _, p := range conformance.CheckParsed(Capabilities, fed.Chunks, fed.Err) {
			t.Errorf("stream rule: %s", p)
		}
		if fed.AtEnd && fed.Err != nil {
			t.Fatalf("End: %v", fed.Err)
		}
	})
}
