package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
)

// TestNatsSubTranslate runs the README's command with the real nats CLI
// (natscli, pinned in go.mod's tool block): `nats sub 'agentmesh.events.>'
// --translate 'agentmesh decode'` against agentmesh up shows each event of
// a run as one line of JSON, under its Content-Type header. The word
// agentmesh is this test binary run as the agentmesh command.
func TestNatsSubTranslate(t *testing.T) {
	dir := t.TempDir()
	natsBin := filepath.Join(dir, "nats")
	if out, err := exec.Command("go", "build", "-o", natsBin, "github.com/nats-io/natscli/nats").CombinedOutput(); err != nil {
		t.Fatalf("build natscli (go.mod's tool github.com/nats-io/natscli/nats): %v\n%s", err, out)
	}
	m := startUp(t, false)

	// A second subject, outside the events stream, tells when the
	// subscription is in place: natscli logs "Subscribing" before it
	// subscribes.
	const ready = "agentmesh-test.ready"
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(natsBin, "--server", m.url, "sub", "agentmesh.events.>", ready, "--translate", self+" decode")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, asMainEnv+"=1", "GORACE=atexit_sleep_ms=0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout // natscli logs to stderr, messages to stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		lines []string
	)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-read
	})
	output := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}

	nc, err := nats.Connect(m.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	natstest.Eventually(t, 60*time.Second, func() error {
		if err := nc.Publish(ready, []byte(`{"ready":true}`)); err != nil {
			return err
		}
		if !strings.Contains(output(), `{"ready":true}`) {
			return fmt.Errorf("nats sub shows nothing yet:\n%s", output())
		}
		return nil
	})

	io, out, errOut := testIO(nil)
	if code := run(context.Background(), []string{"run", "--server", m.url, "-p", "fixture", "--run-id", "natscli-1", "hello"}, io); code != 0 {
		t.Fatalf("agentmesh run: exit %d\n%s\n%s", code, out, errOut)
	}
	natstest.Eventually(t, 60*time.Second, func() error {
		if !strings.Contains(output(), `"state":"succeeded"`) {
			return fmt.Errorf("no terminal status shown yet:\n%s", output())
		}
		return nil
	})

	var received, decoded int
	kinds := map[string]bool{}
	mu.Lock()
	shown := append([]string(nil), lines...)
	mu.Unlock()
	for _, line := range shown {
		switch {
		case strings.Contains(line, `Received on "agentmesh.events.default.natscli-1"`):
			received++
		case strings.HasPrefix(line, "Content-Type: ") && !strings.Contains(line, wire.TypeEvent.ContentType().String()):
			t.Errorf("event shown with %q, want %s", line, wire.TypeEvent.ContentType())
		case strings.HasPrefix(line, "{") && !strings.Contains(line, `"ready"`):
			var ev struct {
				RunID string `json:"run_id"`
				Kind  string `json:"kind"`
				Seq   uint64 `json:"seq"`
			}
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Errorf("translated body is not JSON: %v: %q", err, line)
				continue
			}
			if ev.RunID != "natscli-1" || ev.Kind == "" || ev.Seq == 0 {
				t.Errorf("translated event %q: run_id, kind or seq missing", line)
			}
			decoded++
			kinds[ev.Kind] = true
		case strings.Contains(line, "Error while translating"):
			t.Errorf("natscli: %s", line)
		}
	}
	if received == 0 || decoded != received {
		t.Errorf("%d events received, %d shown as JSON; want every one:\n%s", received, decoded, output())
	}
	if !kinds["status"] {
		t.Errorf("no status event shown (kinds %v)", kinds)
	}
}
