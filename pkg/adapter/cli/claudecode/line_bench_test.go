package claudecode_test

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
)

// BenchmarkLine frames and parses a recorded transcript (S1) the way the
// adapter does: ndjson.Decoder, then cli.Feed through a fresh parser.
func BenchmarkLine(b *testing.B) {
	data, err := os.ReadFile(conformance.Testdata(b, "cli", claudecode.Name, "S1.stdout.ndjson"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		p := claudecode.NewParser()
		dec := ndjson.NewDecoder(bytes.NewReader(data))
		for {
			line, err := dec.NextBytes()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if _, err := cli.Feed(p, line); err != nil {
				b.Fatal(err)
			}
		}
	}
}
