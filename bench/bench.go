package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrInvalidConfig is returned for a Workload or Probe that cannot run.
var ErrInvalidConfig = errors.New("invalid bench config")

// Workload is the shape of a throughput measurement: Runs runs of Chunks
// text chunks each, all at once.
type Workload struct {
	// Runs is how many runs go at once (for the raw baseline: how many
	// publisher/consumer pairs, each on its own subject).
	Runs int
	// Chunks is the number of text chunks of one run (raw: messages of one
	// pair).
	Chunks int
	// ChunkBytes is the length of each chunk's text content.
	ChunkBytes int
}

func (w Workload) validate() error {
	if w.Runs < 1 || w.Chunks < 1 || w.ChunkBytes < 1 {
		return fmt.Errorf("%w: workload needs runs, chunks and chunk bytes > 0, got %+v", ErrInvalidConfig, w)
	}
	return nil
}

// Probe is the shape of a latency measurement: Warmup unmeasured samples,
// then Samples measured ones, one after the other, each carrying one text
// chunk of ChunkBytes.
type Probe struct {
	Samples    int
	Warmup     int
	ChunkBytes int
}

func (p Probe) validate() error {
	if p.Samples < 1 || p.Warmup < 0 || p.ChunkBytes < 1 {
		return fmt.Errorf("%w: probe needs samples and chunk bytes > 0 and warmup >= 0, got %+v", ErrInvalidConfig, p)
	}
	return nil
}

// Throughput is a count of items delivered end to end in an elapsed time.
type Throughput struct {
	Items   int
	Elapsed time.Duration
}

// Add returns the sum of t and u, for accumulating several batches.
func (t Throughput) Add(u Throughput) Throughput {
	return Throughput{Items: t.Items + u.Items, Elapsed: t.Elapsed + u.Elapsed}
}

// PerSecond returns items per second, or 0 when no time elapsed.
func (t Throughput) PerSecond() float64 {
	if t.Elapsed <= 0 {
		return 0
	}
	return float64(t.Items) / t.Elapsed.Seconds()
}

// Latencies are the samples of one latency, in the order measured.
type Latencies []time.Duration

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of l,
// or 0 for no samples. It does not reorder l.
func (l Latencies) Percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Micros returns d in microseconds, the unit the benchmarks report.
func Micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// ChunkEvent returns an encoded chunk event as the mesh publishes it for the
// last chunk of a run of w: a fresh run id, a current timestamp and the seq
// after accepted, routed and running. The raw baselines publish exactly
// these bytes, so both sides move messages of the same size. (The mesh adds a
// Nats-Msg-Id header to each event, which the baseline does not: that
// header and its deduplication are part of what the mesh costs.)
func ChunkEvent(w Workload) ([]byte, error) {
	c := textChunk(w.ChunkBytes)
	return wire.Marshal(&wire.Event{
		V: wire.Version, RunID: client.NewRunID(), Seq: uint64(w.Chunks) + 3,
		TS: time.Now().UnixNano(), Kind: wire.KindChunk, Chunk: &c,
	})
}

// textChunk is a text delta of n bytes of fixed, printable content.
func textChunk(n int) wire.Chunk {
	const pattern = "the quick brown fox jumps over the lazy dog; "
	content := strings.Repeat(pattern, n/len(pattern)+1)[:n]
	return wire.Chunk{Type: wire.ChunkText, Content: content, IsDelta: true}
}

// writeScript writes a fixture script of w.Chunks text chunks into dir, if
// it is not there yet, and returns its name.
func writeScript(dir string, w Workload) (string, error) {
	name := fmt.Sprintf("text-%d-%d", w.Chunks, w.ChunkBytes)
	file := filepath.Join(dir, name+".json")
	if _, err := os.Stat(file); err == nil {
		return name, nil
	}
	chunks := make([]wire.Chunk, w.Chunks)
	for i := range chunks {
		chunks[i] = textChunk(w.ChunkBytes)
	}
	b, err := json.Marshal(struct {
		Chunks []wire.Chunk `json:"chunks"`
	}{chunks})
	if err != nil {
		return "", fmt.Errorf("encode script %s: %w", name, err)
	}
	// Write then rename, so the fixture adapter never reads half a script.
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return "", fmt.Errorf("write script %s: %w", name, err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return "", fmt.Errorf("write script %s: %w", name, err)
	}
	return name, nil
}

// reapEvery is how many followed runs a latency measurement lets
// accumulate before reaping.
const reapEvery = 250

// reap deletes the ephemeral consumers left on stream; durable ones, and a
// client.TenantFollower's (its filter a tenant's wildcard), are kept. It
// runs between measurements, never inside a timed section.
//
// Why: Raw follows through ordered consumers, and releasing one
// (MessagesContext.Stop) only stops it on the client. The server keeps it
// until its inactive threshold (5m, set by nats.go), and nats-server
// counts it against the stream's consumer limit, 1,000 by default: without
// reaping, the 1,001st lane within five minutes would fail with "maximum
// consumers limit reached" (err_code 10026). client.Events deletes its own
// consumer when released (and asks for a 5s inactive threshold), so the
// mesh side leaves little or nothing to reap; it is reaped all the same,
// so that both sides end alike.
func reap(ctx context.Context, js jetstream.JetStream, stream string) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("reap consumers of %s: %w", stream, err)
	}
	infos := st.ListConsumers(ctx)
	for info := range infos.Info() {
		if info.Config.Durable != "" || strings.HasSuffix(info.Config.FilterSubject, ".>") {
			continue // (a durable, or a client.TenantFollower's: in use)
		}
		if err := st.DeleteConsumer(ctx, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("reap consumer %s of %s: %w", info.Name, stream, err)
		}
	}
	if err := infos.Err(); err != nil {
		return fmt.Errorf("reap consumers of %s: %w", stream, err)
	}
	return nil
}
