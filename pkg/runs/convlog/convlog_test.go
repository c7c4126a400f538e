package convlog_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/runs/convlog"
	"github.com/agentmesh/agentmesh/pkg/subject"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// get reads a conversation's log and its encoded size.
func get(t *testing.T, kv jetstream.KeyValue, tenant, conv string) (convlog.Log, int) {
	t.Helper()
	e, err := kv.Get(context.Background(), subject.ConversationKey(tenant, conv))
	if err != nil {
		t.Fatal(err)
	}
	l, err := convlog.Decode(e.Value())
	if err != nil {
		t.Fatal(err)
	}
	return l, len(e.Value())
}

// Recording a run again (a redelivered submission) changes nothing; two
// routers recording at once, each with its own runs and each run twice,
// lose none and duplicate none; a tenant's log is its own key.
func TestRecordOnceEachConcurrently(t *testing.T) {
	_, _, js := natstest.RunMesh(t)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, subject.Names{}.ConversationsBucket())
	if err != nil {
		t.Fatal(err)
	}
	if err := convlog.Record(ctx, js, kv, "acme", "conv-1", convlog.Run{RunID: "r0", Created: 1, Prompt: "hello"}); err != nil {
		t.Fatal(err)
	}
	if err := convlog.Record(ctx, js, kv, "acme", "conv-1", convlog.Run{RunID: "r0", Created: 2, Prompt: "again"}); err != nil {
		t.Fatal(err)
	}
	if l, _ := get(t, kv, "acme", "conv-1"); len(l.Runs) != 1 || l.Runs[0] != (convlog.Run{RunID: "r0", Created: 1, Prompt: "hello"}) {
		t.Fatalf("after a repeat: %+v", l)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for w := range 2 {
		_, wjs := natstest.ConnectURL(t, js.Conn().ConnectedUrl())
		wkv, err := wjs.KeyValue(ctx, subject.Names{}.ConversationsBucket())
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := range 10 {
				id := fmt.Sprintf("w%d-%d", w, i)
				for range 2 {
					errs <- convlog.Record(ctx, wjs, wkv, "acme", "conv-1", convlog.Run{RunID: id})
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	l, _ := get(t, kv, "acme", "conv-1")
	seen := map[string]int{}
	last := map[int]int{0: -1, 1: -1}
	for _, r := range l.Runs {
		seen[r.RunID]++
		var w, i int
		if _, err := fmt.Sscanf(r.RunID, "w%d-%d", &w, &i); err == nil {
			if i <= last[w] {
				t.Errorf("writer %d's runs out of order: %d after %d", w, i, last[w])
			}
			last[w] = i
		}
	}
	if len(l.Runs) != 21 || l.Runs[0].RunID != "r0" {
		t.Errorf("%d runs, first %s; want 21, first r0", len(l.Runs), l.Runs[0].RunID)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("run %s recorded %d times", id, n)
		}
	}
	if _, err := kv.Get(ctx, subject.ConversationKey("other", "conv-1")); err == nil {
		t.Error("tenant other has a log of acme's conversation")
	}
}

// The log keeps the newest MaxRuns runs within MaxBytes, each prompt cut
// at MaxPrompt on a rune boundary and marked.
func TestRecordBounds(t *testing.T) {
	_, _, js := natstest.RunMesh(t)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, subject.Names{}.ConversationsBucket())
	if err != nil {
		t.Fatal(err)
	}
	for i := range convlog.MaxRuns + 5 {
		if err := convlog.Record(ctx, js, kv, "acme", "many", convlog.Run{RunID: fmt.Sprintf("r%d", i), Prompt: "short"}); err != nil {
			t.Fatal(err)
		}
	}
	if l, _ := get(t, kv, "acme", "many"); len(l.Runs) != convlog.MaxRuns || l.Runs[0].RunID != "r5" || l.Runs[convlog.MaxRuns-1].RunID != fmt.Sprintf("r%d", convlog.MaxRuns+4) {
		t.Fatalf("%d runs, from %s to %s; want the newest %d", len(l.Runs), l.Runs[0].RunID, l.Runs[len(l.Runs)-1].RunID, convlog.MaxRuns)
	}

	big := "a" + strings.Repeat("é", convlog.MaxPrompt/2) // 2 bytes a rune: MaxPrompt falls inside one
	n := convlog.MaxBytes/convlog.MaxPrompt + 2
	for i := range n {
		if err := convlog.Record(ctx, js, kv, "acme", "big", convlog.Run{RunID: fmt.Sprintf("r%d", i), Prompt: big}); err != nil {
			t.Fatal(err)
		}
	}
	l, size := get(t, kv, "acme", "big")
	if size > convlog.MaxBytes || len(l.Runs) >= n || l.Runs[len(l.Runs)-1].RunID != fmt.Sprintf("r%d", n-1) {
		t.Fatalf("%d bytes, %d runs, the last %s; want at most %d bytes, the oldest of %d runs dropped", size, len(l.Runs), l.Runs[len(l.Runs)-1].RunID, convlog.MaxBytes, n)
	}
	for _, r := range l.Runs {
		if !r.PromptTruncated || len(r.Prompt) > convlog.MaxPrompt || !utf8.ValidString(r.Prompt) || !strings.HasPrefix(big, r.Prompt) {
			t.Errorf("run %s: prompt of %d bytes, truncated %v, valid %v", r.RunID, len(r.Prompt), r.PromptTruncated, utf8.ValidString(r.Prompt))
		}
	}
}
