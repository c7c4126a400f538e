package bench_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exporter"
	"github.com/agentmesh/agentmesh/pkg/exporter/exportertest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// exportChunks is the size of the run BenchmarkExport exports.
const exportChunks = 10_000

// BenchmarkExport reports the latency of exporting one ended run of
// 10,000 chunks (read its events from seq 1, build and redact the
// trajectory, store it in the object store, write its record), the
// latency of reading the same events with a raw ephemeral consumer (the
// baseline, measured in the same run), and export/raw-read.
func BenchmarkExport(b *testing.B) {
	f := exportertest.Start(b)
	ctx := context.Background()
	js, names, x, records := f.JS, subject.Names{}, f.Exporter, f.Records
	g, err := f.Consent.Grant(ctx, "acme", "alice")
	if err != nil {
		b.Fatal(err)
	}
	rec, size := publishRun(b, js, names, g.Rev)

	var export, read time.Duration
	for b.Loop() {
		start := time.Now()
		if out, err := x.Export(ctx, rec); err != nil || out != exporter.Exported {
			b.Fatalf("export: %s, %v", out, err)
		}
		export += time.Since(start)

		start = time.Now()
		if n := rawRead(b, js, names); n != exportChunks+4 {
			b.Fatalf("raw read %d events, want %d", n, exportChunks+4)
		}
		read += time.Since(start)

		b.StopTimer()
		e, err := records.Get(ctx, "acme", rec.RunID)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := records.Remove(ctx, f.Store, e); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(export.Milliseconds())/n, "export-ms")
	b.ReportMetric(float64(read.Milliseconds())/n, "raw-read-ms")
	b.ReportMetric(float64(export)/float64(read), "export/raw-read")
	b.ReportMetric(float64(size)/1e6, "events-MB")
}

// publishRun stores an ended, consented run of exportChunks text chunks
// (with a secret in every hundredth) and returns its record and the bytes
// of its events.
func publishRun(b *testing.B, js jetstream.JetStream, names subject.Names, consentRev uint64) (wire.RunRecord, int) {
	b.Helper()
	const runID = "bench-export"
	now := time.Now()
	rec := wire.RunRecord{V: wire.Version, RunID: runID, Tenant: "acme", Principal: "alice", Profile: "fixture", Adapter: "fixture",
		RequestDigest: "x", Pin: &wire.Pin{Provider: "fixture", Model: "fixture-1", ProfileHash: "h", RegistryVersion: "r"},
		State: wire.StateSucceeded, Consent: true, ConsentRev: consentRev,
		Created: now.UnixMilli(), Updated: now.UnixMilli()}
	var evs []wire.Event
	add := func(ev wire.Event) {
		ev.V, ev.RunID, ev.Seq, ev.TS = wire.Version, runID, uint64(len(evs)+1), now.UnixNano()
		evs = append(evs, ev)
	}
	for _, st := range []wire.State{wire.StateAccepted, wire.StateRouted, wire.StateRunning} {
		add(wire.Event{Kind: wire.KindStatus, Status: &wire.Status{State: st}})
	}
	text := strings.Repeat("the quick brown fox jumps over the lazy dog ", 2)
	for i := range exportChunks {
		content := text
		if i%100 == 0 {
			content += "Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543v2"
		}
		add(wire.Event{Kind: wire.KindChunk, Chunk: &wire.Chunk{Type: wire.ChunkText, Content: content, IsDelta: true}})
	}
	add(wire.Event{Kind: wire.KindStatus, Status: &wire.Status{State: wire.StateSucceeded, Summary: &wire.Summary{Chunks: exportChunks}}})
	size := 0
	var acks []jetstream.PubAckFuture
	for _, ev := range evs {
		data, err := wire.Marshal(&ev)
		if err != nil {
			b.Fatal(err)
		}
		size += len(data)
		msg := nats.NewMsg(names.Events("acme", runID))
		msg.Data = data
		msg.Header.Set(jetstream.MsgIDHeader, subject.EventMsgID("acme", runID, ev.Seq))
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			b.Fatal(err)
		}
		acks = append(acks, f)
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			b.Fatal(err)
		case <-time.After(30 * time.Second):
			b.Fatal("publish: no ack")
		}
	}
	return rec, size
}

// rawRead reads every event of the run with an ephemeral consumer, the
// way the exporter does, and decodes none: the JetStream cost alone.
func rawRead(b *testing.B, js jetstream.JetStream, names subject.Names) int {
	b.Helper()
	ctx := context.Background()
	cons, err := js.CreateConsumer(ctx, names.EventsStream(), jetstream.ConsumerConfig{
		FilterSubject: names.Events("acme", "bench-export"), AckPolicy: jetstream.AckNonePolicy,
		MemoryStorage: true, Replicas: 1, InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = js.DeleteConsumer(ctx, names.EventsStream(), cons.CachedInfo().Name) }()
	want := int(cons.CachedInfo().NumPending)
	n := 0
	for n < want {
		batch, err := cons.Fetch(min(want-n, 512), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for range batch.Messages() {
			got++
		}
		if got == 0 {
			b.Fatal(fmt.Errorf("raw read: %d of %d, then nothing", n, want))
		}
		n += got
	}
	return n
}
