package main

// The power-cut test (issue 38, acceptance 1): agentmesh up, as its own
// process, keeps its data directory on a cut file system (pkg/natstest/
// cutfs), which forgets every write not fsynced when the power is cut.
// Runs, their spend, a consent withdrawal and an API key are
// acknowledged through the CLI; then the power is cut (up is SIGKILLed
// and the disk rolled back to what was synced), up starts again on the
// same directory, and the CLI must find every acknowledged thing there.
// With --sync 2m (nats-server's own default: no fsync within the test's
// seconds) the check must find losses, which shows it can fail; with
// up's default sync policy it must find none.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest/cutfs"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// chaosTrialsEnv sets the number of trials of each chaos test (make chaos
// sets it); without it the test runs its short version, as in make test.
const chaosTrialsEnv = "AGENTMESH_CHAOS_TRIALS"

// TestChaosPowerCut runs the power cut with each sync policy:
// AGENTMESH_CHAOS_TRIALS trials of 24 runs each (make chaos), or one of 4
// (make test). It logs one line a policy:
//
//	powercut sync=<policy>: trials=N runs=R lost=0 duplicated=0 stuck=0 wrongly_failed=0 tenants=T spend_lost=0 consent_lost=0 keys_lost=0 recovery_mean=2.1s seconds=24.0
//
// lost: a run acknowledged succeeded whose record or events are gone or
// short of what the client saw; duplicated: a run with more events than
// the client saw (a second terminal status, a repeated seq); stuck: its
// record not ended; wrongly failed: its record or last event ended other
// than succeeded. spend_lost, consent_lost, keys_lost: tenants whose spend
// total, consent withdrawal or API key is not as acknowledged;
// recovery_mean: from the restart to up ready, the mean of the trials.
func TestChaosPowerCut(t *testing.T) {
	trials, runs := 1, 4
	if v := os.Getenv(chaosTrialsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", chaosTrialsEnv, v)
		}
		trials, runs = n, 24
	}
	for _, policy := range []struct {
		name, flag string
		wantLoss   bool
	}{
		// nats-server's default sync_interval: nothing is fsynced within
		// a trial's seconds, so a cut takes everything.
		{name: "2m", flag: "2m", wantLoss: true},
		// up's default (no --sync flag).
		{name: "default", wantLoss: false},
	} {
		t.Run("sync="+policy.name, func(t *testing.T) {
			var sum powerCutCounts
			start := time.Now()
			for trial := range trials {
				c := powerCutTrial(t, policy.flag, runs)
				t.Logf("trial %d: %s recovery=%.1fs", trial+1, c, c.recovery.Seconds())
				if policy.wantLoss && !c.lostAll() {
					t.Errorf("trial %d with --sync %s: %s; want each kind lost, so the check is shown to find a loss", trial+1, policy.flag, c)
				}
				sum.add(c)
			}
			t.Logf("powercut sync=%s: trials=%d %s recovery_mean=%.1fs seconds=%.1f", policy.name, trials, sum, sum.recovery.Seconds()/float64(trials), time.Since(start).Seconds())
			if !policy.wantLoss && sum.anyLoss() {
				t.Errorf("with up's default sync policy a power cut lost acknowledged writes: %s", sum)
			}
		})
	}
}

// powerCutCounts are one trial's findings (or a sum of them).
type powerCutCounts struct {
	runs, lost, duplicated, stuck, wronglyFailed int
	tenants, spendLost, consentLost, keysLost    int
	recovery                                     time.Duration // from the restart to ready
}

func (c *powerCutCounts) add(o powerCutCounts) {
	c.runs += o.runs
	c.lost += o.lost
	c.duplicated += o.duplicated
	c.stuck += o.stuck
	c.wronglyFailed += o.wronglyFailed
	c.tenants += o.tenants
	c.spendLost += o.spendLost
	c.consentLost += o.consentLost
	c.keysLost += o.keysLost
	c.recovery += o.recovery
}

func (c powerCutCounts) anyLoss() bool {
	return c.lost+c.duplicated+c.stuck+c.wronglyFailed+c.spendLost+c.consentLost+c.keysLost > 0
}

// lostAll: some run, and every tenant's spend, consent and key, lost.
func (c powerCutCounts) lostAll() bool {
	return c.lost+c.stuck+c.wronglyFailed > 0 && c.spendLost == c.tenants && c.consentLost == c.tenants && c.keysLost == c.tenants
}

func (c powerCutCounts) String() string {
	return fmt.Sprintf("runs=%d lost=%d duplicated=%d stuck=%d wrongly_failed=%d tenants=%d spend_lost=%d consent_lost=%d keys_lost=%d",
		c.runs, c.lost, c.duplicated, c.stuck, c.wronglyFailed, c.tenants, c.spendLost, c.consentLost, c.keysLost)
}

// powerCutTenants are the tenants a trial's runs are spread over, each
// with a principal whose consent it withdraws and an API key.
var powerCutTenants = []string{"acme", "globex", "initech"}

// ackedRun is a run the CLI saw succeed, with the events it printed.
type ackedRun struct {
	tenant, id string
	events     []wire.Event
}

// ackedTenant is what a tenant had acknowledged: its spend total, its
// principal's consent revision after the withdrawal, its key.
type ackedTenant struct {
	spend          spendTotal
	consentRev     uint64
	keyID, keyText string
}

// spendTotal is the part of agentmesh spend --json the test compares.
type spendTotal struct {
	Runs  int `json:"runs"`
	Usage struct {
		In  int64 `json:"input_tokens"`
		Out int64 `json:"output_tokens"`
	} `json:"usage"`
	Cost string `json:"cost"`
}

// powerCutTrial makes runs runs and the tenants' other writes on up with
// --sync flag (none if ""), cuts the power, starts up again and counts
// what is not as acknowledged; a run after the restart must succeed.
func powerCutTrial(t *testing.T, flag string, runs int) powerCutCounts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	backing, mnt, workspace := t.TempDir(), t.TempDir(), t.TempDir()
	disk := cutfs.MountT(t, backing, mnt)
	dataDir := filepath.Join(mnt, "data")

	first := startUpProcess(t, dataDir, workspace, flag)
	acked := acknowledge(t, ctx, first.mesh, runs)
	// The power goes: nothing up writes from here on lands, the disk
	// keeps what was synced, up dies with the machine.
	if err := disk.Cut(); err != nil {
		t.Fatalf("cut: %v", err)
	}
	first.kill(t)
	if err := disk.Unmount(); err != nil {
		t.Fatal(err)
	}
	disk = cutfs.MountT(t, backing, mnt) // the machine is back, its disk as the cut left it

	restart := time.Now()
	second := startUpProcess(t, dataDir, workspace, flag)
	c := check(t, ctx, second, acked)
	c.recovery = second.ready.Sub(restart)
	// And the mesh is whole again: a new run goes through.
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	if code, out, errOut := second.mesh.cli(rctx, "run", "-p", "fixture", "--tenant", powerCutTenants[0], "after the cut"); code != exitOK || !strings.Contains(out, "[succeeded") {
		t.Errorf("a run after the restart: exit %d\n%s%s", code, out, errOut)
	}
	second.stop(t)
	if err := disk.Unmount(); err != nil {
		t.Error(err)
	}
	return c
}

// powerCutAck is a trial's acknowledged writes.
type powerCutAck struct {
	runs    []ackedRun
	tenants map[string]*ackedTenant
}

// acknowledge makes runs runs of the fixture profile over the tenants,
// four at a time, each acknowledged when the CLI saw it succeed; then per
// tenant a consent grant and withdrawal and an API key; then waits until
// each tenant's spend shows its runs, and acknowledges that total.
func acknowledge(t *testing.T, ctx context.Context, m *testMesh, runs int) powerCutAck {
	t.Helper()
	a := powerCutAck{tenants: map[string]*ackedTenant{}}
	var mu sync.Mutex
	var failed []string
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range jobs {
				tenant := powerCutTenants[i%len(powerCutTenants)]
				code, out, errOut := m.cli(ctx, "run", "-p", "fixture", "--tenant", tenant, "--json", fmt.Sprintf("power cut %d", i))
				evs, err := decodeEvents(out)
				if err == nil && code != exitOK {
					err = fmt.Errorf("exit %d: %s", code, errOut)
				}
				if err == nil {
					if why := historyProblem(evs); why != "" {
						err = errors.New(why)
					}
				}
				mu.Lock()
				if err != nil {
					failed = append(failed, fmt.Sprintf("run %d: %v:\n%s", i, err, out))
				} else {
					a.runs = append(a.runs, ackedRun{tenant: tenant, id: evs[0].RunID, events: evs})
				}
				mu.Unlock()
			}
		})
	}
	for i := range runs {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d runs did not succeed before the cut; the first: %s", len(failed), runs, failed[0])
	}
	for _, tenant := range powerCutTenants[:min(runs, len(powerCutTenants))] {
		at := &ackedTenant{}
		a.tenants[tenant] = at
		m.must(t, ctx, exitOK, "consent", "grant", "--tenant", tenant, "--principal", "pat")
		var st struct {
			Granted bool
			Rev     uint64
		}
		if err := json.Unmarshal([]byte(m.must(t, ctx, exitOK, "consent", "withdraw", "--tenant", tenant, "--principal", "pat", "--json")), &st); err != nil || st.Granted {
			t.Fatalf("consent withdraw: %+v, %v", st, err)
		}
		at.consentRev = st.Rev
		code, out, errOut := m.cli(ctx, "keys", "create", "--tenant", tenant, "--principal", "pat")
		if code != exitOK || !strings.HasPrefix(errOut, "key ") {
			t.Fatalf("keys create: exit %d\n%s%s", code, out, errOut)
		}
		at.keyText, at.keyID = strings.TrimSpace(out), strings.Fields(errOut)[1]
	}
	want := map[string]int{}
	for _, r := range a.runs {
		want[r.tenant]++
	}
	deadline := time.Now().Add(30 * time.Second)
	for tenant, at := range a.tenants {
		for {
			at.spend = spendOf(t, ctx, m, tenant)
			if at.spend.Runs == want[tenant] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("spend of %s: %d runs, want %d", tenant, at.spend.Runs, want[tenant])
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return a
}

// spendOf is the tenant's spend total this month ({} where the command
// fails, as on a mesh that lost the tenant's ledger).
func spendOf(t *testing.T, ctx context.Context, m *testMesh, tenant string) spendTotal {
	t.Helper()
	var s struct{ Total spendTotal }
	if code, out, _ := m.cli(ctx, "spend", "--tenant", tenant, "--json"); code == exitOK {
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("spend --json: %v\n%s", err, out)
		}
	}
	return s.Total
}

// parseEvents reads NDJSON events, failing the test on a bad one.
func parseEvents(t *testing.T, out string) []wire.Event {
	t.Helper()
	evs, err := decodeEvents(out)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// decodeEvents reads NDJSON events.
func decodeEvents(out string) ([]wire.Event, error) {
	var evs []wire.Event
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev wire.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("event %q: %w", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs, sc.Err()
}

// check counts what of a is not on the mesh m as acknowledged.
func check(t *testing.T, ctx context.Context, p *upProcess, a powerCutAck) powerCutCounts {
	t.Helper()
	m := p.mesh
	c := powerCutCounts{runs: len(a.runs), tenants: len(a.tenants)}
	reported := 0
	for _, r := range a.runs {
		verdict := checkRun(t, ctx, m, r)
		switch verdict.kind {
		case "":
			continue
		case "lost":
			c.lost++
		case "duplicated":
			c.duplicated++
		case "stuck":
			c.stuck++
		case "wrongly failed":
			c.wronglyFailed++
		}
		if reported < 3 {
			t.Logf("run %s of %s: %s: %s", r.id, r.tenant, verdict.kind, verdict.why)
			reported++
		}
	}
	// The ledger's writer may write and fold a run's entry again after
	// the restart: the spend has a few seconds to come back.
	deadline := time.Now().Add(5 * time.Second)
	for tenant, at := range a.tenants {
		got := spendOf(t, ctx, m, tenant)
		for got != at.spend && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			got = spendOf(t, ctx, m, tenant)
		}
		if got != at.spend {
			c.spendLost++
			t.Logf("spend of %s: %+v, acknowledged %+v", tenant, got, at.spend)
		}
		var st struct {
			Granted bool
			Rev     uint64
		}
		code, out, errOut := m.cli(ctx, "consent", "show", "--tenant", tenant, "--principal", "pat", "--json")
		if code == exitOK {
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatalf("consent show --json: %v\n%s", err, out)
			}
		}
		if code != exitOK || st.Granted || st.Rev != at.consentRev {
			c.consentLost++
			t.Logf("consent of %s/pat: exit %d %+v %s, acknowledged withdrawn at revision %d", tenant, code, st, strings.TrimSpace(errOut), at.consentRev)
		}
		if why := checkKey(t, ctx, p, tenant, at); why != "" {
			c.keysLost++
			t.Logf("key %s of %s: %s", at.keyID, tenant, why)
		}
	}
	return c
}

// runVerdict is what became of an acknowledged run: kind "" (as
// acknowledged), lost, duplicated, stuck or wrongly failed, and why.
type runVerdict struct{ kind, why string }

// checkRun compares r's record and events on m with what the client saw:
// its record succeeded, and its events those the client saw, no more and
// no fewer (so exactly one terminal status, seqs from 1 without a gap or
// a repeat, running before the first chunk).
func checkRun(t *testing.T, ctx context.Context, m *testMesh, r ackedRun) runVerdict {
	t.Helper()
	code, out, errOut := m.cli(ctx, "status", "--tenant", r.tenant, "--json", r.id)
	if code != exitOK {
		return runVerdict{"lost", "status: " + strings.TrimSpace(errOut)}
	}
	var rec wire.RunRecord
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	// A run whose events are gone would be followed for ever.
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, out, _ = m.cli(fctx, "follow", "--tenant", r.tenant, "--json", r.id)
	evs := parseEvents(t, out)
	for i, want := range r.events {
		if i >= len(evs) {
			return runVerdict{"lost", fmt.Sprintf("%d of its %d events left", len(evs), len(r.events))}
		}
		if got := evs[i]; got.Seq != want.Seq || got.Kind != want.Kind || state(got) != state(want) {
			return runVerdict{"lost", fmt.Sprintf("event %d is seq %d %s %s, was seq %d %s %s", i, got.Seq, got.Kind, state(got), want.Seq, want.Kind, state(want))}
		}
	}
	switch {
	case len(evs) > len(r.events):
		return runVerdict{"duplicated", fmt.Sprintf("%d events, the client saw %d: %s", len(evs), len(r.events), historyProblem(evs))}
	case !rec.State.Terminal():
		return runVerdict{"stuck", "record " + string(rec.State)}
	case rec.State != wire.StateSucceeded:
		return runVerdict{"wrongly failed", "record " + string(rec.State)}
	}
	return runVerdict{}
}

// state is a status event's state, "" for any other.
func state(ev wire.Event) wire.State {
	if ev.Kind == wire.KindStatus && ev.Status != nil {
		return ev.Status.State
	}
	return ""
}

// historyProblem is what is wrong with a run's events, "" if nothing:
// seqs gapless from 1 without a repeat, running before the first chunk,
// exactly one terminal status, the last event, succeeded.
func historyProblem(evs []wire.Event) string {
	if len(evs) == 0 {
		return "no events"
	}
	next, running, terminal := uint64(1), false, 0
	for _, ev := range evs {
		if ev.Seq != next {
			return fmt.Sprintf("seq %d, want %d", ev.Seq, next)
		}
		next = ev.LastSeq() + 1
		switch {
		case ev.Kind == wire.KindStatus && ev.Status.State == wire.StateRunning:
			running = true
		case (ev.Kind == wire.KindChunk || ev.Kind == wire.KindChunks) && !running:
			return fmt.Sprintf("chunk at seq %d before running", ev.Seq)
		case ev.Terminal():
			terminal++
		}
	}
	switch {
	case terminal != 1:
		return fmt.Sprintf("%d terminal statuses", terminal)
	case !evs[len(evs)-1].Terminal() || evs[len(evs)-1].Status.State != wire.StateSucceeded:
		return "its last event is not succeeded"
	}
	return ""
}

// checkKey reports what is wrong with the tenant's acknowledged key on
// the mesh of p: listed for the tenant, and authenticating at the
// gateway. "" if nothing.
func checkKey(t *testing.T, ctx context.Context, p *upProcess, tenant string, at *ackedTenant) string {
	t.Helper()
	code, out, errOut := p.mesh.cli(ctx, "keys", "list", "--tenant", tenant, "--json")
	if code != exitOK || !strings.Contains(out, `"id":"`+at.keyID+`"`) {
		return fmt.Sprintf("not listed (exit %d): %s%s", code, out, errOut)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.gateway+"/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+at.keyText)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return "GET /v1/models: " + err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "GET /v1/models: " + resp.Status
	}
	return ""
}

// upProcess is agentmesh up running as a process of its own (the test
// binary as main), its NATS and gateway on free ports.
type upProcess struct {
	cmd     *exec.Cmd
	exited  chan error
	stderr  *servicetest.Buffer
	mesh    *testMesh
	gateway string
	ready   time.Time
}

var (
	upNATS    = regexp.MustCompile(`msg="agentmesh up" nats=(\S+)`)
	upGateway = regexp.MustCompile(`msg="gateway listening" addr=(\S+)`)
)

// startUpProcess starts up on dataDir with --sync flag (none if "") and
// waits until its gateway listens; the test's end kills it if the test
// has not stopped it.
func startUpProcess(t *testing.T, dataDir, workspace, flag string) *upProcess {
	t.Helper()
	args := []string{"up", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--http", "", "--gateway", "127.0.0.1:0", "--console=false",
		"--fixture-dir", "../../testdata/fixture", "--profiles-dir", "../../profiles", "--workspace-root", workspace, "--runner-adapters", "fixture"}
	if flag != "" {
		args = append(args, "--sync", flag)
	}
	p := &upProcess{cmd: exec.Command(os.Args[0], args...), stderr: &servicetest.Buffer{}}
	p.exited = startAsMain(t, p.cmd, p.stderr)
	t.Cleanup(func() { p.kill(t) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		nats, gw := upNATS.FindStringSubmatch(p.stderr.String()), upGateway.FindStringSubmatch(p.stderr.String())
		if nats != nil && gw != nil {
			p.mesh, p.gateway, p.ready = &testMesh{url: nats[1]}, gw[1], time.Now()
			return p
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("up exited before it was ready: %v; stderr:\n%s", err, p.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("up not ready within 60s; stderr:\n%s", p.stderr)
		}
	}
}

// kill SIGKILLs up, if it still runs, and reaps it.
func (p *upProcess) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("kill up: %v", err)
	}
	err := <-p.exited
	p.exited <- err
}

// stop stops up as Ctrl-C would and fails the test unless it exits 0.
func (p *upProcess) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			t.Errorf("up after SIGTERM: %v; stderr:\n%s", err, p.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("up still running 30s after SIGTERM; stderr:\n%s", p.stderr)
	}
}
