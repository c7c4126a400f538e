//go:build linux

package natstest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	natstest.RunClusterNode() // when a cluster test started this binary as a JetStream node
	os.Exit(m.Run())
}

// TestProxyCutAndHeal: bytes pass through a proxy; a cut closes the
// connections it carries and refuses new ones; after a heal new ones pass.
func TestProxyCutAndHeal(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	p := natstest.NewProxy(t, echo.Addr().String())
	roundTrip := func() error {
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if string(buf) != "ping" {
			return fmt.Errorf("read %q", buf)
		}
		return nil
	}
	if err := roundTrip(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	held, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := held.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(held, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	_ = held.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := held.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection open at the cut: read %v, want it closed", err)
	}
	if err := roundTrip(); err == nil {
		t.Fatal("a new connection passed a cut proxy")
	}
	p.Heal()
	if err := roundTrip(); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
}

// TestPartitionIsolatesNode: a partition of one node of a proxied cluster
// cuts every route of it: no subscription of the others reaches it, its
// JetStream loses the cluster while the majority keeps a meta leader and
// sees it offline; after the heal it is back in the cluster.
func TestPartitionIsolatesNode(t *testing.T) {
	c := natstest.RunPartitionableCluster(t, 3)
	const cut = 2
	// A connection to a node of the majority and one to the node that
	// will be cut off: its client port stays reachable, so it stays.
	major, majorJS := natstest.ConnectURL(t, c.ClientURL(0))
	minor, minorJS := natstest.ConnectURL(t, c.ClientURL(cut))
	sub, err := major.Subscribe("probe", func(m *nats.Msg) { _ = m.Respond([]byte("pong")) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := major.Flush(); err != nil {
		t.Fatal(err)
	}
	reaches := func() error {
		_, err := minor.Request("probe", nil, time.Second)
		return err
	}
	natstest.Eventually(t, 10*time.Second, reaches)
	ctx := context.Background()
	natstest.Eventually(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := majorJS.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.>"}, Replicas: 3})
		return err
	})
	natstest.Eventually(t, 30*time.Second, func() error { return replicasCurrent(ctx, majorJS, 2) })

	c.Partition(cut)
	natstest.Eventually(t, 5*time.Second, func() error {
		if err := reaches(); !errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("a request from the cut-off node: %v, want no responders", err)
		}
		return nil
	})
	if !minor.IsConnected() {
		t.Fatal("the client of the cut-off node lost its connection")
	}
	// Raft notices a lost quorum after 10 to 20 s.
	natstest.Eventually(t, 40*time.Second, func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := minorJS.AccountInfo(ctx); err == nil {
			return errors.New("the cut-off node still answers JetStream requests")
		}
		return nil
	})
	natstest.Eventually(t, 40*time.Second, func() error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		cl, err := streamCluster(ctx, majorJS)
		if err != nil {
			return err
		}
		if cl.Leader == fmt.Sprintf("n%d", cut) {
			return fmt.Errorf("stream P: still led by n%d", cut)
		}
		for _, r := range cl.Replicas {
			if r.Name == fmt.Sprintf("n%d", cut) && !r.Offline && r.Current {
				return fmt.Errorf("the majority sees n%d current", cut)
			}
		}
		if _, err := majorJS.Publish(ctx, "p.x", []byte("stored by the majority")); err != nil {
			return err
		}
		return nil
	})

	c.Heal(cut)
	natstest.Eventually(t, 10*time.Second, reaches)
	natstest.Eventually(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := minorJS.AccountInfo(ctx); err != nil {
			return err
		}
		return replicasCurrent(ctx, majorJS, 2)
	})
}

// streamCluster is stream P's cluster information, once it has a leader.
func streamCluster(ctx context.Context, js jetstream.JetStream) (*jetstream.ClusterInfo, error) {
	st, err := js.Stream(ctx, "P")
	if err != nil {
		return nil, err
	}
	cl := st.CachedInfo().Cluster
	if cl == nil || cl.Leader == "" {
		return nil, errors.New("stream P has no leader")
	}
	return cl, nil
}

// replicasCurrent checks that stream P has a leader and n current followers.
func replicasCurrent(ctx context.Context, js jetstream.JetStream, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cl, err := streamCluster(ctx, js)
	if err != nil {
		return err
	}
	current := 0
	for _, r := range cl.Replicas {
		if r.Current && !r.Offline {
			current++
		}
	}
	if current < n {
		return fmt.Errorf("stream P: %d current followers of %d", current, n)
	}
	return nil
}
