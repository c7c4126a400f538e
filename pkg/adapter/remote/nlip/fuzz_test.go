package nlip_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/nlip"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// FuzzNLIPResponse feeds arbitrary bytes as an agent's answer through
// Parse and the chunk projection, as Stream does. It asserts no panic,
// errors that are typed ProviderProtocolErrors, streams that keep every
// rule of docs/contract.md §1.3, and the context never in a chunk.
func FuzzNLIPResponse(f *testing.F) {
	for _, b := range conformance.Seeds(f, nlip.Name, "*.json") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, failure, err := nlip.Parse(data)
		if err != nil {
			if !errors.Is(err, wire.ProviderProtocolError) {
				t.Fatalf("err %v (%T) is not a ProviderProtocolError", err, err)
			}
			if failure != nil {
				t.Fatalf("both an error and a failure")
			}
			return
		}
		chunks := []wire.Chunk{nlip.SystemChunk("m")}
		if failure != nil {
			chunks = append(chunks, nlip.FailureChunk(failure))
		} else {
			chunks = append(chunks, nlip.Chunks(res)...)
		}
		for _, p := range conformance.Check(nlip.Capabilities, chunks, nil, conformance.Ran) {
			t.Errorf("stream rule: %s", p)
		}
		if res.Context != "" && len(res.Context) >= 8 {
			for _, c := range chunks {
				if strings.Contains(c.Content, res.Context) && !strings.Contains(res.Content+res.InputRequired, res.Context) {
					t.Errorf("the context %q reached a chunk", res.Context)
				}
			}
		}
	})
}
