// Package natstest runs an embedded JetStream server for tests and gives
// them polling helpers, so tests synchronize on conditions and never sleep.
package natstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RunJetStream starts a JetStream server on a random loopback port with its
// store in a temporary directory; it is shut down when the test ends.
func RunJetStream(t testing.TB) *server.Server {
	t.Helper()
	return RunJetStreamWith(t, nil)
}

// RunJetStreamWith is RunJetStream with the server's options changed by
// opt first (nil: none), for a measurement of one of them (its sync
// policy, say).
func RunJetStreamWith(t testing.TB, opt func(*server.Options)) *server.Server {
	t.Helper()
	s, err := startWith(t.TempDir(), opt)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// Start is RunJetStream and Connect for code that has no testing.TB, an
// Example: the server's store is a new temporary directory, and stop
// closes the connection, shuts the server down, waits for it and removes
// the directory. The caller calls stop once. Start panics if the server
// cannot start or be reached, since such code has no test to fail.
func Start() (nc *nats.Conn, js jetstream.JetStream, stop func()) {
	dir, err := os.MkdirTemp("", "natstest")
	if err != nil {
		panic(fmt.Sprintf("natstest: %v", err))
	}
	s, err := start(dir)
	if err == nil {
		if nc, err = nats.Connect(s.ClientURL()); err == nil {
			js, err = jetstream.New(nc)
		}
		if err != nil {
			s.Shutdown()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		panic(fmt.Sprintf("natstest: %v", err))
	}
	return nc, js, func() { nc.Close(); s.Shutdown(); s.WaitForShutdown(); os.RemoveAll(dir) }
}

// start starts a JetStream server on a random loopback port with its
// store in dir and waits until it takes connections.
func start(dir string) (*server.Server, error) { return startWith(dir, nil) }

// startWith is start with the options changed by opt first (nil: none).
func startWith(dir string, opt func(*server.Options)) (*server.Server, error) {
	o := &server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: dir, NoLog: true, NoSigs: true,
	}
	if opt != nil {
		opt(o)
	}
	s, err := server.NewServer(o)
	if err != nil {
		return nil, err
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("server not ready")
	}
	return s, nil
}

// Connect opens a connection and a JetStream context to s, closed when the
// test ends.
func Connect(t testing.TB, s *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return ConnectURL(t, s.ClientURL())
}

// ConnectURL is Connect for a server at url, of this process or another:
// it reconnects without end.
func ConnectURL(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

// RunMesh is RunJetStream and Connect with the mesh's default topology
// ensured (topology.Ensure of topology.Config{}): every stream, bucket and
// the object store exist before it returns.
func RunMesh(t testing.TB) (*server.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := RunJetStream(t)
	nc, js := Connect(t, s)
	if err := topology.Ensure(context.Background(), js, topology.Config{}); err != nil {
		t.Fatalf("natstest: ensure topology: %v", err)
	}
	return s, nc, js
}

// Eventually calls f every 10ms until it returns nil, failing the test with
// f's last error if within does not suffice.
func Eventually(t testing.TB, within time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("natstest: not within %s: %v", within, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Errorf is fmt.Errorf, for Eventually callbacks.
var Errorf = fmt.Errorf
