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

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
