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
	done, err := s.EndUnowned(context.Background(), tenant, id, func(wire.RunRecord) bool { return true },
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

// liveKeys lists the live index, waiting until it holds only live keys:
// the removal markers of runs just ended have expired.
func liveKeys(t *testing.T, s *runs.Store) []string {
	t.Helper()
	ctx := context.Background()
	var live []string
	natstest.Eventually(t, 10*time.Second, func() error {
		keys, err := s.Live(ctx)
		if err != nil {
			return err
		}
		live = live[:0]
		for _, k := range keys {
			_, ok, err := s.LiveKey(ctx, k)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%s is listed with its removal marker", k)
			}
			live = append(live, k)
		}
		return nil
	})
	return live
}

// Create indexes a run as live and its end removes it; the removal's
// marker expires, so the listing does not grow with ended runs.
func TestLiveIndex(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	if got := liveKeys(t, s); len(got) != 0 {
		t.Fatalf("live before any run: %q", got)
	}
	for _, id := range []string{"a", "b", "c"} {
		routed(t, s, "acme", id)
	}
	if got, want := liveKeys(t, s), []string{"acme.a", "acme.b", "acme.c"}; !slices.Equal(got, want) {
		t.Fatalf("live = %q, want %q", got, want)
	}
	cancel(t, s, "acme", "b")
	if _, ok, err := s.LiveKey(ctx, "acme.b"); err != nil || ok {
		t.Fatalf("b right after it ended: live %t, %v", ok, err)
	}
	if got, want := liveKeys(t, s), []string{"acme.a", "acme.c"}; !slices.Equal(got, want) {
		t.Fatalf("live after b ended = %q, want %q", got, want)
	}
	// A resubmission of an existing run is ErrExists and leaves it live.
	if _, err := s.Create(ctx, wire.RunRecord{RunID: "a", Tenant: "acme"}); !errors.Is(err, runs.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	l, ok, err := s.LiveKey(ctx, "acme.a")
	if err != nil || !ok || l.Rev < 2 || time.Since(l.Since) > time.Minute {
		t.Fatalf("live key of a: %+v, %t, %v", l, ok, err)
	}
	// DropLive at a stale revision keeps a key written again since.
	if err := s.DropLive(ctx, l.Key, l.Rev-1); err != nil {
		t.Fatalf("drop at a stale revision: %v", err)
	}
	if _, ok, _ := s.LiveKey(ctx, "acme.a"); !ok {
		t.Fatal("a dropped at a stale revision")
	}
	if err := s.DropLive(ctx, l.Key, l.Rev); err != nil {
		t.Fatalf("drop: %v", err)
	}
	if got, want := liveKeys(t, s), []string{"acme.c"}; !slices.Equal(got, want) {
		t.Fatalf("live after dropping a = %q, want %q", got, want)
	}
}
