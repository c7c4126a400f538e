package trajstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/natstest"
)

// BenchmarkPutGet puts a new 1 MB trajectory and reads it back: the
// exporter's write and a verify's read, per store. Each iteration's bytes
// differ, so each Put writes.
func BenchmarkPutGet(b *testing.B) {
	b.Run("object", func(b *testing.B) {
		srv := natstest.RunJetStream(b)
		_, js := natstest.Connect(b, srv)
		obs, _ := newBucket(b, js)
		benchPutGet(b, trajstore.NewObjectStore(js, obs))
	})
	b.Run("dir", func(b *testing.B) {
		s, err := trajstore.NewDirStore(filepath.Join(b.TempDir(), "artifacts"))
		if err != nil {
			b.Fatal(err)
		}
		benchPutGet(b, s)
	})
}

func benchPutGet(b *testing.B, s trajstore.Store) {
	ctx := context.Background()
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	b.SetBytes(int64(len(data)))
	var i uint64
	for b.Loop() {
		i++
		binary.BigEndian.PutUint64(data, i)
		name, err := trajstore.NameFor("tenant-1", "run-1", data)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Put(ctx, name, data); err != nil {
			b.Fatal(err)
		}
		got, err := s.Get(ctx, name)
		if err != nil || !bytes.Equal(got, data) {
			b.Fatalf("Get = %d bytes, %v", len(got), err)
		}
	}
}
