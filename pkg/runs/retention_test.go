package runs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// openWith is open with a topology of its own.
func openWith(t *testing.T, cfg topology.Config) (*runs.Store, service.Deps) {
	t.Helper()
	srv := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, srv)
	if err := topology.Ensure(context.Background(), js, cfg); err != nil {
		t.Fatal(err)
	}
	d := service.Deps{NC: nc, JS: js, Names: cfg.Names, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}
	s, err := runs.Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}

// cancel ends a routed run the way a cancel does.
func cancel(t *testing.T, s *runs.Store, tenant, id string) {
	t.Helper()
	done, err := s.EndUnowned(context.Background(), tenant, id, nil,
		func(wire.RunRecord) wire.Status { return wire.Status{State: wire.StateCancelled} })
	if err != nil || !done {
		t.Fatalf("end %s: %t, %v", id, done, err)
	}
}

// An ended run's record expires after the retention and then reads as
// not found; the record of a run that has not ended is kept.
func TestEndedRecordExpires(t *testing.T) {
	const retention = 2 * time.Second
	s, d := openWith(t, topology.Config{RunRetention: retention, EventsMaxAge: retention, EventsDuplicates: time.Second})
	if got := s.Retention(); got != retention {
		t.Fatalf("store retention = %s, want %s", got, retention)
	}
	ctx := context.Background()
	routed(t, s, "acme", "ended")
	routed(t, s, "acme", "going")
	cancel(t, s, "acme", "ended")
	endedAt := time.Now()
	if r, err := s.Get(ctx, "acme", "ended"); err != nil || r.Record.State != wire.StateCancelled {
		t.Fatalf("ended record right after the end: %s, %v", r.Record.State, err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if _, err := s.Get(ctx, "acme", "ended"); !errors.Is(err, runs.ErrNotFound) {
			return fmt.Errorf("ended record: %v, want ErrNotFound", err)
		}
		return nil
	})
	if waited := time.Since(endedAt); waited < retention-100*time.Millisecond {
		t.Fatalf("record gone after %s, before its retention %s", waited, retention)
	}
	// The run still going, written before the ended one ended, is still
	// there, and its record carries no TTL at all: it never expires.
	r, err := s.Get(ctx, "acme", "going")
	if err != nil || r.Record.State != wire.StateRouted {
		t.Fatalf("record of the run still going: %s, %v", r.Record.State, err)
	}
	st, err := d.JS.Stream(ctx, "KV_"+subject.Names{}.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.GetLastMsgForSubject(ctx, "$KV."+subject.Names{}.RunsBucket()+".acme.going")
	if err != nil {
		t.Fatal(err)
	}
	if ttl := msg.Header.Get("Nats-TTL"); ttl != "" {
		t.Fatalf("record of the run still going has Nats-TTL %q", ttl)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("runs bucket holds %d messages, want 1 (the run still going)", info.State.Msgs)
	}
	// Its id is in use; the expired one's record is gone for good.
	if _, err := s.Create(ctx, wire.RunRecord{RunID: "going", Tenant: "acme"}); !errors.Is(err, runs.ErrExists) {
		t.Fatalf("create over the kept record: %v, want ErrExists", err)
	}
}

// Dispatched lists the runs whose work is in the work stream, one read
// each, and no longer those whose work is gone (acknowledged).
func TestDispatched(t *testing.T) {
	s, d := open(t)
	ctx := context.Background()
	if got, err := s.Dispatched(ctx); err != nil || len(got) != 0 {
		t.Fatalf("dispatched before any work: %q, %v", got, err)
	}
	work := func(tenant, id string) uint64 {
		t.Helper()
		msg := nats.NewMsg(d.Names.Work("subprocess", "fixture", tenant))
		msg.Data = []byte("w")
		msg.Header.Set(jetstream.MsgIDHeader, subject.RunMsgID(tenant, id))
		ack, err := d.JS.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	work("acme", "a")
	b := work("acme", "b")
	work("other", "c")
	// Work naming no run is left out.
	msg := nats.NewMsg(d.Names.Work("subprocess", "fixture", "acme"))
	msg.Header.Set(jetstream.MsgIDHeader, "no-run")
	if _, err := d.JS.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Dispatched(ctx); err != nil || !slices.Equal(got, []string{"acme.a", "acme.b", "other.c"}) {
		t.Fatalf("dispatched = %q, %v; want acme.a acme.b other.c", got, err)
	}
	st, err := d.JS.Stream(ctx, d.Names.WorkStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, b); err != nil { // as its ack would
		t.Fatal(err)
	}
	if got, err := s.Dispatched(ctx); err != nil || !slices.Equal(got, []string{"acme.a", "other.c"}) {
		t.Fatalf("dispatched after b's work went = %q, %v; want acme.a other.c", got, err)
	}
}
