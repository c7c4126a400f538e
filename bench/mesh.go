package bench

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of MeshConfig.
const (
	DefaultMaxActive    = 32
	DefaultWorkQueueMax = 100_000
	// DefaultStopTimeout bounds how long the cleanup waits for the mesh.
	DefaultStopTimeout = 30 * time.Second
)

// Tenant is the tenant every measured run is submitted under.
const Tenant = "bench"

// MeshConfig configures StartMesh.
type MeshConfig struct {
	// MaxActive is the runner host's DefaultMaxActive: how many runs of
	// each adapter it executes at once (default 32).
	MaxActive int
	// WorkQueueMax is the topology's WorkQueueMax, large enough by default
	// (100,000) that no measured run is refused admission.
	WorkQueueMax int64
	// Log receives the services' logs (default: warnings and errors on
	// stderr, so that a misbehaving mesh says why).
	Log *slog.Logger
	// Adapters and Profiles are served beside the fixture adapter and the
	// built-in profiles (CLI.Adapter and CLI.Profile, for instance).
	Adapters []adapter.Adapter
	Profiles []profile.Profile
	// Replicas of every stream and bucket (default 1; 3 on a cluster).
	Replicas int
}

func (c *MeshConfig) setDefaults() {
	if c.MaxActive == 0 {
		c.MaxActive = DefaultMaxActive
	}
	if c.WorkQueueMax == 0 {
		c.WorkQueueMax = DefaultWorkQueueMax
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
}

// Mesh is a whole mesh in this process (mesh.Run: router, runner host and
// sweeper, each on a connection of its own, with the fixture adapter
// reading scripts from a temporary directory, and any adapters of
// MeshConfig) and a client on a connection of its own.
// Measurements must not overlap, on one Mesh or with a Raw on the same
// server's other stream: each ends by reaping released consumers, and
// timings taken side by side would measure each other.
type Mesh struct {
	client  *client.Client
	tenant  *client.TenantFollower // set by FollowTenant: runs are followed through it
	js      jetstream.JetStream    // the client's, for reaping its consumers
	scripts string
	events  string // the events stream

	mu sync.Mutex // serializes writeScript
}

// StartMesh starts a mesh on srv and blocks until it accepts submissions.
// The mesh is stopped when tb ends; tb fails if it returned an error or did
// not stop within DefaultStopTimeout.
func StartMesh(tb testing.TB, srv *server.Server, cfg MeshConfig) *Mesh {
	tb.Helper()
	return StartMeshAt(tb, srv.ClientURL(), cfg)
}

// StartMeshAt is StartMesh on the server at url, which may run in another
// process (StartServerProcess).
func StartMeshAt(tb testing.TB, url string, cfg MeshConfig) *Mesh {
	tb.Helper()
	cfg.setDefaults()
	m := &Mesh{scripts: tb.TempDir()}
	fx, err := fixture.New(fixture.Config{ScriptsDir: m.scripts})
	if err != nil {
		tb.Fatalf("bench: fixture: %v", err)
	}
	adapters, err := adapter.NewRegistry(append([]adapter.Adapter{fx}, cfg.Adapters...)...)
	if err != nil {
		tb.Fatalf("bench: adapters: %v", err)
	}
	var ps []profile.Profile
	for _, p := range profile.Builtin().All() {
		ps = append(ps, *p)
	}
	profiles, err := profile.New(append(ps, cfg.Profiles...)...)
	if err != nil {
		tb.Fatalf("bench: profiles: %v", err)
	}
	// The services' connections are made as the service binaries make
	// theirs (service.Connect: its async publish cap is part of what is
	// measured), one per service (mesh.Config.Connect), plus this one for
	// the topology; each is closed after the mesh has stopped.
	nc, js, err := service.Connect(url, "bench-mesh", cfg.Log)
	if err != nil {
		tb.Fatalf("bench: %v", err)
	}
	tb.Cleanup(nc.Close)
	d := service.Deps{
		NC: nc, JS: js, Log: cfg.Log,
		Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{},
	}
	var mc mesh.Config
	// Each service on its own connection, made as its binary makes it.
	mc.Connect = func(name string) (service.Deps, error) {
		nc, js, err := service.Connect(url, "bench-"+name, cfg.Log)
		return service.Deps{NC: nc, JS: js}, err
	}
	mc.Runner.DefaultMaxActive = cfg.MaxActive
	mc.Topology.WorkQueueMax = cfg.WorkQueueMax
	mc.Topology.Replicas = cfg.Replicas
	mc.Topology.WorkQueueTenantMax = cfg.WorkQueueMax

	exited := runMesh(tb, "mesh", d, profiles, adapters, mc)

	cnc, cjs := natstest.ConnectURL(tb, url)
	m.js, m.events = cjs, d.Names.EventsStream()
	if m.client, err = client.New(cnc, subject.Names{}); err != nil {
		tb.Fatalf("bench: client: %v", err)
	}
	// Ready once the router's consumer exists (the topology is complete
	// then) and the runner host answers a ping (it has set up and is
	// pulling). A burst of submissions and followers the moment the router
	// is up could otherwise starve the runner's own set-up of the
	// JetStream API, and fail the mesh where a runner started ahead of its
	// clients would not.
	ping, err := micro.ControlSubject(micro.PingVerb, "agentmesh-runner", "")
	if err != nil {
		tb.Fatalf("bench: %v", err)
	}
	natstest.Eventually(tb, 30*time.Second, func() error {
		if err := exited(); err != nil {
			return err
		}
		if _, err := js.Consumer(context.Background(), d.Names.SubmitStream(), d.Names.RouterConsumer()); err != nil {
			return err
		}
		if _, err := cnc.Request(ping, nil, time.Second); err != nil {
			return fmt.Errorf("runner host: %w", err)
		}
		return nil
	})
	return m
}

// runMesh runs mesh.Run with d, profiles, adapters and mc until tb ends,
// failing tb if it returns an error or does not stop within
// DefaultStopTimeout; what names it in those failures. The function it
// returns reports an error once the mesh has exited, nil while it runs.
func runMesh(tb testing.TB, what string, d service.Deps, profiles *profile.Registry, adapters *adapter.Registry, mc mesh.Config) (exited func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = mesh.Run(ctx, d, profiles, adapters, mc)
	}()
	tb.Cleanup(func() {
		cancel()
		select {
		case <-done:
			if runErr != nil {
				tb.Errorf("bench: %s: %v", what, runErr)
			}
		case <-time.After(DefaultStopTimeout):
			tb.Errorf("bench: %s did not stop within %s", what, DefaultStopTimeout)
		}
	})
	return func() error {
		select {
		case <-done:
			return fmt.Errorf("%s exited: %v", what, runErr)
		default:
			return nil
		}
	}
}

// fixtureRequest is the fixture adapter's request on the wire.
type fixtureRequest struct {
	Prompt string `msgpack:"prompt"`
	Script string `msgpack:"script"`
}

// request writes the script of w if needed and returns the encoded fixture
// request that replays it.
func (m *Mesh) request(w Workload) ([]byte, error) {
	name, err := m.script(w)
	if err != nil {
		return nil, err
	}
	return wire.Marshal(&fixtureRequest{Prompt: "bench", Script: name})
}

// Script writes the fixture script of w if needed and returns its name,
// for a run submitted another way (through the HTTP gateway, say) to
// replay the same stream.
func (m *Mesh) Script(w Workload) (string, error) { return m.script(w) }

// script writes the script of w if needed and returns its name.
func (m *Mesh) script(w Workload) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return writeScript(m.scripts, w)
}

// Throughput submits w.Runs fixture runs at once, each replaying w.Chunks
// text chunks as fast as the runner takes them, and follows each through
// client.Events from its own goroutine. It blocks until every run has
// ended and returns the chunks received and the time from the first
// submission to the last terminal status. It fails if a run does not
// succeed with exactly w.Chunks chunks; a stuck run blocks until ctx ends.
// The client's released consumers are reaped afterwards, untimed.
func (m *Mesh) Throughput(ctx context.Context, w Workload) (Throughput, error) {
	if err := w.validate(); err != nil {
		return Throughput{}, err
	}
	req, err := m.request(w)
	if err != nil {
		return Throughput{}, err
	}
	return m.throughput(ctx, "fixture", req, w)
}

// throughput submits w.Runs runs of req to prof at once and follows each
// to its end; see Throughput.
func (m *Mesh) throughput(ctx context.Context, prof string, req []byte, w Workload) (Throughput, error) {
	elapsed, err := concurrently(w.Runs, func(int) error { return m.run(ctx, prof, req, w.Chunks, nil) })
	if err != nil {
		return Throughput{}, err
	}
	if err := reap(ctx, m.js, m.events); err != nil {
		return Throughput{}, err
	}
	return Throughput{Items: w.Runs * w.Chunks, Elapsed: elapsed}, nil
}

// FirstChunkLatency runs p.Warmup then p.Samples fixture runs of one text
// chunk, one after the other, and returns for each measured run the time
// from calling client.Submit to client.Events yielding its first chunk.
// Each run is followed to its terminal status before the next starts; the
// client's released consumers are reaped every reapEvery runs, between
// samples.
func (m *Mesh) FirstChunkLatency(ctx context.Context, p Probe) (Latencies, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	req, err := m.request(Workload{Runs: 1, Chunks: 1, ChunkBytes: p.ChunkBytes})
	if err != nil {
		return nil, err
	}
	return m.ProfileFirstChunkLatency(ctx, "fixture", req, 1, p)
}

// run submits one run of req to profile prof and follows its events to the
// terminal status, calling first (if not nil) when the first chunk of any
// type arrives. It returns an error unless the run succeeded with exactly
// want text chunks. (A fixture script of the benchmarks holds text chunks
// only; a CLI run adds a system and a result chunk.)
func (m *Mesh) run(ctx context.Context, prof string, req []byte, want int, first func()) error {
	id, events, err := m.submitAndFollow(ctx, wire.RunRequest{Tenant: Tenant, Principal: "bench", Profile: prof, Request: req})
	if err != nil {
		return err
	}
	chunks, seen := 0, false
	var last wire.Event
	for ev, err := range events {
		if err != nil {
			return fmt.Errorf("run %s: %d of %d text chunks received, last event %s: %w", id, chunks, want, describe(last), err)
		}
		last = ev
		if ev.Kind == wire.KindChunk {
			if !seen && first != nil {
				first()
			}
			seen = true
			if ev.Chunk != nil && ev.Chunk.Type == wire.ChunkText {
				chunks++
			}
		}
	}
	switch {
	case !last.Terminal():
		return fmt.Errorf("run %s: events ended at %s without a terminal status", id, describe(last))
	case last.Status.State != wire.StateSucceeded:
		return fmt.Errorf("run %s: ended %s after %d of %d text chunks: %v", id, last.Status.State, chunks, want, last.Status.Error)
	case chunks != want:
		return fmt.Errorf("run %s: succeeded with %d text chunks, want %d", id, chunks, want)
	}
	return nil
}

// submitAndFollow is the client's call sequence for one run, the same in
// every measurement of the mesh: it submits req and returns the run id and
// the run's events from seq 1. The timed sections of the latency and
// throughput measurements start before it.
func (m *Mesh) submitAndFollow(ctx context.Context, req wire.RunRequest) (string, iter.Seq2[wire.Event, error], error) {
	if m.tenant != nil {
		return m.tenant.Start(ctx, req)
	}
	return m.client.Start(ctx, req)
}

// FollowTenant makes the mesh's measurements follow their runs through
// one client.TenantFollower of the bench tenant, made now and closed when
// tb ends, instead of a consumer for each run (client.Start).
func (m *Mesh) FollowTenant(tb testing.TB) {
	tb.Helper()
	t, err := m.client.FollowTenant(context.Background(), Tenant)
	if err != nil {
		tb.Fatalf("bench: follow tenant: %v", err)
	}
	tb.Cleanup(func() { _ = t.Close() })
	m.tenant = t
}

// describe names an event for error messages: "seq 57 (chunk text)".
func describe(ev wire.Event) string {
	switch {
	case ev.Seq == 0:
		return "none"
	case ev.Kind == wire.KindChunk && ev.Chunk != nil:
		return fmt.Sprintf("seq %d (chunk %s)", ev.Seq, ev.Chunk.Type)
	case ev.Status != nil:
		return fmt.Sprintf("seq %d (status %s)", ev.Seq, ev.Status.State)
	}
	return fmt.Sprintf("seq %d (%s)", ev.Seq, ev.Kind)
}
