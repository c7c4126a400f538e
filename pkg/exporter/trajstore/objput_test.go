package trajstore_test

// The object store Store's Put writes objects itself, in the object
// store's stream format: these tests read what it writes with nats.go's
// own object store client, race it against other writers, and fail its
// publishes one at a time.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

const chunk = 128 << 10 // jetstream's default chunk size, which Put uses

// chunkSubjects is the bucket's chunk subjects with their message counts.
func chunkSubjects(t *testing.T, st jetstream.Stream, bucket string) map[string]uint64 {
	t.Helper()
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(fmt.Sprintf("$O.%s.C.>", bucket)))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects
}

// newBucketStream is newBucket with the stream beneath the bucket.
func newBucketStream(t testing.TB, js jetstream.JetStream) (jetstream.ObjectStore, string, jetstream.Stream) {
	t.Helper()
	obs, bucket := newBucket(t, js)
	return obs, bucket, bucketStream(t, js, bucket)
}

func bucketStream(t testing.TB, js jetstream.JetStream, bucket string) jetstream.Stream {
	t.Helper()
	st, err := js.Stream(context.Background(), "OBJ_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func objectDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:])
}

// 300 Puts, each with its own check of goroutines before and after: the
// JetStream context of nats.go's own Put leaked one about every hundred
// calls (its reconnect watcher blocked for good on a channel its cleanup
// had cleared). That leak needs the watcher to wait for a processor while
// the Put completes, so the test runs with more processors than this
// machine may have: with 4, 300 Puts through nats.go's PutBytes instead
// leaked in each of 5 runs under the race detector.
func TestObjectStorePutLeaksNoGoroutine(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(4, runtime.NumCPU())))
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	obs, _ := newBucket(t, js)
	s := trajstore.NewObjectStore(js, obs)
	ctx := context.Background()
	put := func(i int) {
		size := 1000
		if i%10 == 0 {
			size = 2*chunk + 1 // several chunks now and then
		}
		data := bytes.Repeat([]byte{byte(i)}, size)
		data = fmt.Appendf(data, "%d", i)
		name, err := trajstore.NameFor("tenant-1", fmt.Sprintf("run-%d", i), data)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, name, data); err != nil {
			t.Fatal(err)
		}
	}
	put(-1) // the server's and the Store's first use, before the snapshot
	before := goleak.IgnoreCurrent()
	for i := range 300 {
		put(i)
	}
	goleak.VerifyNone(t, before)
	list, err := obs.List(ctx)
	if err != nil || len(list) != 301 {
		t.Fatalf("List = %d objects, %v; want 301", len(list), err)
	}
}

// What Put writes is an ordinary object to nats.go's object store client:
// GetInfo, GetBytes, List, Watch and Delete read it, and its meta message
// is the one nats.go's PutBytes writes for the same bytes (but for the name
// and nuid).
func TestObjectStorePutReadByNATS(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	obs, bucket, st := newBucketStream(t, js)
	s := trajstore.NewObjectStore(js, obs)
	ctx := context.Background()
	sizes := []int{0, 1, chunk, chunk + 1, 5_000_000}
	want := map[string]*jetstream.ObjectInfo{}
	var big string // the 5 MB object's name
	for _, size := range sizes {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + size)
		}
		run := fmt.Sprintf("run-%d", size)
		name, _ := trajstore.NameFor("tenant-1", run, data)
		big = name
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			if err := s.Put(ctx, name, data); err != nil {
				t.Fatal(err)
			}
			info, err := obs.GetInfo(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			wantChunks := uint32((size + chunk - 1) / chunk)
			if info.Name != name || info.Bucket != bucket || info.Size != uint64(size) ||
				info.Chunks != wantChunks || info.Digest != objectDigest(data) || info.NUID == "" ||
				info.Deleted || info.Opts == nil || info.Opts.ChunkSize != chunk {
				t.Errorf("GetInfo = %+v (options %+v); want %s in %s, size %d, %d chunks of %d, digest %s",
					info, info.Opts, name, bucket, size, wantChunks, chunk, objectDigest(data))
			}
			if n := subjectMsgs(t, st, fmt.Sprintf("$O.%s.C.%s", bucket, info.NUID)); n != uint64(wantChunks) {
				t.Errorf("%d chunk messages, want %d", n, wantChunks)
			}
			got, err := obs.GetBytes(ctx, name) // checks the digest too
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("GetBytes = %d bytes, %v; want the %d put", len(got), err, size)
			}
			want[name] = info

			// The same bytes put by nats.go under another name: the
			// meta messages differ only in the name and nuid.
			twin, _ := trajstore.NameFor("tenant-1", "twin-"+run, data)
			natsPut(t, srv, bucket, twin, data)
			ours := rawMeta(t, st, bucket, name)
			theirs := rawMeta(t, st, bucket, twin)
			if g, w := ours.Header.Get(jetstream.MsgRollup), theirs.Header.Get(jetstream.MsgRollup); g != w || g != jetstream.MsgRollupSubject {
				t.Errorf("meta rollup header = %q, nats.go's %q", g, w)
			}
			if g, w := metaFields(t, ours.Data), metaFields(t, theirs.Data); !reflect.DeepEqual(g, w) {
				t.Errorf("meta (without name, nuid) = %v\nnats.go's = %v", g, w)
			}
		})
	}

	listed, err := obs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, info := range listed {
		if w, ok := want[info.Name]; ok {
			seen++
			if info.Size != w.Size || info.Chunks != w.Chunks || info.Digest != w.Digest || info.NUID != w.NUID {
				t.Errorf("List has %+v, want %+v", info, w)
			}
		}
	}
	if seen != len(sizes) || len(listed) != 2*len(sizes) {
		t.Errorf("List has %d objects, %d of ours; want %d of ours and nats.go's twins", len(listed), seen, len(sizes))
	}

	w, err := obs.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watched := map[string]string{}
	for info := range w.Updates() {
		if info == nil {
			break // the current state is delivered
		}
		watched[info.Name] = info.Digest
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	for name, info := range want {
		if watched[name] != info.Digest {
			t.Errorf("Watch gave %s digest %q, want %q", name, watched[name], info.Digest)
		}
	}

	// nats.go's Delete removes one of ours, chunks and all.
	if err := obs.Delete(ctx, big); err != nil {
		t.Fatal(err)
	}
	if n := subjectMsgs(t, st, fmt.Sprintf("$O.%s.C.%s", bucket, want[big].NUID)); n != 0 {
		t.Errorf("%d chunks left after nats.go's Delete", n)
	}
	if ok, err := s.Exists(ctx, big); ok || err != nil {
		t.Errorf("Exists after nats.go's Delete = %t, %v", ok, err)
	}
}

func rawMeta(t *testing.T, st jetstream.Stream, bucket, name string) *jetstream.RawStreamMsg {
	t.Helper()
	m, err := st.GetLastMsgForSubject(context.Background(), metaSubject(bucket, name))
	if err != nil {
		t.Fatalf("meta of %s: %v", name, err)
	}
	return m
}

// metaFields is a meta message's JSON fields but the name and nuid.
func metaFields(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("meta %s: %v", data, err)
	}
	if m["name"] == "" || m["nuid"] == "" {
		t.Errorf("meta %s lacks a name or nuid", data)
	}
	delete(m, "name")
	delete(m, "nuid")
	return m
}

// An object nats.go's PutBytes wrote is one Put finds: the same bytes are
// a no-op, other bytes a conflict, and neither writes to the stream.
func TestObjectStorePutFindsNATSObject(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	obs, bucket, st := newBucketStream(t, js)
	s := trajstore.NewObjectStore(js, obs)
	ctx := context.Background()
	data := bytes.Repeat([]byte("nats.go "), 40_000) // 3 chunks
	name, _ := trajstore.NameFor("tenant-1", "run-1", data)
	natsPut(t, srv, bucket, name, data)
	state := func() jetstream.StreamState {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State
	}
	before := state()

	if err := s.Put(ctx, name, data); err != nil {
		t.Fatalf("Put of the bytes nats.go put = %v, want nil", err)
	}
	other := []byte("other bytes")
	err := s.Put(ctx, name, other)
	var ce *trajstore.ConflictError
	if !errors.Is(err, trajstore.ErrConflict) || !errors.As(err, &ce) {
		t.Fatalf("Put of other bytes = %v, want a *ConflictError", err)
	}
	sum, otherSum := sha256.Sum256(data), sha256.Sum256(other)
	if ce.Name != name || ce.StoredSHA256 != hex.EncodeToString(sum[:]) || ce.PutSHA256 != hex.EncodeToString(otherSum[:]) {
		t.Errorf("ConflictError = %+v", ce)
	}
	if after := state(); after.Msgs != before.Msgs || after.LastSeq != before.LastSeq {
		t.Errorf("the Puts wrote: stream went from %d msgs (last %d) to %d (last %d)",
			before.Msgs, before.LastSeq, after.Msgs, after.LastSeq)
	}
	got, err := s.Get(ctx, name)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %d bytes, %v", len(got), err)
	}
}

// Two Stores on two connections race each of 20 absent names with the
// same bytes: no error, and the stream holds one object per name and no
// chunk beyond its chunks.
func TestObjectStoreRacingPutsLeaveOneObject(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	obs, bucket, st := newBucketStream(t, js)
	ctx := context.Background()
	var stores [2]trajstore.Store
	for i := range stores {
		_, js := natstest.Connect(t, srv)
		o, err := js.ObjectStore(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = trajstore.NewObjectStore(js, o)
	}
	const names = 20
	objects := map[string][]byte{}
	for i := range names {
		data := bytes.Repeat([]byte{byte(i)}, 2*chunk+10) // 3 chunks
		name, _ := trajstore.NameFor("tenant-1", fmt.Sprintf("run-%d", i), data)
		objects[name] = data
	}
	for name, data := range objects {
		var wg sync.WaitGroup
		var errs [2]error
		start := make(chan struct{})
		for i, s := range stores {
			wg.Go(func() {
				<-start
				errs[i] = s.Put(ctx, name, data)
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			t.Fatalf("racing Puts of %s: %v", name, err)
		}
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != names*4 || len(info.State.Subjects) != names*2 {
		t.Errorf("stream holds %d msgs on %d subjects, want %d on %d (a meta and 3 chunks each)",
			info.State.Msgs, len(info.State.Subjects), names*4, names*2)
	}
	for name, data := range objects {
		oi, err := obs.GetInfo(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if n := info.State.Subjects[fmt.Sprintf("$O.%s.C.%s", bucket, oi.NUID)]; n != 3 {
			t.Errorf("%s has %d chunk messages, want 3", name, n)
		}
		got, err := obs.GetBytes(ctx, name)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("GetBytes(%s) = %d bytes, %v", name, len(got), err)
		}
	}
	// How many races a loser lost (it wrote chunks, then purged them) is
	// up to the scheduler; TestObjectStorePutLosesARace makes each loss.
	t.Logf("%d chunk messages written and purged by losers", info.State.LastSeq-info.State.Msgs)
}

// hookedJS is a JetStream whose PublishMsg goes through hook (when set),
// which calls next to publish for real.
type hookedJS struct {
	jetstream.JetStream
	hook func(m *nats.Msg, next func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error)
}

func (h *hookedJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	next := func() (*jetstream.PubAck, error) { return h.JetStream.PublishMsg(ctx, m, opts...) }
	if h.hook == nil {
		return next()
	}
	return h.hook(m, next)
}

func isMeta(m *nats.Msg) bool { return strings.Contains(m.Subject, ".M.") }

// Each way a Put's publishes go wrong, or lose a race, one at a time: the
// Put's outcome, the object left, and no chunks but the object's.
func TestObjectStorePutLosesARace(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	data := bytes.Repeat([]byte("ours "), 60_000) // 3 chunks
	otherData := []byte("theirs")
	refused := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum, Description: "refused by the test"}
	type env struct {
		ctx    context.Context
		name   string
		racer  trajstore.Store // on a connection of its own
		chunks int             // chunk publishes so far
		metas  int             // meta publishes so far
	}
	type hook func(t *testing.T, e *env, m *nats.Msg, next func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error)
	// onFirstMeta runs f before the first meta publish goes out.
	onFirstMeta := func(f func(t *testing.T, e *env)) hook {
		return func(t *testing.T, e *env, m *nats.Msg, next func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
			if isMeta(m) && e.metas == 1 {
				f(t, e)
			}
			return next()
		}
	}
	tests := []struct {
		name       string
		hook       hook
		wantErr    error // nil, or what errors.Is finds
		wantFail   bool  // an error not matched by errors.Is
		wantData   []byte
		wantChunks int // chunk publishes in all
	}{
		{
			name:       "racer stores the same bytes first",
			hook:       onFirstMeta(func(t *testing.T, e *env) { mustPutObject(t, e.ctx, e.racer, e.name, data) }),
			wantData:   data,
			wantChunks: 3,
		},
		{
			name:       "racer stores other bytes first",
			hook:       onFirstMeta(func(t *testing.T, e *env) { mustPutObject(t, e.ctx, e.racer, e.name, otherData) }),
			wantErr:    trajstore.ErrConflict,
			wantData:   otherData,
			wantChunks: 3,
		},
		{
			name: "racer puts and deletes first",
			hook: onFirstMeta(func(t *testing.T, e *env) {
				mustPutObject(t, e.ctx, e.racer, e.name, otherData)
				if err := e.racer.Delete(e.ctx, e.name); err != nil {
					t.Fatal(err)
				}
			}),
			wantData:   data,
			wantChunks: 6, // the first chunks are purged, and written again against the marker
		},
		{
			name: "meta stored, its answer lost",
			hook: func(t *testing.T, e *env, m *nats.Msg, next func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
				ack, err := next()
				if isMeta(m) && e.metas == 1 && err == nil {
					return nil, nats.ErrTimeout
				}
				return ack, err
			},
			wantData:   data,
			wantChunks: 3, // found stored: not written again
		},
		{
			name: "meta lost on the way",
			hook: func(t *testing.T, e *env, m *nats.Msg, next func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
				if isMeta(m) && e.metas == 1 {
					return nil, nats.ErrTimeout
				}
				return next()
			},
			wantData:   data,
			wantChunks: 3, // the meta is published again over the same chunks
		},
		{
			name: "meta refused",
			hook: func(t *testing.T, e *env, m *nats.Msg, next func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
				if isMeta(m) {
					return nil, refused
				}
				return next()
			},
			wantFail:   true,
			wantChunks: 3,
		},
		{
			name: "second chunk refused",
			hook: func(t *testing.T, e *env, m *nats.Msg, next func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
				if !isMeta(m) && e.chunks == 2 {
					return nil, refused
				}
				return next()
			},
			wantFail:   true,
			wantChunks: 2,
		},
		{
			name: "second chunk unanswered once",
			hook: func(t *testing.T, e *env, m *nats.Msg, next func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
				if !isMeta(m) && e.chunks == 2 {
					return nil, nats.ErrTimeout
				}
				return next()
			},
			wantData:   data,
			wantChunks: 5, // two, then all three again on a new subject
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs, bucket, st := newBucketStream(t, js)
			_, rjs := natstest.Connect(t, srv)
			ro, err := rjs.ObjectStore(context.Background(), bucket)
			if err != nil {
				t.Fatal(err)
			}
			name, _ := trajstore.NameFor("tenant-1", "run-1", data)
			e := &env{ctx: context.Background(), name: name, racer: trajstore.NewObjectStore(rjs, ro)}
			hjs := &hookedJS{JetStream: js}
			hjs.hook = func(m *nats.Msg, next func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
				if isMeta(m) {
					e.metas++
				} else {
					e.chunks++
				}
				return tt.hook(t, e, m, next)
			}
			err = trajstore.NewObjectStore(hjs, obs).Put(e.ctx, name, data)
			switch {
			case tt.wantFail:
				if err == nil {
					t.Fatal("Put = nil, want an error")
				}
			case !errors.Is(err, tt.wantErr):
				t.Fatalf("Put = %v, want %v", err, tt.wantErr)
			}
			if e.chunks != tt.wantChunks {
				t.Errorf("%d chunk publishes, want %d", e.chunks, tt.wantChunks)
			}
			subjects := chunkSubjects(t, st, bucket)
			if tt.wantData == nil {
				if len(subjects) != 0 {
					t.Errorf("chunks left after the failed Put: %v", subjects)
				}
				if _, err := obs.GetInfo(e.ctx, name); !errors.Is(err, jetstream.ErrObjectNotFound) {
					t.Errorf("GetInfo after the failed Put = %v, want not found", err)
				}
				return
			}
			got, err := obs.GetBytes(e.ctx, name)
			if err != nil || !bytes.Equal(got, tt.wantData) {
				t.Fatalf("GetBytes = %d bytes, %v; want %d", len(got), err, len(tt.wantData))
			}
			info, err := obs.GetInfo(e.ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]uint64{fmt.Sprintf("$O.%s.C.%s", bucket, info.NUID): uint64(info.Chunks)}
			if !maps.Equal(subjects, want) {
				t.Errorf("chunk subjects %v, want only the object's %v", slices.Sorted(maps.Keys(subjects)), want)
			}
		})
	}
}

func mustPutObject(t *testing.T, ctx context.Context, s trajstore.Store, name string, data []byte) {
	t.Helper()
	if err := s.Put(ctx, name, data); err != nil {
		t.Fatal(err)
	}
}
