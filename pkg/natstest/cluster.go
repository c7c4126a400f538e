//go:build linux

package natstest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterNodeEnv carries a node's spec to the test binary re-executed as
// that node.
const clusterNodeEnv = "NATSTEST_CLUSTER_NODE"

// nodeSpec is one cluster node's configuration.
type nodeSpec struct {
	Name       string   `json:"name"`
	ClientPort int      `json:"client_port"`
	RoutePort  int      `json:"route_port"`
	Routes     []string `json:"routes"`
	StoreDir   string   `json:"store_dir"`
	// Advertise, when set, is the route address the node gossips to the
	// others (server.ClusterOpts.Advertise).
	Advertise string `json:"advertise,omitempty"`
	// Sync is the JetStream sync_interval: "" the server's default,
	// "always", or a duration.
	Sync string `json:"sync,omitempty"`
}

// ClusterOption changes the nodes RunCluster starts.
type ClusterOption func(*nodeSpec)

// WithSync runs every node with JetStream's sync_interval set to sync:
// "always" (fsync after each write, as deploy/nats/cluster.conf has it)
// or a duration such as "1s".
func WithSync(sync string) ClusterOption {
	return func(s *nodeSpec) { s.Sync = sync }
}

// syncOptions sets o's sync policy from a node spec's Sync.
func syncOptions(o *server.Options, sync string) error {
	switch sync {
	case "":
	case "always":
		o.SyncAlways, o.SyncInterval = true, 2*time.Minute // as the config file's "always" sets them
	default:
		d, err := time.ParseDuration(sync)
		if err != nil || d <= 0 {
			return fmt.Errorf("sync %q: want \"always\" or a positive duration", sync)
		}
		o.SyncInterval = d
	}
	return nil
}

// RunClusterNode makes the test binary a cluster node when RunCluster
// started it as one: it serves until SIGTERM (or SIGKILL) and exits. Call
// it first in TestMain of a package that uses RunCluster; otherwise it
// returns at once.
func RunClusterNode() {
	b := os.Getenv(clusterNodeEnv)
	if b == "" {
		return
	}
	var spec nodeSpec
	if err := json.Unmarshal([]byte(b), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "natstest: node spec:", err)
		os.Exit(2)
	}
	var routes []*url.URL
	for _, r := range spec.Routes {
		u, err := url.Parse(r)
		if err != nil {
			fmt.Fprintln(os.Stderr, "natstest: route:", err)
			os.Exit(2)
		}
		routes = append(routes, u)
	}
	opts := &server.Options{
		ServerName: spec.Name,
		Host:       "127.0.0.1", Port: spec.ClientPort,
		JetStream: true, StoreDir: spec.StoreDir,
		Cluster: server.ClusterOpts{Name: "natstest", Host: "127.0.0.1", Port: spec.RoutePort, Advertise: spec.Advertise},
		Routes:  routes,
		NoLog:   true, NoSigs: true,
	}
	if err := syncOptions(opts, spec.Sync); err != nil {
		fmt.Fprintln(os.Stderr, "natstest:", err)
		os.Exit(2)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natstest: server:", err)
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		fmt.Fprintln(os.Stderr, "natstest: server not ready")
		os.Exit(1)
	}
	fmt.Println("ready")
	<-sigs
	s.Shutdown()
	s.WaitForShutdown()
	os.Exit(0)
}

// Cluster is a JetStream cluster on loopback for tests of what a leader
// election does. Its methods are safe for concurrent use.
//
// Each server is the test binary re-executed as a node (see
// RunClusterNode), not a server in the test's own process: nats-server
// v2.15.3 has a data race on a replicated stream's leader change
// (stream.expectedPerSubjectSequence, written under clMu in
// jetstream_batching.go:493 by the new leader, read without it in
// jetstream_cluster.go:6296), which the race detector would report against
// any test that kills a leader. The nodes run with GORACE exitcode=0 and
// their reports in the test's temp dir; the test's own process, with the
// services under test, stays race-checked. It also makes Kill a crash.
type Cluster struct {
	t     testing.TB
	specs []nodeSpec
	race  string // GORACE log_path prefix for the nodes

	// links[i][j] is the proxy node i dials node j's routes through (nil
	// on the diagonal), or links is nil: the nodes dial each other directly.
	links [][]*Proxy

	mu     sync.Mutex
	nodes  []*exec.Cmd // nil: not running
	done   []chan struct{}
	paused []bool // SIGSTOPped (Pause) and not yet resumed
}

// RunCluster starts n clustered JetStream servers (named n0, n1, ...), each
// with its store in its own temporary directory and on fixed random
// loopback ports, so a server that is killed can be restarted where the
// clients and the other servers expect it. It returns once the cluster
// answers JetStream requests; every server is stopped when the test ends.
// The package's TestMain must call RunClusterNode. opts change every
// node (WithSync).
func RunCluster(t testing.TB, n int, opts ...ClusterOption) *Cluster {
	t.Helper()
	return runCluster(t, n, false, opts)
}

// RunPartitionableCluster is RunCluster with every route connection
// through a Proxy on loopback, one for each ordered pair of nodes, so
// that Partition can cut a node off from the others while its client
// port stays reachable. Each node dials every other node's routes through
// its own proxy to it, and gossips a route address that refuses
// connections: nats-server dials the route addresses it learns from its
// peers (implicit routes) once, and one such dial past the proxies would
// survive a partition.
func RunPartitionableCluster(t testing.TB, n int, opts ...ClusterOption) *Cluster {
	t.Helper()
	return runCluster(t, n, true, opts)
}

// NewCluster is RunCluster with no server started: Restart starts each,
// so a test can start its clients before the cluster has formed. Every
// server started is stopped when the test ends. The package's TestMain
// must call RunClusterNode.
func NewCluster(t testing.TB, n int, opts ...ClusterOption) *Cluster {
	t.Helper()
	return newCluster(t, n, false, opts)
}

func runCluster(t testing.TB, n int, proxied bool, opts []ClusterOption) *Cluster {
	t.Helper()
	c := newCluster(t, n, proxied, opts)
	for i := range n {
		c.Restart(i)
	}
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("natstest: connect to the cluster: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	Eventually(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx) // answered once there is a meta leader
		return err
	})
	return c
}

// newCluster is the cluster of runCluster, no server started.
func newCluster(t testing.TB, n int, proxied bool, opts []ClusterOption) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("natstest: cluster of %d servers", n)
	}
	ports := freePorts(t, 2*n)
	clientPorts, routePorts := ports[:n], ports[n:]
	c := &Cluster{t: t, nodes: make([]*exec.Cmd, n), done: make([]chan struct{}, n), paused: make([]bool, n), race: filepath.Join(t.TempDir(), "race")}
	var nowhere string
	if proxied {
		c.links = make([][]*Proxy, n)
		for i := range n {
			c.links[i] = make([]*Proxy, n)
			for j := range n {
				if j != i {
					c.links[i][j] = NewProxy(t, fmt.Sprintf("127.0.0.1:%d", routePorts[j]))
				}
			}
		}
		// A proxy cut for good: it accepts and closes every connection.
		sink := NewProxy(t, "")
		sink.Cut()
		nowhere = sink.Addr()
	}
	for i := range n {
		spec := nodeSpec{Name: fmt.Sprintf("n%d", i), ClientPort: clientPorts[i], RoutePort: routePorts[i], StoreDir: t.TempDir(), Advertise: nowhere}
		for _, o := range opts {
			o(&spec)
		}
		for j := range n {
			switch {
			case j == i:
			case proxied:
				spec.Routes = append(spec.Routes, "nats://"+c.links[i][j].Addr())
			default:
				spec.Routes = append(spec.Routes, fmt.Sprintf("nats://127.0.0.1:%d", routePorts[j]))
			}
		}
		c.specs = append(c.specs, spec)
	}
	t.Cleanup(c.stopAll)
	return c
}

// freePorts returns n distinct loopback TCP ports that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("natstest: %v", err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		defer l.Close()
	}
	return ports
}

// URLs is every server's client URL, comma-separated (nats.Connect's form).
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.specs))
	for i := range c.specs {
		urls[i] = c.ClientURL(i)
	}
	return strings.Join(urls, ",")
}

// Len is the number of servers, running or not.
func (c *Cluster) Len() int { return len(c.specs) }

// Index returns the index of the server named name, or -1.
func (c *Cluster) Index(name string) int {
	for i, s := range c.specs {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// Partition cuts server i off from every other server: the proxies of
// its route connections, both ways, close what they carry and refuse
// new connections until Heal. Its clients stay connected to it. The
// cluster must have been started with RunPartitionableCluster.
func (c *Cluster) Partition(i int) {
	for _, p := range c.linksOf(i) {
		p.Cut()
	}
}

// Heal lets server i's route connections through again; the servers
// redial their routes within about a second.
func (c *Cluster) Heal(i int) {
	for _, p := range c.linksOf(i) {
		p.Heal()
	}
}

// linksOf is every proxy that carries server i's routes.
func (c *Cluster) linksOf(i int) []*Proxy {
	if c.links == nil {
		c.t.Fatalf("natstest: the cluster has no proxies to cut (RunPartitionableCluster starts one that has)")
	}
	var ps []*Proxy
	for j := range c.specs {
		if j != i {
			ps = append(ps, c.links[i][j], c.links[j][i])
		}
	}
	return ps
}

// ClientURL is server i's client URL.
func (c *Cluster) ClientURL(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", c.specs[i].ClientPort)
}

// Kill crashes server i (SIGKILL) and waits until it has exited. It does
// nothing if i is not running.
func (c *Cluster) Kill(i int) { c.stop(i, syscall.SIGKILL) }

// KillAll crashes every running server at once (a SIGKILL to each, sent
// before any is waited for) and waits until all have exited.
func (c *Cluster) KillAll() {
	var wg sync.WaitGroup
	for i := range c.specs {
		wg.Go(func() { c.stop(i, syscall.SIGKILL) })
	}
	wg.Wait()
}

// RestartAll restarts every server that is not running, all at once (a
// clustered server may wait for its peers), and returns once each accepts
// connections. Call it from the test's goroutine.
func (c *Cluster) RestartAll() {
	c.t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(c.specs))
	for i := range c.specs {
		wg.Go(func() { errs[i] = c.start(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.t.Fatalf("natstest: %v", err)
		}
	}
}

// Pause freezes server i (SIGSTOP): its process and its connections stay,
// it answers nothing until Resume. It does nothing if i is not running.
func (c *Cluster) Pause(i int) { c.signalPaused(i, syscall.SIGSTOP, true) }

// Resume lets a paused server i go on (SIGCONT).
func (c *Cluster) Resume(i int) { c.signalPaused(i, syscall.SIGCONT, false) }

func (c *Cluster) signalPaused(i int, sig syscall.Signal, paused bool) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[i] == nil {
		return
	}
	if err := c.nodes[i].Process.Signal(sig); err != nil {
		c.t.Fatalf("natstest: %s to server %s: %v", sig, c.specs[i].Name, err)
	}
	c.paused[i] = paused
}

func (c *Cluster) stop(i int, sig syscall.Signal) {
	c.mu.Lock()
	cmd, done, paused := c.nodes[i], c.done[i], c.paused[i]
	c.nodes[i], c.paused[i] = nil, false
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process handles no SIGTERM
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (c *Cluster) stopAll() {
	var wg sync.WaitGroup
	for i := range c.specs {
		wg.Go(func() { c.stop(i, syscall.SIGTERM) })
	}
	wg.Wait()
}

// Restart starts server i again on its ports and its store and waits until
// it accepts connections. It does nothing if i is running. Call it from the
// test's goroutine.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if err := c.start(i); err != nil {
		c.t.Fatalf("natstest: %v", err)
	}
}

// start starts server i unless it runs and waits until it accepts
// connections.
func (c *Cluster) start(i int) error {
	c.mu.Lock()
	running := c.nodes[i] != nil
	c.mu.Unlock()
	if running {
		return nil
	}
	spec, err := json.Marshal(c.specs[i])
	if err != nil {
		return err
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), clusterNodeEnv+"="+string(spec), "GORACE=exitcode=0 log_path="+c.race)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start server %s: %w", c.specs[i].Name, err)
	}
	done := make(chan struct{})
	ready := make(chan bool, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		ready <- sc.Scan() && sc.Text() == "ready"
		for sc.Scan() {
		}
		_ = cmd.Wait()
	}()
	select {
	case ok := <-ready:
		if !ok {
			<-done
			return fmt.Errorf("server %s exited before it was ready: %v", c.specs[i].Name, cmd.ProcessState)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("server %s not ready", c.specs[i].Name)
	}
	c.mu.Lock()
	c.nodes[i], c.done[i] = cmd, done
	c.mu.Unlock()
	return nil
}
