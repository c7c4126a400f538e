package trajstore_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines, except one that nats.go v1.55
// leaks itself: jetstream's ObjectStore.Put makes a JetStream context of
// its own, whose first async publish starts resetPendingAcksOnReconnect,
// and defers cleanupReplySub, which sets the status channel that goroutine
// has yet to read to nil when it runs first; the goroutine then blocks on
// a nil channel for good. Which runs first is the scheduler's choice (about
// one package run in six under -race here), so no test of ours can avoid
// it; nothing else is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}

// publishMeta writes an object's meta message as jetstream's object store
// does (a rollup of the name's meta subject), for tests that build a state
// the Store API cannot reach, such as a crash between two steps.
func publishMeta(ctx context.Context, js jetstream.JetStream, bucket string, info *jetstream.ObjectInfo) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	m := nats.NewMsg(fmt.Sprintf("$O.%s.M.%s", bucket, base64.URLEncoding.EncodeToString([]byte(info.Name))))
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Data = b
	_, err = js.PublishMsg(ctx, m)
	return err
}
