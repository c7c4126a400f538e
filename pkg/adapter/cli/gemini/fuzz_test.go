package gemini

import (
	"errors"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// FuzzGeminiParser feeds arbitrary bytes, split into lines, to a fresh
// parser: each line that parses as a JSON object is an event
// (conformance.FeedEvents). The parser must never panic, what it yields
// must keep the stream rules (conformance.CheckParsed), and its errors
// must be ProviderProtocolErrors. Seeds are testdata/fuzz/gemini.
func FuzzGeminiParser(f *testing.F) {
	for _, b := range conformance.Seeds(f, Name, "*") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fed := conformance.FeedEvents(newParser(), data, nil)
		for _, p := range conformance.CheckParsed(capabilities, fed.Chunks, fed.Err) {
			t.Errorf("stream rule: %s", p)
		}
		var we *wire.Error
		if fed.Err != nil && (!errors.As(fed.Err, &we) || we.Class != wire.ProviderProtocolError) {
			t.Fatalf("parser error %v is not a ProviderProtocolError", fed.Err)
		}
	})
}
