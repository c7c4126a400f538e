package trajstore_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(natsPutEnv); spec != "" {
		os.Exit(natsPutMain(spec))
	}
	goleak.VerifyTestMain(m)
}

// publishMeta writes an object's meta message as jetstream's object store
// does (a rollup of the name's meta subject), for tests that build a state
// the Store API cannot reach, such as a crash between two steps.
func publishMeta(ctx context.Context, js jetstream.JetStream, bucket string, info *jetstream.ObjectInfo) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	m := nats.NewMsg(metaSubject(bucket, info.Name))
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Data = b
	_, err = js.PublishMsg(ctx, m)
	return err
}

func metaSubject(bucket, name string) string {
	return fmt.Sprintf("$O.%s.M.%s", bucket, base64.URLEncoding.EncodeToString([]byte(name)))
}

// natsPutEnv makes the test binary put one object with nats.go's own
// ObjectStore.PutBytes and exit (natsPut). It runs in a process of its
// own because that PutBytes sometimes leaks a goroutine (the reason the
// package writes objects itself), which goleak would report against this
// package's tests.
const natsPutEnv = "TRAJSTORE_TEST_NATS_PUT"

type natsPutSpec struct {
	URL, Bucket, Name, File string
}

// natsPut puts data under name in bucket with nats.go's PutBytes, from a
// child process.
func natsPut(t *testing.T, srv *server.Server, bucket, name string, data []byte) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	spec, err := json.Marshal(natsPutSpec{URL: srv.ClientURL(), Bucket: bucket, Name: name, File: file})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), natsPutEnv+"="+string(spec))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nats.go PutBytes of %s: %v: %s", name, err, out)
	}
}

func natsPutMain(spec string) int {
	var s natsPutSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := natsPutBytes(s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func natsPutBytes(s natsPutSpec) error {
	data, err := os.ReadFile(s.File)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(s.URL)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obs, err := js.ObjectStore(ctx, s.Bucket)
	if err != nil {
		return err
	}
	_, err = obs.PutBytes(ctx, s.Name, data)
	return err
}
