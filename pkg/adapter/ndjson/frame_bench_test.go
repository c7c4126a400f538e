package ndjson_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
)

// BenchmarkDecoderFraming frames 2,000 lines shaped like Claude Code's
// assistant events (546 B each, as the CLI benchmark's fake writes them).
func BenchmarkDecoderFraming(b *testing.B) {
	line := `{"type":"assistant","message":{"id":"msg_bench00000001","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
		`"content":[{"type":"text","text":"the quick brown fox jumps over the lazy dog; the quick brown fox ju"}],"stop_reason":null,"stop_sequence":null,` +
		`"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":16,"service_tier":"standard"},` +
		`"context_management":null},"parent_tool_use_id":null,"session_id":"b0b0b0b0-0000-4000-8000-000000000001","uuid":"b0b0b0b0-0000-4000-8000-000000000001"}` + "\n"
	data := []byte(strings.Repeat(line, 2000))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		dec := ndjson.NewDecoder(bytes.NewReader(data))
		for {
			if _, err := dec.NextBytes(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}
