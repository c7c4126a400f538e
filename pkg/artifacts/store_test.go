package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newStore(t *testing.T, cfg Config) (*Store, jetstream.JetStream) {
	t.Helper()
	_, _, js := natstest.RunMesh(t)
	s, err := OpenConfig(context.Background(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, js
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func readAll(t *testing.T, rc io.ReadCloser) []byte {
	t.Helper()
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return b
}

// messages counts what the object store holds, chunks and metas.
func messages(t *testing.T, js jetstream.JetStream, bucket string) uint64 {
	t.Helper()
	st, err := js.Stream(context.Background(), "OBJ_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestPutListOpen(t *testing.T) {
	s, _ := newStore(t, Config{})
	ctx := context.Background()
	patch := []byte("diff --git a/x b/x\n")
	archive := bytes.Repeat([]byte("tar"), 100_000) // several chunks
	refs := map[string]wire.ArtifactRef{}
	for name, b := range map[string][]byte{"patch": patch, "archive.tar.gz": archive} {
		ref, err := s.Put(ctx, "acme", "run-1", name, bytes.NewReader(b))
		if err != nil {
			t.Fatalf("put %s: %v", name, err)
		}
		want := wire.ArtifactRef{Name: "acme/run-1/" + name + "/" + sum(b), SHA256: sum(b), Size: int64(len(b))}
		if ref != want {
			t.Fatalf("put %s = %+v, want %+v", name, ref, want)
		}
		refs[name] = ref
	}
	list, err := s.List(ctx, "acme", "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "archive.tar.gz" || list[1].Name != "patch" {
		t.Fatalf("list = %+v, want archive.tar.gz and patch", list)
	}
	for _, rec := range list {
		if !rec.Stored || rec.Ref() != refs[rec.Name] || rec.Expires-rec.Created != s.Retention().Milliseconds() {
			t.Errorf("record %+v: want stored, ref %+v, expiring after the retention %s", rec, refs[rec.Name], s.Retention())
		}
	}
	rc, rec, err := s.Open(ctx, "acme", "run-1", "archive.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); !bytes.Equal(got, archive) || rec.SHA256 != sum(archive) {
		t.Fatalf("open read %d bytes, record %+v; want the %d bytes put", len(got), rec, len(archive))
	}
	// Another tenant's run of the same id has none.
	if list, err := s.List(ctx, "other", "run-1"); err != nil || len(list) != 0 {
		t.Fatalf("list of another tenant = %+v, %v; want none", list, err)
	}
	if _, _, err := s.Open(ctx, "other", "run-1", "patch"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open of another tenant: %v, want ErrNotFound", err)
	}
}

func TestPutAgain(t *testing.T) {
	s, js := newStore(t, Config{})
	ctx := context.Background()
	first, err := s.Put(ctx, "acme", "run-1", "patch", strings.NewReader("one"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Put(ctx, "acme", "run-1", "patch", strings.NewReader("one"))
	if err != nil || again != first {
		t.Fatalf("same bytes again = %+v, %v; want %+v", again, err, first)
	}
	second, err := s.Put(ctx, "acme", "run-1", "patch", strings.NewReader("two"))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.bytes.Exists(ctx, first.Name); err != nil || ok {
		t.Fatalf("the replaced bytes exist = %v, %v; want gone", ok, err)
	}
	rc, _, err := s.Open(ctx, "acme", "run-1", "patch")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); string(got) != "two" || second.SHA256 != sum([]byte("two")) {
		t.Fatalf("open = %q (ref %+v), want two", got, second)
	}
	// One object left: its meta, its chunk and the first's delete marker.
	if n := messages(t, js, subject.Names{}.ArtifactStore()); n != 3 {
		t.Fatalf("artifact store holds %d messages, want 3", n)
	}
}

func TestPutOverTheLimitWritesNothing(t *testing.T) {
	s, js := newStore(t, Config{ArtifactLimit: 10, SnapshotLimit: 10})
	ctx := context.Background()
	_, err := s.Put(ctx, "acme", "run-1", "patch", strings.NewReader("eleven byte"))
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Limit != 10 || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("put over the limit: %v, want a *TooLargeError of limit 10", err)
	}
	if _, err := s.Put(ctx, "acme", "run-1", "exact", strings.NewReader("ten bytes!")); err != nil {
		t.Fatalf("put at the limit: %v", err)
	}
	recs, err := s.Records(ctx)
	if err != nil || len(recs) != 1 || recs[0].Name != "exact" {
		t.Fatalf("records = %+v, %v; want only exact's", recs, err)
	}
	if _, err := s.PushSnapshot(ctx, "acme", strings.NewReader("eleven byte")); !errors.As(err, &tl) {
		t.Fatalf("push over the limit: %v, want a *TooLargeError", err)
	}
	if n := messages(t, js, subject.Names{}.SnapshotStore()); n != 0 {
		t.Fatalf("snapshot store holds %d messages, want none", n)
	}
}

func TestBadInput(t *testing.T) {
	s, _ := newStore(t, Config{})
	ctx := context.Background()
	tests := []struct {
		name    string
		tenant  string
		runID   string
		art     string
		wantErr error
	}{
		{name: "empty tenant", tenant: "", runID: "r", art: "patch", wantErr: subject.ErrInvalidToken},
		{name: "dotted tenant", tenant: "a.b", runID: "r", art: "patch", wantErr: subject.ErrInvalidToken},
		{name: "wildcard run", tenant: "acme", runID: "*", art: "patch", wantErr: subject.ErrInvalidToken},
		{name: "escaping name", tenant: "acme", runID: "r", art: "../patch", wantErr: ErrInvalidName},
		{name: "slash in name", tenant: "acme", runID: "r", art: "a/b", wantErr: ErrInvalidName},
		{name: "empty name", tenant: "acme", runID: "r", art: "", wantErr: ErrInvalidName},
		{name: "trailing dot", tenant: "acme", runID: "r", art: "patch.", wantErr: ErrInvalidName},
		{name: "long name", tenant: "acme", runID: "r", art: strings.Repeat("a", MaxNameLen+1), wantErr: ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Put(ctx, tt.tenant, tt.runID, tt.art, strings.NewReader("x")); !errors.Is(err, tt.wantErr) {
				t.Errorf("put: %v, want %v", err, tt.wantErr)
			}
			if _, _, err := s.Open(ctx, tt.tenant, tt.runID, tt.art); !errors.Is(err, tt.wantErr) {
				t.Errorf("open: %v, want %v", err, tt.wantErr)
			}
		})
	}
	for _, id := range []string{"", "sha256:", "sha256:" + strings.Repeat("A", 64), "md5:" + strings.Repeat("a", 64), strings.Repeat("a", 64)} {
		if _, _, err := s.OpenSnapshot(ctx, "acme", id); !errors.Is(err, ErrInvalidName) {
			t.Errorf("open snapshot %q: %v, want ErrInvalidName", id, err)
		}
	}
	if recs, err := s.Records(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("records = %+v, %v; want none", recs, err)
	}
}

func TestOpenVerifiesTheBytes(t *testing.T) {
	s, _ := newStore(t, Config{})
	ctx := context.Background()
	if _, err := s.Put(ctx, "acme", "run-1", "patch", strings.NewReader("the change")); err != nil {
		t.Fatal(err)
	}
	rec, err := s.get(ctx, recordKey("acme", "run-1", "patch"))
	if err != nil {
		t.Fatal(err)
	}
	rec.SHA256 = sum([]byte("another change"))
	if _, err := s.write(ctx, rec, rec.Rev); err != nil {
		t.Fatal(err)
	}
	rc, _, err := s.Open(ctx, "acme", "run-1", "patch")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	if _, err := io.ReadAll(rc); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of bytes that are not the record's: %v, want ErrCorrupt", err)
	}
}

func TestSnapshots(t *testing.T) {
	s, js := newStore(t, Config{})
	ctx := context.Background()
	data := bytes.Repeat([]byte("snapshot"), 50_000)
	id, err := s.PushSnapshot(ctx, "acme", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if want := "sha256:" + sum(data); id != want {
		t.Fatalf("id = %s, want %s", id, want)
	}
	// Pushing it again writes it again (its age counts from now) and
	// leaves one copy.
	before := messages(t, js, subject.Names{}.SnapshotStore())
	if again, err := s.PushSnapshot(ctx, "acme", bytes.NewReader(data)); err != nil || again != id {
		t.Fatalf("push again = %s, %v; want %s", again, err, id)
	}
	if after := messages(t, js, subject.Names{}.SnapshotStore()); after != before {
		t.Fatalf("snapshot store holds %d messages after a second push, want %d", after, before)
	}
	rc, size, err := s.OpenSnapshot(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); size != int64(len(data)) || !bytes.Equal(got, data) {
		t.Fatalf("open snapshot: %d bytes, size %d; want the %d pushed", len(got), size, len(data))
	}
	if _, _, err := s.OpenSnapshot(ctx, "other", id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another tenant's open: %v, want ErrNotFound", err)
	}
	if _, _, err := s.OpenSnapshot(ctx, "acme", "sha256:"+sum([]byte("never pushed"))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open of a snapshot never pushed: %v, want ErrNotFound", err)
	}
	small, err := OpenConfig(ctx, js, Config{SnapshotLimit: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := small.OpenSnapshot(ctx, "acme", id); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("open over this store's limit: %v, want ErrTooLarge", err)
	}
}

func TestWithdraw(t *testing.T) {
	s, _ := newStore(t, Config{})
	ctx := context.Background()
	for _, name := range []string{"patch", "archive"} {
		if _, err := s.Put(ctx, "acme", "run-1", name, strings.NewReader(name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, "acme", "run-2", "patch", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := s.Withdraw(ctx, "acme", "run-1"); err != nil {
			t.Fatal(err)
		}
	}
	if list, err := s.List(ctx, "acme", "run-1"); err != nil || len(list) != 0 {
		t.Fatalf("list after withdraw = %+v, %v; want none", list, err)
	}
	if _, _, err := s.Open(ctx, "acme", "run-1", "patch"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open after withdraw: %v, want ErrNotFound", err)
	}
	if _, err := s.Put(ctx, "acme", "run-1", "patch", strings.NewReader("again")); !errors.Is(err, ErrChanged) {
		t.Fatalf("put to a withdrawn run: %v, want ErrChanged", err)
	}
	if list, err := s.List(ctx, "acme", "run-2"); err != nil || len(list) != 1 {
		t.Fatalf("another run's list = %+v, %v; want its patch", list, err)
	}
	if err := s.Withdraw(ctx, "acme", "no-such-run"); err != nil {
		t.Fatalf("withdraw of a run without artifacts: %v", err)
	}
}

func TestHeads(t *testing.T) {
	s, _ := newStore(t, Config{})
	ctx := context.Background()
	if _, err := s.Head(ctx, "acme", "conv-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("head before any: %v, want ErrNotFound", err)
	}
	h := Head{Source: wire.WorkspaceSource{Snapshot: "sha256:" + sum([]byte("s"))}, RunID: "run-1",
		Patch: &wire.ArtifactRef{Name: "acme/run-1/patch/" + sum([]byte("p")), SHA256: sum([]byte("p")), Size: 1}}
	if err := s.SetHead(ctx, "acme", "conv-1", h); err != nil {
		t.Fatal(err)
	}
	got, err := s.Head(ctx, "acme", "conv-1")
	if err != nil || got.RunID != h.RunID || got.Source != h.Source || got.Patch == nil || *got.Patch != *h.Patch {
		t.Fatalf("head = %+v, %v; want %+v", got, err, h)
	}
	if _, err := s.Head(ctx, "other", "conv-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another tenant's head: %v, want ErrNotFound", err)
	}
	if err := s.SetHead(ctx, "acme", "conv.1", h); !errors.Is(err, subject.ErrInvalidToken) {
		t.Fatalf("set head of a bad conversation: %v, want ErrInvalidToken", err)
	}
}
