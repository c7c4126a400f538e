package mesh_test

// The spend ledger, budgets and quotas through the whole mesh (issue 13,
// acceptance 1 and 2): real runner processes SIGKILLed mid-stream, a
// router (and with it a ledger writer) restarted, the test's clock driving
// the budgets' periods.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/ledger"
	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// pricedProfile is a fixture profile with prices a float would round.
const pricedProfile = `schema: 1
name: priced
adapter: fixture
transport: in_process
capabilities: {resumable: false, emits_tool_events: true, reports_usage: true}
model: fixture-priced
pricing: {input: "3.000001", output: "15.000003"}
policy: {max_attempts: 3, max_active: 64}
`

// ledgerMesh is a JetStream server with the priced profile, the mesh's
// services but the runner in this process, and fixture runner processes
// started on demand.
type ledgerMesh struct {
	t        *testing.T
	srv      *server.Server
	profiles string
	reg      *profile.Registry
	logs     string
	runners  int
	c        *client.Client
	js       jetstream.JetStream
	store    *ledger.Store
}

func newLedgerMesh(t *testing.T) *ledgerMesh {
	t.Helper()
	m := &ledgerMesh{t: t, srv: natstest.RunJetStream(t), profiles: t.TempDir(), logs: t.TempDir()}
	if err := os.WriteFile(filepath.Join(m.profiles, "priced.yaml"), []byte(pricedProfile), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if m.reg, err = profile.Load(m.profiles); err != nil {
		t.Fatal(err)
	}
	m.c = newClient(t, m.srv)
	_, m.js = natstest.Connect(t, m.srv)
	return m
}

// start runs the mesh's services of cfg (never a runner) on a connection
// of their own.
func (m *ledgerMesh) start(cfg mesh.Config) *node {
	m.t.Helper()
	cfg.WithoutRunner, cfg.WithoutExporter = true, true
	cfg.Topology.LeaseTTL = 2 * time.Second
	cfg.Topology.WorkQueueMax, cfg.Topology.WorkQueueTenantMax = 2000, 2000
	cfg.Sweeper.ReconcileEvery = time.Second
	n := startNodeWith(m.t, m.srv, cfg, m.reg, newFixture(m.t))
	if m.store == nil {
		s, err := ledger.Open(context.Background(), m.js, subject.Names{})
		if err != nil {
			m.t.Fatal(err)
		}
		m.store = s
	}
	return n
}

// startRunner starts a fixture runner process (the subprocess-runner's
// run function) with the shortest ack wait the runner accepts.
func (m *ledgerMesh) startRunner() *faultRunner {
	m.t.Helper()
	m.runners++
	fixtures, err := filepath.Abs("../../testdata/fixture")
	if err != nil {
		m.t.Fatal(err)
	}
	return startServiceRunner(m.t, fmt.Sprintf("ledger-runner-%d", m.runners), m.logs,
		"AGENTMESH_NATS_URL="+m.srv.ClientURL(),
		"AGENTMESH_HTTP_ADDR=",
		"AGENTMESH_LOG_LEVEL=info",
		"AGENTMESH_PROFILES_DIR="+m.profiles,
		"AGENTMESH_FIXTURE_DIR="+fixtures,
		"AGENTMESH_RUNNER_ADAPTERS=fixture",
		"AGENTMESH_RUNNER_MAX_ACTIVE=fixture:64",
		"AGENTMESH_RUNNER_ACK_WAIT=2s",
		// The topology it ensures too: the same as the mesh's.
		"AGENTMESH_LEASE_TTL=2s", "AGENTMESH_WORK_QUEUE_MAX=2000", "AGENTMESH_WORK_QUEUE_TENANT_MAX=2000",
	)
}

// submit submits a run of the priced profile and returns its id.
func (m *ledgerMesh) submit(tenant, principal string, req fixtureReq) string {
	m.t.Helper()
	rr := wire.RunRequest{RunID: client.NewRunID(), Tenant: tenant, Principal: principal, Profile: "priced",
		Request: request(m.t, req), Labels: map[string]string{"team": "t" + principal[len(principal)-1:]}}
	id, err := m.c.Submit(context.Background(), rr)
	if err != nil {
		m.t.Fatal(err)
	}
	return id
}

// terminal waits for the run's terminal status, read from its last event.
func (m *ledgerMesh) terminal(tenant, runID string, within time.Duration) wire.Status {
	m.t.Helper()
	var status wire.Status
	natstest.Eventually(m.t, within, func() error {
		st, err := m.js.Stream(context.Background(), "AGENTMESH_EVENTS")
		if err != nil {
			return err
		}
		raw, err := st.GetLastMsgForSubject(context.Background(), subject.Names{}.Events(tenant, runID))
		if err != nil {
			return err
		}
		ev, err := wire.Decode[wire.Event](raw.Data)
		if err != nil {
			return err
		}
		if !ev.Terminal() {
			return fmt.Errorf("run %s: last event %s seq %d", runID, ev.Kind, ev.Seq)
		}
		status = *ev.Status
		return nil
	})
	return status
}

// spent is the ledger's spend of tenant over the days around the test.
func (m *ledgerMesh) spent(tenant string) (*ledger.Spend, error) {
	now := time.Now()
	days, err := m.store.Range(context.Background(), tenant, ledger.Days(now.Add(-24*time.Hour), now.Add(24*time.Hour)))
	if err != nil {
		return nil, err
	}
	total := &ledger.Spend{}
	for _, sp := range days {
		total.Merge(sp)
	}
	return total, nil
}

type spendKey struct{ tenant, principal string }

// Acceptance 1: 1,000 priced runs across 3 tenants and 5 principals, a
// runner SIGKILLed with runs mid-stream and a router (a ledger writer)
// restarted half way: the ledger equals the exact sum of the terminal
// statuses' costs, per tenant and per principal, and counts every run
// that ended other than rejected once.
func TestLedgerUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 runs")
	}
	m := newLedgerMesh(t)
	m.start(mesh.Config{}) // router, sweeper
	b := m.start(mesh.Config{WithoutSweeper: true})
	doomed := m.startRunner()
	tenants := []string{"t0", "t1", "t2"}
	type run struct{ tenant, principal, id string }
	var all []run
	add := func(i int, req fixtureReq) {
		tn, p := tenants[i%3], fmt.Sprintf("p%d", i%5)
		all = append(all, run{tn, p, m.submit(tn, p, req)})
	}
	// Mid-stream on the runner to be killed: 20 slow runs with output.
	for i := range 20 {
		add(i, fixtureReq{Prompt: "slow", Script: "slow", DelayMS: 1500})
	}
	for _, r := range all {
		clienttest.WaitForOutput(context.Background(), t, m.c, r.tenant, r.id)
	}
	m.startRunner()
	const n = 1000
	for i := range n / 2 {
		add(i, fixtureReq{Prompt: fmt.Sprintf("price run %d of %s", i, string(make([]byte, i%40)))})
	}
	doomed.kill(t)
	// A ledger writer restarts: its router stops and a new one starts.
	b.stop()
	if err := <-b.done; err != nil {
		t.Fatalf("router stopped with %v", err)
	}
	b.done <- nil
	m.start(mesh.Config{WithoutSweeper: true})
	for i := n / 2; i < n; i++ {
		add(i, fixtureReq{Prompt: fmt.Sprintf("price run %d%s", i, string(make([]byte, i%37)))})
	}

	want := map[spendKey][]string{}
	runs := map[spendKey]int64{}
	states := map[wire.State]int{}
	for _, r := range all {
		st := m.terminal(r.tenant, r.id, time.Minute)
		states[st.State]++
		if st.State == wire.StateRejected {
			continue
		}
		c := "0"
		if st.Summary != nil && st.Summary.Cost != "" {
			c = st.Summary.Cost
		}
		for _, k := range []spendKey{{r.tenant, ""}, {r.tenant, r.principal}} {
			want[k] = append(want[k], c)
			runs[k]++
		}
	}
	// The 20 slow runs were mid-stream on the killed runner, and so may be
	// quick ones it held with output: those end failed; the rest succeed.
	if states[wire.StateFailed] < 20 || states[wire.StateSucceeded]+states[wire.StateFailed] != len(all) {
		t.Fatalf("terminal states %v: want the 20 slow runs (and any quick ones the killed runner had started) failed, the rest of %d succeeded", states, len(all))
	}
	natstest.Eventually(t, 30*time.Second, func() error {
		for _, tn := range tenants {
			sp, err := m.spent(tn)
			if err != nil {
				return err
			}
			for k, costs := range want {
				if k.tenant != tn {
					continue
				}
				exact, err := cost.Add(costs...)
				if err != nil {
					t.Fatal(err)
				}
				got := sp.Total()
				if k.principal != "" {
					got = sp.Principal(k.principal).Total
				}
				if got.CostString() != exact || got.Runs != runs[k] {
					return fmt.Errorf("tenant %s principal %q: ledger %d runs, %s USD; terminal statuses %d runs, %s USD", tn, k.principal, got.Runs, got.CostString(), runs[k], exact)
				}
			}
		}
		return nil
	})
	t.Logf("terminal states %v; ledger equals the terminal costs exactly", states)
}

// Acceptance 2: once the day's spend reached the tenant's budget, a run
// submitted ends rejected with BudgetExceeded before anything is
// dispatched; the two runs admitted before the spend landed were never
// cut off; the test's clock moved into the next day admits again.
func TestBudgetRejectsUntilTheNextPeriod(t *testing.T) {
	m := newLedgerMesh(t)
	c := &testClock{now: time.Now()}
	cfg := mesh.Config{}
	cfg.Router.Clock, cfg.Router.SpendCacheTTL = c.Now, time.Millisecond
	m.start(cfg)
	m.startRunner()
	ctx := context.Background()
	if err := m.store.SetBudget(ctx, wire.Budget{Tenant: tenant, Amount: "0.000001", Period: wire.PeriodDay}); err != nil {
		t.Fatal(err)
	}
	var ids [2]string
	for i := range ids {
		ids[i] = m.submit(tenant, "p1", fixtureReq{Prompt: "spend it all"})
	}
	var costs []string
	for _, id := range ids {
		st := m.terminal(tenant, id, 30*time.Second)
		if st.State != wire.StateSucceeded || st.Summary == nil || st.Summary.Cost == "" {
			t.Fatalf("run %s admitted before the spend landed: %+v, want succeeded with a cost", id, st)
		}
		costs = append(costs, st.Summary.Cost)
	}
	want, _ := cost.Add(costs...)
	var day string
	natstest.Eventually(t, 10*time.Second, func() error {
		rec, err := m.c.Status(ctx, tenant, ids[1])
		if err != nil {
			return err
		}
		day = ledger.Day(time.UnixMilli(rec.Updated))
		sp, err := m.store.DaySpend(ctx, tenant, day)
		if err != nil {
			return err
		}
		if got := sp.Total().CostString(); got != want {
			return fmt.Errorf("day %s: spend %s, want %s", day, got, want)
		}
		return nil
	})
	d, err := ledger.ParseDay(day)
	if err != nil {
		t.Fatal(err)
	}
	c.Set(d.Add(24*time.Hour - time.Millisecond)) // the same day, its last instant
	id := m.submit(tenant, "p2", fixtureReq{Prompt: "one too many"})
	evs := collect(t, m.c, id)
	if st := last(evs); st.State != wire.StateRejected || st.Error == nil || st.Error.Class != wire.BudgetExceeded || len(evs) != 2 {
		t.Fatalf("run after the budget was spent: %s (%+v), want accepted then rejected with BudgetExceeded", describe(evs), st.Error)
	}
	c.Set(d.Add(24 * time.Hour)) // the next day
	id = m.submit(tenant, "p2", fixtureReq{Prompt: "a new day"})
	if st := m.terminal(tenant, id, 30*time.Second); st.State != wire.StateSucceeded {
		t.Fatalf("run on the next day: %+v, want succeeded", st)
	}
}

// A tenant's quota of runs admitted and not ended: beyond it a run ends
// rejected with AdmissionRejected, another tenant is not held up, and the
// runs of a SIGKILLed runner, once the sweeper ended them, free their
// slots.
func TestQuotaFreedByTheSweeper(t *testing.T) {
	m := newLedgerMesh(t)
	m.start(mesh.Config{})
	doomed := m.startRunner()
	ctx := context.Background()
	if err := m.store.SetQuota(ctx, tenant, 2); err != nil {
		t.Fatal(err)
	}
	var held []string
	for range 2 {
		id := m.submit(tenant, "p1", fixtureReq{Prompt: "hold", Script: "slow", DelayMS: 5000})
		clienttest.WaitForOutput(ctx, t, m.c, tenant, id)
		held = append(held, id)
	}
	id := m.submit(tenant, "p1", fixtureReq{Prompt: "over"})
	if st := m.terminal(tenant, id, 10*time.Second); st.State != wire.StateRejected || st.Error == nil || st.Error.Class != wire.AdmissionRejected {
		t.Fatalf("third run: %+v, want rejected with AdmissionRejected", st)
	}
	if st := m.terminal("other", m.submit("other", "p1", fixtureReq{Prompt: "free"}), 30*time.Second); st.State != wire.StateSucceeded {
		t.Fatalf("another tenant's run: %+v", st)
	}
	doomed.kill(t)
	for _, id := range held {
		if st := m.terminal(tenant, id, 30*time.Second); st.State != wire.StateFailed {
			t.Fatalf("run of the killed runner: %+v, want failed by the sweeper", st)
		}
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		f, err := m.store.InFlight(ctx, tenant)
		if err != nil || len(f) != 0 {
			return fmt.Errorf("in flight %v, %v", f, err)
		}
		return nil
	})
	m.startRunner()
	if st := m.terminal(tenant, m.submit(tenant, "p1", fixtureReq{Prompt: "after"}), 30*time.Second); st.State != wire.StateSucceeded {
		t.Fatalf("run after the slots were freed: %+v", st)
	}
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }
