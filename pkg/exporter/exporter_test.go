package exporter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exporter"
	"github.com/agentmesh/agentmesh/pkg/exporter/exportertest"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	js      jetstream.JetStream
	x       *exporter.Exporter
	consent *consent.Store
	records *exports.Records
	store   trajstore.Store
}

func setup(t *testing.T) fixture {
	t.Helper()
	x := exportertest.Start(t)
	return fixture{js: x.JS, x: x.Exporter, consent: x.Consent, records: x.Records, store: x.Store}
}

// grant grants alice of acme export consent and returns the grant.
func (f fixture) grant(t *testing.T) consent.State {
	t.Helper()
	g, err := f.consent.Grant(context.Background(), "acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// publish stores the events of run with the given seqs (a terminal status
// last) and returns its ended, consented record.
func (f fixture) publish(t *testing.T, runID string, rev uint64, seqs ...uint64) wire.RunRecord {
	t.Helper()
	now := time.Now()
	for i, seq := range seqs {
		ev := wire.Event{V: wire.Version, RunID: runID, Seq: seq, TS: now.UnixNano(), Kind: wire.KindChunk,
			Chunk: &wire.Chunk{Type: wire.ChunkText, Content: "hello"}}
		if i == len(seqs)-1 {
			ev.Kind, ev.Chunk, ev.Status = wire.KindStatus, nil, &wire.Status{State: wire.StateSucceeded}
		}
		b, err := wire.Marshal(&ev)
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(subject.Names{}.Events("acme", runID))
		msg.Data = b
		if _, err := f.js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	return wire.RunRecord{V: wire.Version, RunID: runID, Tenant: "acme", Principal: "alice", Profile: "fixture", Adapter: "fixture",
		RequestDigest: "d", Pin: &wire.Pin{Provider: "fixture", Model: "fixture-1", ProfileHash: "h", RegistryVersion: "r"},
		State: wire.StateSucceeded, Consent: true, ConsentRev: rev, Created: now.UnixMilli(), Updated: now.UnixMilli()}
}

// TestExportOnce: exporting a run again (a redelivery, a second exporter)
// gives one record and one object.
func TestExportOnce(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	g := f.grant(t)
	rec := f.publish(t, "r1", g.Rev, 1, 2, 3)
	if out, err := f.x.Export(ctx, rec); err != nil || out != exporter.Exported {
		t.Fatalf("first export: %s, %v", out, err)
	}
	first, err := f.records.Get(ctx, "acme", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := f.x.Export(ctx, rec); err != nil || out != exporter.Duplicate {
		t.Fatalf("second export: %s, %v; want duplicate", out, err)
	}
	again, err := f.records.Get(ctx, "acme", "r1")
	if err != nil || again.Rev != first.Rev {
		t.Fatalf("record after the second export: %+v, %v; want it untouched", again, err)
	}
}

// TestExportIncomplete: a run whose first events aged out is counted
// incomplete and not exported, not exported half.
func TestExportIncomplete(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	g := f.grant(t)
	for name, seqs := range map[string][]uint64{"aged": {3, 4, 5}, "gap": {1, 2, 4}} {
		rec := f.publish(t, name, g.Rev, seqs...)
		if out, err := f.x.Export(ctx, rec); err != nil || out != exporter.Incomplete {
			t.Errorf("%s: %s, %v; want incomplete", name, out, err)
		}
		if _, err := f.records.Get(ctx, "acme", name); !errors.Is(err, exports.ErrNotFound) {
			t.Errorf("%s: export record %v; want none", name, err)
		}
	}
}

// TestExportWithdrawnBefore: a withdrawal after the run's grant and
// before its export means no export.
func TestExportWithdrawnBefore(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	g := f.grant(t)
	rec := f.publish(t, "r1", g.Rev, 1, 2)
	if _, err := f.consent.Withdraw(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	f.grant(t)
	if out, err := f.x.Export(ctx, rec); err != nil || out != exporter.Withdrawn {
		t.Fatalf("export: %s, %v; want withdrawn", out, err)
	}
	if _, err := f.records.Get(ctx, "acme", "r1"); !errors.Is(err, exports.ErrNotFound) {
		t.Fatalf("export record %v; want none", err)
	}
}

// TestExportUnpacksBatches: a run whose chunks were stored in batches,
// one of them retried and stored late and one overlapping another
// writer's, is exported one chunk per seq, each seq once, the first
// stored of it kept.
func TestExportUnpacksBatches(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	g := f.grant(t)
	const runID = "batched"
	now := time.Now()
	store := func(ev wire.Event) {
		t.Helper()
		ev.V, ev.RunID, ev.TS = wire.Version, runID, now.UnixNano()
		b, err := wire.Marshal(&ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.js.Publish(ctx, subject.Names{}.Events("acme", runID), b); err != nil {
			t.Fatal(err)
		}
	}
	text := func(tag string, seqs ...int) []wire.Chunk {
		var out []wire.Chunk
		for _, s := range seqs {
			out = append(out, wire.Chunk{Type: wire.ChunkText, Content: fmt.Sprint(tag, s)})
		}
		return out
	}
	store(wire.Event{Seq: 1, Kind: wire.KindStatus, Status: &wire.Status{State: wire.StateRunning}})
	store(wire.Event{Seq: 4, Kind: wire.KindChunks, Last: 5, Chunks: text("a", 4, 5)})
	store(wire.Event{Seq: 2, Kind: wire.KindChunks, Last: 3, Chunks: text("a", 2, 3)})
	store(wire.Event{Seq: 5, Kind: wire.KindChunks, Last: 7, Chunks: text("b", 5, 6, 7)})
	store(wire.Event{Seq: 8, Kind: wire.KindStatus, Status: &wire.Status{State: wire.StateSucceeded}})
	rec := wire.RunRecord{V: wire.Version, RunID: runID, Tenant: "acme", Principal: "alice", Profile: "fixture", Adapter: "fixture",
		RequestDigest: "d", Pin: &wire.Pin{Provider: "fixture", Model: "fixture-1", ProfileHash: "h", RegistryVersion: "r"},
		State: wire.StateSucceeded, Consent: true, ConsentRev: g.Rev, Created: now.UnixMilli(), Updated: now.UnixMilli()}
	if out, err := f.x.Export(ctx, rec); err != nil || out != exporter.Exported {
		t.Fatalf("export: %s, %v", out, err)
	}
	e, err := f.records.Get(ctx, "acme", runID)
	if err != nil {
		t.Fatal(err)
	}
	data, err := f.store.Get(ctx, e.Record.Object)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trajectory.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range tr.Chunks {
		got = append(got, fmt.Sprintf("%d %s", c.Seq, c.Content))
	}
	if s, want := strings.Join(got, ", "), "2 a2, 3 a3, 4 a4, 5 a5, 6 b6, 7 b7"; s != want {
		t.Errorf("exported chunks %s, want %s", s, want)
	}
}
