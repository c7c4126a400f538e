package bench_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/bench"
)

// decodeSize is about how many stdout bytes each CLI's case decodes per
// iteration.
const decodeSize = 4 << 20

// BenchmarkCLIDecode measures the CLI decode path: a CLI's NDJSON stdout
// read the adapter's way (ndjson.Decoder's framing and the CLI's parser,
// Transcript.Decode) against encoding/json's Decoder into map[string]any
// over the same bytes (Transcript.DecodeMaps), in the same run, taking
// turns at going first. One case is the fake CLI's Claude Code lines
// (FakeCLI: 2,000 text chunks of 64 B a run), the others each CLI's
// recorded transcripts under testdata/cli. ns/op is the two together; the
// metrics are each one's MB/s and their ratio (decode-MB/s ÷ maps-MB/s,
// issue 11's target ≥ 3).
func BenchmarkCLIDecode(b *testing.B) {
	fake, err := bench.FakeTranscript(decodeSize/(2000*700)+1, 2000, 64)
	if err != nil {
		b.Fatal(err)
	}
	recorded, err := bench.CLITranscripts(filepath.Join(".."), decodeSize)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range append([]bench.Transcript{fake}, recorded...) {
		b.Run(t.Name, func(b *testing.B) {
			var oursT, mapsT time.Duration
			timed := func(f func() (int, error), d *time.Duration) int {
				start := time.Now()
				n, err := f()
				*d += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				return n
			}
			i := 0
			for b.Loop() {
				var chunks, values int
				if i%2 == 0 {
					chunks, values = timed(t.Decode, &oursT), timed(t.DecodeMaps, &mapsT)
				} else {
					values, chunks = timed(t.DecodeMaps, &mapsT), timed(t.Decode, &oursT)
				}
				if chunks == 0 || values == 0 {
					b.Fatalf("%d chunks from %d values", chunks, values)
				}
				i++
			}
			mb := float64(t.Bytes()) * float64(i) / 1e6
			b.ReportMetric(mb/oursT.Seconds(), "decode-MB/s")
			b.ReportMetric(mb/mapsT.Seconds(), "maps-MB/s")
			b.ReportMetric(mapsT.Seconds()/oursT.Seconds(), "ratio")
		})
	}
}

// TestCLIDecode: the decode measurement's two sides read every case
// without an error, and the adapter's way yields chunks.
func TestCLIDecode(t *testing.T) {
	fake, err := bench.FakeTranscript(2, 100, 64)
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := bench.CLITranscripts(filepath.Join(".."), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range append([]bench.Transcript{fake}, recorded...) {
		chunks, err := tr.Decode()
		if err != nil || chunks == 0 {
			t.Errorf("%s: Decode = %d chunks, %v", tr.Name, chunks, err)
		}
		values, err := tr.DecodeMaps()
		if err != nil || values == 0 {
			t.Errorf("%s: DecodeMaps = %d values, %v", tr.Name, values, err)
		}
	}
	// The fake's runs: init, 100 text chunks and a result each, as the
	// adapter sees them (the session id rides on init's system chunk).
	if chunks, _ := fake.Decode(); chunks != 2*(1+100+1) {
		t.Errorf("fake: %d chunks, want %d", chunks, 2*(1+100+1))
	}
}
