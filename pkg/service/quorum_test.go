package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const testFailoverAfter = 600 * time.Millisecond

// watched connects to a then b, in that order, and watches the
// connection with the threshold after.
func watched(t *testing.T, a, b *server.Server, after time.Duration) (*nats.Conn, *QuorumWatch, *Metrics) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	nc, js, err := Connect(a.ClientURL()+","+b.ClientURL(), "quorum-test", log, nats.DontRandomize())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if nc.ConnectedUrl() != a.ClientURL() {
		t.Fatalf("connected to %s, want the first server %s", nc.ConnectedUrl(), a.ClientURL())
	}
	m := NewMetrics(prometheus.NewRegistry())
	w := WatchQuorum(nc, js, log, m, after)
	t.Cleanup(w.Stop) // before nc.Close: cleanups run last first
	return nc, w, m
}

// movesTo waits until nc is connected to s and returns how long it took.
func movesTo(t *testing.T, nc *nats.Conn, s *server.Server, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	natstest.Eventually(t, within, func() error {
		if nc.ConnectedUrl() != s.ClientURL() {
			return natstest.Errorf("connected to %q", nc.ConnectedUrl())
		}
		return nil
	})
	return time.Since(start)
}

// stays checks that nc stays on s for d.
func stays(t *testing.T, nc *nats.Conn, s *server.Server, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if got := nc.ConnectedUrl(); got != "" && got != s.ClientURL() {
			t.Fatalf("moved to %s, want it to stay on %s", got, s.ClientURL())
		}
	}
}

// TestQuorumWatchLeavesUnansweringServer: on a server whose JetStream
// answers nothing (here: it has none, so no responders, as on a server
// cut off from the leaders) the watch moves the connection to the next
// server after its threshold, once, and counts it; there it stays.
func TestQuorumWatchLeavesUnansweringServer(t *testing.T) {
	a := natstest.RunJetStreamWith(t, func(o *server.Options) { o.JetStream = false })
	b := natstest.RunJetStream(t)
	nc, _, m := watched(t, a, b, testFailoverAfter)
	took := movesTo(t, nc, b, 5*time.Second)
	if took < testFailoverAfter-testFailoverAfter/3 {
		t.Errorf("moved after %s, before its threshold %s", took, testFailoverAfter)
	}
	stays(t, nc, b, 3*testFailoverAfter)
	if n := testutil.ToFloat64(m.ForcedReconnects); n != 1 {
		t.Errorf("agentmesh_nats_forced_reconnects_total = %v, want 1", n)
	}
}

// TestQuorumWatchFollowsReports: while the probe is answered, the
// components' reports decide: failures broken by a success, or errors
// that are not about the server, move nothing; failures in a row for
// the threshold move the connection.
func TestQuorumWatchFollowsReports(t *testing.T) {
	a, b := natstest.RunJetStream(t), natstest.RunJetStream(t)
	// A threshold far above the reports' spacing, even on a loaded machine.
	const after = 2 * time.Second
	nc, w, m := watched(t, a, b, after)
	report := func(d time.Duration, errs ...error) {
		for end, i := time.Now().Add(d), 0; time.Now().Before(end); i++ {
			w.Report(errs[i%len(errs)])
			time.Sleep(50 * time.Millisecond)
		}
	}
	report(2*after, nats.ErrNoResponders, nats.ErrNoResponders, nil)
	// One failure, then silence or errors not about the server.
	w.Report(nats.ErrNoResponders)
	report(2*after, errors.New("nats: permissions violation"))
	report(2*after, &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamNotFound})
	if got := nc.ConnectedUrl(); got != a.ClientURL() {
		t.Fatalf("moved to %s on failures that were not in a row or not about the server", got)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for nc.ConnectedUrl() != b.ClientURL() {
			w.Report(context.DeadlineExceeded)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	if took := movesTo(t, nc, b, 3*after); took < after-after/3 {
		t.Errorf("moved after %s, before its threshold %s", took, after)
	}
	<-done
	if n := testutil.ToFloat64(m.ForcedReconnects); n != 1 {
		t.Errorf("agentmesh_nats_forced_reconnects_total = %v, want 1", n)
	}
}

// TestQuorumWatchWaitsOutElections: JetStream's "no leader" answers,
// which every server gives during an election, move the connection only
// once they have lasted four times the threshold.
func TestQuorumWatchWaitsOutElections(t *testing.T) {
	a, b := natstest.RunJetStream(t), natstest.RunJetStream(t)
	nc, w, m := watched(t, a, b, testFailoverAfter)
	noLeader := &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		for nc.ConnectedUrl() != b.ClientURL() && time.Since(start) < 10*time.Second {
			w.Report(noLeader)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	if took := movesTo(t, nc, b, 10*time.Second); took < 3*testFailoverAfter {
		t.Errorf("moved after %s of election answers, want at least %s", took, electingFactor*testFailoverAfter)
	}
	<-done
	if n := testutil.ToFloat64(m.ForcedReconnects); n != 1 {
		t.Errorf("agentmesh_nats_forced_reconnects_total = %v, want 1", n)
	}
}

// TestQuorumWatchLeavesPartitionedNode is the case of issue 38 on a real
// cluster: a connection whose server is cut off from the other two
// (through the cluster's route proxies) stays up, and the watch moves it
// to the majority a few seconds after the cut, on what a component's
// JetStream calls report (here: stream info of a stream the majority
// leads, which the cut-off node cannot answer), whichever server leads
// the meta group.
func TestQuorumWatchLeavesPartitionedNode(t *testing.T) {
	c := natstest.RunPartitionableCluster(t, 3)
	const cut = 2
	mnc, majority := natstest.ConnectURL(t, c.ClientURL(0))
	ctx := context.Background()
	natstest.Eventually(t, time.Minute, func() error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := majority.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "Q", Subjects: []string{"q"}, Replicas: 3})
		return err
	})
	// The stream's leader on the majority.
	natstest.Eventually(t, time.Minute, func() error {
		st, err := majority.Stream(ctx, "Q")
		if err != nil {
			return err
		}
		if cl := st.CachedInfo().Cluster; cl != nil && cl.Leader != "" && cl.Leader != fmt.Sprintf("n%d", cut) {
			return nil
		}
		_, _ = mnc.Request("$JS.API.STREAM.LEADER.STEPDOWN.Q", []byte(`{"placement":{"preferred":"n0"}}`), 5*time.Second)
		time.Sleep(time.Second)
		return errors.New("stream Q led by the node to cut off")
	})

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	nc, js, err := Connect(c.ClientURL(cut)+","+c.ClientURL(0)+","+c.ClientURL(1), "partition-test", log, nats.DontRandomize())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	m := NewMetrics(prometheus.NewRegistry())
	w := WatchQuorum(nc, js, log, m, DefaultFailoverAfter)
	t.Cleanup(w.Stop)
	done := make(chan struct{})
	reporting := make(chan struct{})
	go func() {
		defer close(reporting)
		for {
			select {
			case <-done:
				return
			case <-time.After(300 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := js.Stream(ctx, "Q")
			cancel()
			w.Report(err)
		}
	}()
	defer func() { close(done); <-reporting }()
	natstest.Eventually(t, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := js.Stream(ctx, "Q")
		return err
	})
	if nc.ConnectedUrl() != c.ClientURL(cut) {
		t.Fatalf("connected to %s, want the first server %s", nc.ConnectedUrl(), c.ClientURL(cut))
	}

	cutAt := time.Now()
	c.Partition(cut)
	natstest.Eventually(t, 20*time.Second, func() error {
		if !nc.IsConnected() || nc.ConnectedUrl() == c.ClientURL(cut) {
			return natstest.Errorf("still on the cut-off node %s", c.ClientURL(cut))
		}
		return nil
	})
	took := time.Since(cutAt)
	t.Logf("moved to %s %s after the cut", nc.ConnectedUrl(), took.Round(10*time.Millisecond))
	if took < DefaultFailoverAfter*2/3 || took > 3*DefaultFailoverAfter {
		t.Errorf("moved %s after the cut, want about %s", took, DefaultFailoverAfter)
	}
	if n := testutil.ToFloat64(m.ForcedReconnects); n != 1 {
		t.Errorf("agentmesh_nats_forced_reconnects_total = %v, want 1", n)
	}
	natstest.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := js.Stream(ctx, "Q")
		return err
	})
}

// TestStartWatchesQuorumWithSeveralServers: the service runtime starts a
// watch for a list of servers, none for one server (agentmesh up) or
// with AGENTMESH_NATS_FAILOVER_AFTER=0, and stops it on Close.
func TestStartWatchesQuorumWithSeveralServers(t *testing.T) {
	a, b := natstest.RunJetStream(t), natstest.RunJetStream(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range []struct {
		name  string
		url   string
		after time.Duration
		want  bool
	}{
		{"one server", a.ClientURL(), DefaultFailoverAfter, false},
		{"two servers", a.ClientURL() + ", " + b.ClientURL(), DefaultFailoverAfter, true},
		{"two servers, off", a.ClientURL() + "," + b.ClientURL(), 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{NatsURL: tt.url, ShutdownTimeout: 5 * time.Second, NatsFailoverAfter: tt.after}
			infra, err := Start(context.Background(), "test", cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			if got := infra.Deps.Quorum != nil; got != tt.want {
				t.Errorf("watching: %v, want %v", got, tt.want)
			}
			if err := infra.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestServerCount(t *testing.T) {
	for url, want := range map[string]int{
		"nats://a:4222": 1, "nats://a:4222,nats://b:4222": 2, "nats://a:4222, nats://b:4222,": 2, "": 0,
	} {
		if got := ServerCount(url); got != want {
			t.Errorf("ServerCount(%q) = %d, want %d", url, got, want)
		}
	}
}
