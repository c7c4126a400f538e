package trajstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore/storetest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// inspectedObjectStore is the object store Store with a view of its
// stream, for the suite's "one object" checks.
type inspectedObjectStore struct {
	trajstore.Store
	stream jetstream.Stream
}

// Entries lists every subject of the bucket's stream (meta and chunk
// subjects) with its message count and last sequence: a rewritten object
// has new chunk subjects and a new meta sequence.
func (s inspectedObjectStore) Entries(ctx context.Context) ([]string, error) {
	info, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		return nil, err
	}
	var out []string
	for subj, n := range info.State.Subjects {
		m, err := s.stream.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("%s msgs=%d last=%d", subj, n, m.Sequence))
	}
	return out, nil
}

// newBucket creates a fresh object store bucket on js.
func newBucket(t testing.TB, js jetstream.JetStream) (jetstream.ObjectStore, string) {
	t.Helper()
	bucket := fmt.Sprintf("traj_%d", buckets.Add(1))
	obs, err := js.CreateObjectStore(context.Background(), jetstream.ObjectStoreConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	return obs, bucket
}

var buckets atomic.Int64

func TestObjectStoreConformance(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	storetest.Run(t, func(t *testing.T) trajstore.Store {
		obs, bucket := newBucket(t, js)
		st, err := js.Stream(context.Background(), "OBJ_"+bucket)
		if err != nil {
			t.Fatal(err)
		}
		return inspectedObjectStore{Store: trajstore.NewObjectStore(js, obs), stream: st}
	})
}

// The mesh's store, as pkg/topology creates it.
func TestObjectStoreOnTopology(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	names := subject.Names{Prefix: "acme"}
	if err := topology.Ensure(ctx, js, topology.Config{Names: names, LeaseTTL: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(ctx, names.TrajectoryStore())
	if err != nil {
		t.Fatal(err)
	}
	s := trajstore.NewObjectStore(js, obs)
	data := []byte(`{"v":1}`)
	name, err := trajstore.NameFor("tenant-1", "run-1", data)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, name, data); err != nil {
		t.Fatal(err)
	}
	// The object is an ordinary object of the bucket, read back by any
	// object store client with its digest.
	info, err := obs.GetInfo(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != uint64(len(data)) {
		t.Errorf("object size = %d, want %d", info.Size, len(data))
	}
	got, err := s.Get(ctx, name)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %q, %v", got, err)
	}
}

// Two exporters, each with its own connection and Store, putting one run's
// trajectory at once: no error and one object with the bytes.
func TestObjectStoreTwoWritersRace(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	obs, bucket := newBucket(t, js)
	ctx := context.Background()
	data := bytes.Repeat([]byte("chunk "), 100_000)
	name, _ := trajstore.NameFor("tenant-1", "run-1", data)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		_, js := natstest.Connect(t, srv)
		o, err := js.ObjectStore(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		s := trajstore.NewObjectStore(js, o)
		wg.Go(func() { errs[i] = s.Put(ctx, name, data) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got, err := trajstore.NewObjectStore(js, obs).Get(ctx, name)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %d bytes, %v; want the %d put", len(got), err, len(data))
	}
	list, err := obs.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %d objects, %v; want 1", len(list), err)
	}
}

// A delete whose chunk purge did not happen (the marker was written, then
// the process died) is completed by the next Delete.
func TestObjectStoreDeleteCompletesAHalfDelete(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	obs, bucket := newBucket(t, js)
	ctx := context.Background()
	s := trajstore.NewObjectStore(js, obs)
	data := bytes.Repeat([]byte("x"), 200_000)
	name, _ := trajstore.NameFor("tenant-1", "run-1", data)
	if err := s.Put(ctx, name, data); err != nil {
		t.Fatal(err)
	}
	info, err := obs.GetInfo(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// Write the deleted marker the way jetstream's Delete does, without
	// the purge that follows it.
	st, err := js.Stream(ctx, "OBJ_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	chunks := fmt.Sprintf("$O.%s.C.%s", bucket, info.NUID)
	marker := *info
	marker.Deleted, marker.Size, marker.Chunks, marker.Digest = true, 0, 0, ""
	if err := publishMeta(ctx, js, bucket, &marker); err != nil {
		t.Fatal(err)
	}
	if n := subjectMsgs(t, st, chunks); n == 0 {
		t.Fatal("the half delete purged the chunks already")
	}
	if ok, err := s.Exists(ctx, name); ok || err != nil {
		t.Fatalf("Exists after the marker = %t, %v; want false", ok, err)
	}
	if err := s.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if n := subjectMsgs(t, st, chunks); n != 0 {
		t.Fatalf("%d chunks left after Delete, want 0", n)
	}
}

func subjectMsgs(t *testing.T, st jetstream.Stream, subj string) uint64 {
	t.Helper()
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subj]
}

// Requests are made again while the server is away: a Put started during
// an outage completes once the server is back.
func TestObjectStoreRetriesThroughAnOutage(t *testing.T) {
	dir := t.TempDir()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true}
	srv := startServer(t, opts)
	opts.Port = srv.Addr().(*net.TCPAddr).Port
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	obs, _ := newBucket(t, js)
	watched := &failureCounting{JetStream: js}
	s := trajstore.NewObjectStore(watched, obs)
	// A first Put finds the bucket's stream, so that the one during the
	// outage starts by reading the name's meta from it.
	first := []byte("first")
	firstName, _ := trajstore.NameFor("tenant-1", "run-0", first)
	if err := s.Put(context.Background(), firstName, first); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("y"), 300_000)
	name, _ := trajstore.NameFor("tenant-1", "run-1", data)

	srv.Shutdown()
	srv.WaitForShutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Put(ctx, name, data) }()
	// Restart only once an attempt has failed the way an outage fails.
	natstest.Eventually(t, 20*time.Second, func() error {
		if watched.transient.Load() == 0 {
			return natstest.Errorf("no transient failure yet")
		}
		return nil
	})
	srv2 := startServer(t, opts)
	defer func() { srv2.Shutdown(); srv2.WaitForShutdown() }()
	if err := <-done; err != nil {
		t.Fatalf("Put through the outage = %v", err)
	}
	got, err := s.Get(ctx, name)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %d bytes, %v", len(got), err)
	}
}

func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	return srv
}

// failureCounting counts the failures jsretry retries of reads from the
// streams it opens.
type failureCounting struct {
	jetstream.JetStream
	transient atomic.Int64
}

func (f *failureCounting) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	st, err := f.JetStream.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return &failureCountingStream{Stream: st, f: f}, nil
}

type failureCountingStream struct {
	jetstream.Stream
	f *failureCounting
}

func (s *failureCountingStream) GetLastMsgForSubject(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	m, err := s.Stream.GetLastMsgForSubject(ctx, subj)
	if jsretry.Transient(err) {
		s.f.transient.Add(1)
	}
	return m, err
}
