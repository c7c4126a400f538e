package jsretry_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/nats-io/nats.go/jetstream"
)

// TestKeys lists a bucket of 600 keys (more than the lister's buffer of
// 256) whole and bounded: a bounded listing gives the first keys in the
// order they were written, filtered, and leaves no goroutine behind
// (TestMain's goleak), also when it stops with the lister's buffer full.
func TestKeys(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "keys"})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 600 {
		tenant := []string{"acme", "globex"}[i%2]
		k := fmt.Sprintf("%s.run-%03d", tenant, i)
		if _, err := kv.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
		want = append(want, k)
	}
	if got, err := jsretry.Keys(ctx, kv, ">", 0); err != nil || !slices.Equal(got, want) {
		t.Fatalf("every key: %d keys, %v; want the 600 in write order", len(got), err)
	}
	for _, n := range []int{1, 10, 257, 600, 700} {
		got, err := jsretry.Keys(ctx, kv, ">", n)
		if err != nil || !slices.Equal(got, want[:min(n, len(want))]) {
			t.Fatalf("n=%d: %d keys, %v; want the first %d", n, len(got), err, min(n, len(want)))
		}
	}
	got, err := jsretry.Keys(ctx, kv, "globex.*", 3)
	if err != nil || !slices.Equal(got, []string{"globex.run-001", "globex.run-003", "globex.run-005"}) {
		t.Fatalf("globex.* n=3: %q, %v", got, err)
	}
	if got, err := jsretry.Keys(ctx, kv, "initech.*", 5); err != nil || len(got) != 0 {
		t.Fatalf("no key matches: %q, %v; want none, no error", got, err)
	}
}
