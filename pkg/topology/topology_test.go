package topology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEnsureIsIdempotentAndConcurrent(t *testing.T) {
	srv := natstest.RunJetStream(t)
	ctx := context.Background()
	cfg := topology.Config{Names: subject.Names{Prefix: "t1"}, LeaseTTL: 3 * time.Second}
	// Three services starting at once, each on its own connection by URL.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		_, js := natstest.Connect(t, srv)
		wg.Go(func() { errs[i] = topology.Ensure(ctx, js, cfg) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	_, js := natstest.Connect(t, srv)
	if err := topology.Ensure(ctx, js, cfg); err != nil {
		t.Fatalf("second ensure: %v", err)
	}
	n := cfg.Names
	for _, name := range []string{n.SubmitStream(), n.WorkStream(), n.EventsStream()} {
		if _, err := js.Stream(ctx, name); err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}
	for _, b := range []string{n.RunsBucket(), n.SessionsBucket(), n.CheckpointsBucket(), n.LeasesBucket(), n.ConsentBucket(), n.ExportsBucket(), n.RedactionBucket(), n.APIKeysBucket(), n.SpendBucket(), n.LedgerBucket(), n.LimitsBucket(), n.ArtifactsBucket(), n.HeadsBucket(), n.ConversationsBucket()} {
		if _, err := js.KeyValue(ctx, b); err != nil {
			t.Errorf("bucket %s: %v", b, err)
		}
	}
	for _, b := range []string{n.TrajectoryStore(), n.ArtifactStore(), n.SnapshotStore()} {
		if _, err := js.ObjectStore(ctx, b); err != nil {
			t.Errorf("object store %s: %v", b, err)
		}
	}
	ttl, err := topology.LeaseTTL(ctx, js, n)
	if err != nil || ttl != 3*time.Second {
		t.Fatalf("lease TTL = %s, %v; want 3s", ttl, err)
	}

	// A changed setting updates the resource in place.
	cfg.WorkQueueTenantMax = 7
	if err := topology.Ensure(ctx, js, cfg); err != nil {
		t.Fatalf("update: %v", err)
	}
	st, err := js.Stream(ctx, n.WorkStream())
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.MaxMsgsPerSubject; got != 7 {
		t.Fatalf("work queue tenant max = %d, want 7", got)
	}
}

func TestArtifactRetention(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	n := subject.Names{}
	for _, want := range []time.Duration{topology.DefaultArtifactRetention, 2 * time.Hour} {
		cfg := topology.Config{}
		if want != topology.DefaultArtifactRetention {
			cfg.ArtifactRetention = want
		}
		if err := topology.Ensure(ctx, js, cfg); err != nil {
			t.Fatal(err)
		}
		if got, err := topology.ArtifactRetention(ctx, js, n); err != nil || got != want {
			t.Fatalf("artifact retention = %s, %v; want %s", got, err, want)
		}
		obs, err := js.ObjectStore(ctx, n.SnapshotStore())
		if err != nil {
			t.Fatal(err)
		}
		st, err := obs.Status(ctx)
		if err != nil || st.TTL() != want {
			t.Fatalf("snapshots max age = %v, %v; want %s", st, err, want)
		}
		kv, err := js.KeyValue(ctx, n.HeadsBucket())
		if err != nil {
			t.Fatal(err)
		}
		if ks, err := kv.Status(ctx); err != nil || ks.TTL() != want {
			t.Fatalf("heads max age = %v, %v; want %s", ks, err, want)
		}
	}
	if err := topology.Ensure(ctx, js, topology.Config{ArtifactRetention: time.Second}); !errors.Is(err, topology.ErrInvalidConfig) {
		t.Fatalf("a retention under 1m: %v, want ErrInvalidConfig", err)
	}
}

func TestWorkQueueDiscardsNewPerSubject(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	if err := topology.Ensure(ctx, js, topology.Config{WorkQueueMax: 8, WorkQueueTenantMax: 2}); err != nil {
		t.Fatal(err)
	}
	n := subject.Names{}
	for i := range 2 {
		if _, err := js.Publish(ctx, n.Work("in_process", "a", "alpha"), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, n.Work("in_process", "a", "alpha"), []byte("third")); err == nil {
		t.Fatal("third message on a full subject was stored")
	}
	// Another tenant's queue for the same adapter, and another adapter's,
	// are independent.
	if _, err := js.Publish(ctx, n.Work("in_process", "a", "beta"), []byte("x")); err != nil {
		t.Fatalf("other tenant: %v", err)
	}
	if _, err := js.Publish(ctx, n.Work("in_process", "b", "alpha"), []byte("x")); err != nil {
		t.Fatalf("other adapter: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		in   topology.Config
	}{
		{"zero queue", topology.Config{WorkQueueMax: -1}},
		{"tenant queue above adapter queue", topology.Config{WorkQueueMax: 4, WorkQueueTenantMax: 5}},
		{"short lease", topology.Config{LeaseTTL: 10 * time.Millisecond}},
		{"bad prefix", topology.Config{Names: subject.Names{Prefix: "a.b"}}},
		{"replicas", topology.Config{Replicas: 7}},
		{"short run retention", topology.Config{RunRetention: 500 * time.Millisecond, EventsMaxAge: 2 * time.Minute}},
		{"run retention below events max age", topology.Config{RunRetention: time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := topology.Ensure(context.Background(), nil, tt.in)
			if !errors.Is(err, topology.ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// A second Ensure with the same settings updates nothing: services start
// concurrently against streams others already use.
func TestEnsureLeavesAnUnchangedTopologyAlone(t *testing.T) {
	srv := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, srv)
	ctx := context.Background()
	cfg := topology.Config{LeaseTTL: 2 * time.Second}
	if err := topology.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	updates, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.UPDATED.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := topology.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if msg, err := updates.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("the second Ensure updated %s", msg.Subject)
	}
	// A changed setting still updates.
	cfg.WorkQueueMax = 9
	if err := topology.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := updates.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("a changed setting was not applied: %v", err)
	}
}

// The runs bucket allows per-message TTLs (the retention of ended runs'
// records) and keeps the retention in its metadata; a bucket made before
// retention existed is updated in place, its records kept, and a changed
// retention is applied to a bucket that already allows TTLs.
func TestEnsureRunRetention(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	n := subject.Names{}
	// The runs bucket as a version without retention made it, with a record.
	old, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.RunsBucket(), History: 1, Description: "run records"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Put(ctx, "acme.r1", []byte("record")); err != nil {
		t.Fatal(err)
	}
	if got, err := topology.RunRetention(ctx, js, n); err != nil || got != 0 {
		t.Fatalf("retention before Ensure = %s, %v; want 0 (kept for ever)", got, err)
	}
	check := func(want time.Duration) {
		t.Helper()
		if got, err := topology.RunRetention(ctx, js, n); err != nil || got != want {
			t.Fatalf("retention = %s, %v; want %s", got, err, want)
		}
		for _, b := range []string{n.RunsBucket()} {
			st, err := js.Stream(ctx, "KV_"+b)
			if err != nil {
				t.Fatal(err)
			}
			if c := st.CachedInfo().Config; !c.AllowMsgTTL || c.SubjectDeleteMarkerTTL != 0 || c.MaxMsgsPerSubject != 1 || !c.AllowRollup {
				t.Fatalf("%s: allow msg TTL %t, marker TTL %s, history %d, rollup %t; want true, 0, 1, true",
					b, c.AllowMsgTTL, c.SubjectDeleteMarkerTTL, c.MaxMsgsPerSubject, c.AllowRollup)
			}
		}
	}
	if err := topology.Ensure(ctx, js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	check(topology.DefaultRunRetention)
	if e, err := old.Get(ctx, "acme.r1"); err != nil || string(e.Value()) != "record" {
		t.Fatalf("record after the update: %v", err)
	}
	if err := topology.Ensure(ctx, js, topology.Config{RunRetention: 48 * time.Hour}); err != nil {
		t.Fatalf("changed retention: %v", err)
	}
	check(48 * time.Hour)
	// Another service, concurrently, with the same settings: nothing to do.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = topology.Ensure(ctx, js, topology.Config{RunRetention: 48 * time.Hour}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	check(48 * time.Hour)
}

// Services creating the topology at once on an empty server all succeed:
// the buckets with message TTLs are created create-only, then updated.
func TestEnsureConcurrentCreateWithRetention(t *testing.T) {
	srv := natstest.RunJetStream(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		_, js := natstest.Connect(t, srv)
		wg.Go(func() { errs[i] = topology.Ensure(ctx, js, topology.Config{RunRetention: 36 * time.Hour}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	_, js := natstest.Connect(t, srv)
	if got, err := topology.RunRetention(ctx, js, subject.Names{}); err != nil || got != 36*time.Hour {
		t.Fatalf("retention = %s, %v; want 36h", got, err)
	}
}

// A service that starts before its server: Ensure waits, saying so, and
// ensures the topology once the server is up.
func TestEnsureWaitsForTheServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var logs servicetest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- topology.Ensure(context.Background(), js, topology.Config{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	}()
	natstest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), `"msg":"waiting for JetStream","for":"topology"`) {
			return errors.New("no wait logged yet")
		}
		return nil
	})
	select {
	case err := <-done:
		t.Fatalf("Ensure returned %v with no server", err)
	default:
	}
	natstest.RunJetStreamWith(t, func(o *server.Options) { o.Port = port })
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Ensure still waits 20 s after the server started")
	}
	if _, err := js.Stream(context.Background(), subject.Names{}.WorkStream()); err != nil {
		t.Errorf("work stream: %v", err)
	}
	if !strings.Contains(logs.String(), `"msg":"waiting for JetStream: done","for":"topology"`) {
		t.Errorf("the end of the wait was not logged:\n%s", logs.String())
	}
}

// A stream that exists with a config Ensure may not change is a
// configuration error: Ensure returns it at once instead of waiting.
func TestEnsureFailsAtOnceOnAConflictingStream(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	n := subject.Names{Prefix: "clash"}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: n.EventsStream(), Subjects: []string{n.EventsAll()}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	var logs servicetest.Buffer
	start := time.Now()
	err := topology.Ensure(ctx, js, topology.Config{Names: n, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || jsretry.NotYet(err) {
		t.Fatalf("Ensure = %v; want the server's refusal (a JetStream API error)", err)
	}
	if d := time.Since(start); d > 5*time.Second || strings.Contains(logs.String(), "waiting") {
		t.Errorf("Ensure failed after %s, logged %q; want at once, without waiting", d, logs.String())
	}
}

// A request the server's permissions refuse gets no answer, only a
// timeout, like one to a cluster still electing its leader: Ensure tells
// them apart by the violation the server reports, and fails with it at
// once instead of waiting for ever.
func TestEnsureFailsOnAPermissionViolation(t *testing.T) {
	srv := natstest.RunJetStreamWith(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "svc", Password: "pw", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.CREATE.>"}},
		}}}
	})
	// No async error handler: nats.go's default prints the violation.
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("svc", "pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var logs servicetest.Buffer
	// A context without a deadline, as a service's: each request then has
	// the JetStream API's own timeout.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- topology.Ensure(ctx, js, topology.Config{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	}()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatalf("Ensure still waits after 20 s: %v", <-done)
	}
	if !errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatalf("Ensure = %v; want the permissions violation", err)
	}
	if strings.Contains(logs.String(), "waiting") {
		t.Errorf("a refusal was logged as a wait:\n%s", logs.String())
	}
}
