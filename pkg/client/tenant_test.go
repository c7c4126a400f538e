package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// storeRun stores items as run runID's events (of tenant acme).
func (f *follow) storeRun(runID string, items ...item) {
	f.t.Helper()
	for _, it := range items {
		if _, err := f.js.Publish(context.Background(), subject.Names{}.Events("acme", runID), it.encode(f.t, runID)); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *follow) followTenant() *client.TenantFollower {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tf, err := f.c.FollowTenant(ctx, "acme")
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = tf.Close() })
	return tf
}

// collect iterates evs on its own goroutine; wait returns what it yielded.
func collect(evs func(func(wire.Event, error) bool)) (wait func() string) {
	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range evs {
			got = append(got, describe(ev, err))
		}
	}()
	return func() string { <-done; return strings.Join(got, ", ") }
}

func (f *follow) consumers() []string {
	f.t.Helper()
	st, err := f.js.Stream(context.Background(), subject.Names{}.EventsStream())
	if err != nil {
		f.t.Fatal(err)
	}
	var names []string
	for name := range st.ConsumerNames(context.Background()).Name() {
		names = append(names, name)
	}
	return names
}

// unpackCases through a TenantFollower: stored
// before it follows (each iterator reads them on a consumer of its own)
// and after (the follower's one consumer hands them out).
func TestTenantFollowerUnpacksBatches(t *testing.T) {
	for _, when := range []string{"before", "after"} {
		for _, tt := range unpackCases {
			t.Run(when+"/"+tt.name, func(t *testing.T) {
				f := startFollow(t)
				// Another run of the tenant, and another tenant, in between.
				f.storeRun("other", status(1, wire.StateRunning))
				if when == "before" {
					f.store(tt.stored...)
				}
				tf := f.followTenant()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				wait := collect(tf.Events(ctx, f.runID, tt.from))
				if when == "after" {
					natstest.Eventually(t, 10*time.Second, func() error {
						if n := tf.Following(); n != 1 {
							return fmt.Errorf("following %d, want 1", n)
						}
						return nil
					})
					for _, it := range tt.stored {
						f.storeRun("other", chunks(2, 2, "o"))
						if _, err := f.js.Publish(ctx, subject.Names{}.Events("zeta", f.runID), it.encode(t, f.runID)); err != nil {
							t.Fatal(err)
						}
						f.store(it)
					}
				}
				if s := wait(); s != tt.want {
					t.Errorf("yielded %s\nwant    %s", s, tt.want)
				}
			})
		}
	}
}

// One consumer for many runs: runs followed from before their first event
// and runs with history, each yielded whole, in order, to its own
// iterators (two on one run), while the stream holds only the follower's
// consumer.
func TestTenantFollowerFollowsManyRunsOnOneConsumer(t *testing.T) {
	f := startFollow(t)
	f.storeRun("old", status(1, wire.StateRunning), chunks(2, 3, "x"))
	tf := f.followTenant()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const runs = 20
	var waits []func() string
	for i := range runs {
		waits = append(waits, collect(tf.Events(ctx, fmt.Sprint("r", i), 1)))
	}
	waits = append(waits, collect(tf.Events(ctx, "r0", 2)))
	oldWait := collect(tf.Events(ctx, "old", 1))
	natstest.Eventually(t, 10*time.Second, func() error {
		if n := tf.Following(); n != runs+2 {
			return fmt.Errorf("following %d, want %d", n, runs+2)
		}
		return nil
	})
	if c := f.consumers(); len(c) != 1 {
		t.Errorf("consumers on the events stream: %v, want the follower's one", c)
	}
	for seq := uint64(1); seq <= 4; seq++ {
		for i := range runs {
			it := chunks(seq, seq, "a")
			switch seq {
			case 1:
				it = status(1, wire.StateRunning)
			case 4:
				it = status(4, wire.StateSucceeded)
			}
			f.storeRun(fmt.Sprint("r", i), it)
		}
	}
	f.storeRun("old", status(4, wire.StateCancelled))
	for i, wait := range waits[:runs] {
		if s, want := wait(), "1 running, 2 a2, 3 a3, 4 succeeded"; s != want {
			t.Errorf("run r%d: yielded %s, want %s", i, s, want)
		}
	}
	if s, want := waits[runs](), "2 a2, 3 a3, 4 succeeded"; s != want {
		t.Errorf("run r0 from 2: yielded %s, want %s", s, want)
	}
	if s, want := oldWait(), "1 running, 2 x2, 3 x3, 4 cancelled"; s != want {
		t.Errorf("run old: yielded %s, want %s", s, want)
	}
	if n := tf.Following(); n != 0 {
		t.Errorf("following %d after every run ended, want 0", n)
	}
}

// An iterator that does not read while more than MaxTenantQueue of its
// run's messages arrive reads on through a consumer of its own, from the
// last event handed to it, without a gap.
func TestTenantFollowerIteratorFallsBehind(t *testing.T) {
	f := startFollow(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tf, next := f.pullRun(ctx)
	f.store(status(1, wire.StateRunning))
	if got := next(); got != "1 running" {
		t.Fatalf("first event: %s", got)
	}
	n := uint64(client.MaxTenantQueue + 50)
	for seq := uint64(2); seq <= n; seq++ {
		f.store(chunks(seq, seq, "a"))
	}
	f.store(status(n+1, wire.StateSucceeded))
	// The iterator is blocked handing out seq 2, so the follower's queue
	// for it only grows; wait until the follower delivered enough to
	// overflow it (deliveries can lag the stores on a loaded machine, and
	// an iterator pulled meanwhile would never fall behind).
	natstest.Eventually(t, 10*time.Second, func() error {
		if !tf.Behind(f.runID) {
			return errors.New("the iterator has not fallen behind yet")
		}
		return nil
	})
	for seq := uint64(2); seq <= n; seq++ {
		if got, want := next(), fmt.Sprintf("%d a%d", seq, seq); got != want {
			t.Fatalf("yielded %s, want %s", got, want)
		}
	}
	// The terminal status waits on the iterator's own consumer.
	if c := f.consumers(); len(c) != 2 {
		t.Errorf("consumers %v, want the follower's and the iterator's own", c)
	}
	if got, want := next(), fmt.Sprintf("%d succeeded", n+1); got != want {
		t.Fatalf("yielded %s, want %s", got, want)
	}
}

// pullRun follows f's run from seq 1 through a tenant follower of its
// own and pulls its events one at a time (iterPull) until ctx ends; the
// pull is stopped when the test ends.
func (f *follow) pullRun(ctx context.Context) (*client.TenantFollower, func() string) {
	f.t.Helper()
	tf := f.followTenant()
	next, stop := iterPull(tf.Events(ctx, f.runID, 1))
	f.t.Cleanup(stop)
	return tf, next
}

// iterPull pulls from evs one event at a time, as "seq what".
func iterPull(evs func(func(wire.Event, error) bool)) (func() string, func()) {
	ch := make(chan string)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(ch)
		for ev, err := range evs {
			select {
			case ch <- describe(ev, err):
			case <-quit:
				return
			}
		}
	})
	return func() string { return <-ch }, func() { close(quit); wg.Wait() }
}

// The follower's consumer deleted under it (as when its server goes away):
// it follows again on a fresh one from the last event it handed out, and
// every iterator reads on without a gap.
func TestTenantFollowerFollowsAgainAfterItsConsumerIsGone(t *testing.T) {
	f := startFollow(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, next := f.pullRun(ctx)
	f.store(status(1, wire.StateRunning), chunks(2, 3, "a"))
	for _, want := range []string{"1 running", "2 a2", "3 a3"} {
		if got := next(); got != want {
			t.Fatalf("yielded %s, want %s", got, want)
		}
	}
	first := f.consumers()
	if len(first) != 1 {
		t.Fatalf("consumers %v, want one", first)
	}
	if err := f.js.DeleteConsumer(ctx, subject.Names{}.EventsStream(), first[0]); err != nil {
		t.Fatal(err)
	}
	f.store(chunks(4, 4, "b"))
	natstest.Eventually(t, 20*time.Second, func() error {
		if c := f.consumers(); len(c) != 1 || c[0] == first[0] {
			return fmt.Errorf("consumers %v, want one other than %s", c, first[0])
		}
		return nil
	})
	f.store(status(5, wire.StateSucceeded))
	for _, want := range []string{"4 b4", "5 succeeded"} {
		if got := next(); got != want {
			t.Fatalf("yielded %s, want %s", got, want)
		}
	}
}

// Start follows a run it generated the id of with no consumer but the
// follower's; Close ends the iterators still following with
// ErrFollowerClosed, deletes the consumer, and later calls are refused.
func TestTenantFollowerStartAndClose(t *testing.T) {
	f := startFollow(t)
	tf := f.followTenant()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := tf.Start(ctx, wire.RunRequest{Tenant: "other", Principal: "p", Profile: "fixture"}); !errors.Is(err, client.ErrOtherTenant) {
		t.Fatalf("Start of another tenant's run: %v, want ErrOtherTenant", err)
	}
	id, evs, err := tf.Start(ctx, wire.RunRequest{Tenant: "acme", Principal: "p", Profile: "fixture"})
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iterPull(evs)
	defer stop()
	f.storeRun(id, status(1, wire.StateAccepted))
	if got := next(); got != "1 accepted" {
		t.Fatalf("yielded %s, want 1 accepted", got)
	}
	if c := f.consumers(); len(c) != 1 {
		t.Errorf("consumers %v, want the follower's one", c)
	}
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tf.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := next(); got != "0 error" {
		t.Fatalf("after Close yielded %s, want an error", got)
	}
	if !errors.Is(tf.Err(), client.ErrFollowerClosed) {
		t.Errorf("Err() = %v, want ErrFollowerClosed", tf.Err())
	}
	for _, err := range tf.Events(ctx, "r9", 1) {
		if !errors.Is(err, client.ErrFollowerClosed) {
			t.Errorf("Events after Close: %v, want ErrFollowerClosed", err)
		}
	}
	if _, _, err := tf.Start(ctx, wire.RunRequest{Tenant: "acme", Principal: "p", Profile: "fixture"}); !errors.Is(err, client.ErrFollowerClosed) {
		t.Errorf("Start after Close: %v, want ErrFollowerClosed", err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if c := f.consumers(); len(c) != 0 {
			return fmt.Errorf("consumers %v after Close, want none", c)
		}
		return nil
	})
	for _, err := range tf.Events(ctx, "bad.id", 1) {
		if !errors.Is(err, subject.ErrInvalidToken) {
			t.Errorf("Events of run id bad.id: %v, want ErrInvalidToken", err)
		}
	}
}
