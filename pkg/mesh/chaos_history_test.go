//go:build linux

package mesh_test

// The chaos tests' history (issue 38): a load of runs of several tenants
// and consent changes acknowledged while a fault happens (chaosLoad), and
// the check of what the mesh kept of everything acknowledged once it is
// over (chaosHistory.check), reported as one line a test that make chaos
// prints:
//
//	chaos <name>: trials=N runs=R ok=R lost=0 duplicated=0 stuck=0 wrongly_failed=0 ...
//
// lost: a run acknowledged (Submit returned nil) with no events or no
// record now, or one whose client saw it succeed that is no longer
// succeeded with all its output; duplicated: two terminal statuses stored,
// two different events stored at one seq, or output replayed (its chunks
// out of order: executed again after its output); stuck: no terminal
// status within the settle deadline, or a record not terminal a few
// seconds after it; wrongly_failed: ended other than succeeded with no
// fault of the scenario to explain it (failed_justified counts those a
// fault explains, such as a run with output whose runner was killed);
// inconsistent: a gap in its seqs, output before running, or a record that
// disagrees with the terminal status; unreadable: stored to its terminal
// status, but a new follower could not read it to its end within the
// settle deadline. ledger_missing counts ended runs
// without their spend entry, or a tenant's rollup that disagrees with its
// entries; consent_lost acknowledged consent changes not in force.
// unavailable is the longest stretch in which no submission was
// acknowledged or no run ended.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/ledger"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// chaosTenants are the tenants a chaos load submits for, at once; each
// has chaosPrincipals whose consent it changes.
var (
	chaosTenants    = []string{"t0", "t1", "t2"}
	chaosPrincipals = []string{"p0", "p1"}
)

// chaosTicks is the number of chunks of the fixture's slow script.
const chaosTicks = 20

// chaosRun is a run whose submission was acknowledged.
type chaosRun struct {
	tenant, principal, id string
	acked                 time.Time
	// live is what the submitter's follower saw, up to liveErr.
	live    []wire.Event
	liveErr error
	// slow is how long the check's follower took to read it, when it
	// took more than 20s (logged: the run ended late, or the follower
	// was slow to catch up).
	slow time.Duration
}

// consentChange is an acknowledged consent change.
type consentChange struct {
	tenant, principal string
	granted           bool
	rev               uint64
}

// chaosHistory is what was acknowledged during one test, every trial.
type chaosHistory struct {
	mu      sync.Mutex
	runs    []*chaosRun
	acks    [][]time.Time // per trial: when each submission was acknowledged
	stops   []time.Time   // per trial: when its load stopped submitting
	consent []consentChange
	refused int // submission attempts refused (retried with the same run id)
}

// chaosCounts are a chaos test's results over all its trials.
type chaosCounts struct {
	trials, runs, ok, lost, duplicated, stuck, wronglyFailed, justified, inconsistent, unreadable int
	ledgerMissing, consentChanges, consentLost, refused                                           int
	unavailable                                                                                   time.Duration
	notes                                                                                         []string
	noted                                                                                         map[string]int // notes by kind
}

// note keeps a few notes of each kind.
func (c *chaosCounts) note(kind, msg string) {
	if c.noted == nil {
		c.noted = map[string]int{}
	}
	if c.noted[kind]++; c.noted[kind] <= 6 {
		c.notes = append(c.notes, kind+": "+msg)
	}
}

// bad is the sum of the counts a test fails on.
func (c *chaosCounts) bad() int {
	return c.lost + c.duplicated + c.stuck + c.wronglyFailed + c.inconsistent + c.unreadable + c.ledgerMissing + c.consentLost
}

// report logs the test's line and fails the test on anything lost,
// duplicated, stuck, wrongly failed or inconsistent.
func (c *chaosCounts) report(t *testing.T, name string) {
	t.Helper()
	t.Logf("chaos %s: trials=%d runs=%d ok=%d lost=%d duplicated=%d stuck=%d wrongly_failed=%d failed_justified=%d inconsistent=%d unreadable=%d ledger_missing=%d consent_changes=%d consent_lost=%d refused_submissions=%d unavailable=%.1fs",
		name, c.trials, c.runs, c.ok, c.lost, c.duplicated, c.stuck, c.wronglyFailed, c.justified, c.inconsistent, c.unreadable,
		c.ledgerMissing, c.consentChanges, c.consentLost, c.refused, c.unavailable.Seconds())
	if c.bad() > 0 {
		t.Errorf("chaos %s: want lost=0 duplicated=0 stuck=0 wrongly_failed=0 inconsistent=0 unreadable=0 ledger_missing=0 consent_lost=0:\n%s", name, strings.Join(c.notes, "\n"))
	}
}

// chaosLoad submits fixture runs of the slow script for every tenant,
// keeping inFlight of them unfinished, each followed to its end by its
// submitter, and changes the principals' consent, until stop.
type chaosLoad struct {
	t        *testing.T
	h        *chaosHistory
	c        *client.Client
	grants   *consent.Store
	prefix   string
	trial    int
	delayMS  int
	cancel   context.CancelFunc
	stopOnce sync.Once
	wg       sync.WaitGroup
	started  atomic.Int64 // runs acknowledged
	finished atomic.Int64 // runs whose submitter saw them end (or gave up)
	seq      atomic.Int64
}

// startChaosLoad starts a load of trial (prefix names its runs) with
// inFlight runs at once, each chunk delayMS apart.
func (h *chaosHistory) startChaosLoad(t *testing.T, c *client.Client, grants *consent.Store, prefix string, inFlight, delayMS int) *chaosLoad {
	ctx, cancel := context.WithCancel(context.Background())
	h.mu.Lock()
	trial := len(h.acks)
	h.acks = append(h.acks, nil)
	h.stops = append(h.stops, time.Time{})
	h.mu.Unlock()
	l := &chaosLoad{t: t, h: h, c: c, grants: grants, prefix: prefix, trial: trial, delayMS: delayMS, cancel: cancel}
	for w := range inFlight {
		l.wg.Go(func() { l.submitter(ctx, w) })
	}
	l.wg.Go(func() { l.consenter(ctx) })
	return l
}

// stop ends submitting and waits until every submitter has followed its
// last run to its end (or given up on it) and the last consent change is
// acknowledged.
func (l *chaosLoad) stop() {
	l.stopOnce.Do(func() {
		l.cancel()
		l.h.mu.Lock()
		l.h.stops[l.trial] = time.Now()
		l.h.mu.Unlock()
		l.wg.Wait()
	})
}

// waitFinished waits until n runs have been seen to end.
func (l *chaosLoad) waitFinished(n int64, within time.Duration) error {
	deadline := time.Now().Add(within)
	for l.finished.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d runs finished within %s, waiting for %d", l.finished.Load(), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// submitter submits a run, follows it to its end, and again, until ctx
// ends. A refused submission is retried with the same run id (a
// submission is idempotent by run id) until acknowledged or ctx ends.
func (l *chaosLoad) submitter(ctx context.Context, w int) {
	for ctx.Err() == nil {
		i := l.seq.Add(1)
		tn := chaosTenants[int(i)%len(chaosTenants)]
		req := runReq(l.t, fixtureReq{Prompt: "chaos", Script: "slow", DelayMS: l.delayMS})
		req.RunID = fmt.Sprintf("%s-%d-%05d", l.prefix, w, i)
		req.Tenant, req.Principal = tn, chaosPrincipals[int(i/int64(len(chaosTenants)))%len(chaosPrincipals)]
		var acked bool
		for ctx.Err() == nil && !acked {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := l.c.Submit(sctx, req)
			cancel()
			if err == nil {
				acked = true
				break
			}
			l.h.mu.Lock()
			l.h.refused++
			l.h.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
		if !acked {
			return
		}
		r := &chaosRun{tenant: tn, principal: req.Principal, id: req.RunID, acked: time.Now()}
		l.h.mu.Lock()
		l.h.runs = append(l.h.runs, r)
		l.h.acks[l.trial] = append(l.h.acks[l.trial], r.acked)
		l.h.mu.Unlock()
		l.started.Add(1)
		// Followed apart from ctx: a stopped load still sees its runs end.
		fctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		for ev, err := range l.c.Events(fctx, tn, r.id, 1) {
			if err != nil {
				r.liveErr = err
				break
			}
			r.live = append(r.live, ev)
		}
		cancel()
		l.finished.Add(1)
	}
}

// consenter changes the principals' consent in turn, each change retried
// until acknowledged (a change is idempotent), so every change asked for
// is either acknowledged or never asked: the state each principal ends in
// is its last acknowledged change.
func (l *chaosLoad) consenter(ctx context.Context) {
	granted := map[string]bool{}
	for i := 0; ctx.Err() == nil; i++ {
		tn := chaosTenants[i%len(chaosTenants)]
		p := chaosPrincipals[(i/len(chaosTenants))%len(chaosPrincipals)]
		k := tn + "." + p
		grant := !granted[k]
		for attempt := 0; ; attempt++ {
			// After ctx ends it finishes the change in hand, for a bound.
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var st consent.State
			var err error
			if grant {
				st, err = l.grants.Grant(cctx, tn, p)
			} else {
				st, err = l.grants.Withdraw(cctx, tn, p)
			}
			cancel()
			if err == nil {
				granted[k] = grant
				l.h.mu.Lock()
				l.h.consent = append(l.h.consent, consentChange{tenant: tn, principal: p, granted: grant, rev: st.Rev})
				l.h.mu.Unlock()
				break
			}
			if attempt > 24 {
				l.t.Errorf("consent change of %s never acknowledged: %v", k, err)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		select {
		case <-ctx.Done():
		case <-time.After(150 * time.Millisecond):
		}
	}
}

// chaosVerdict is one run's class.
type chaosVerdict int

func (v chaosVerdict) String() string {
	return [...]string{"ok", "lost", "duplicated", "stuck", "wrongly failed", "failed justified", "inconsistent", "unreadable"}[v]
}

const (
	verdictOK chaosVerdict = iota
	verdictLost
	verdictDuplicated
	verdictStuck
	verdictWronglyFailed
	verdictJustified
	verdictInconsistent
	verdictUnreadable
)

// justifier says whether a run's ending other than succeeded is explained
// by the fault (st is its terminal status, committed whether it had output).
type justifier func(r *chaosRun, st wire.Status, committed bool) bool

// noFailureJustified is the justifier of a fault every run must survive.
func noFailureJustified(*chaosRun, wire.Status, bool) bool { return false }

// check reads what the mesh kept of every acknowledged run and consent
// change, as a new client does, within settle, and adds it to counts.
func (h *chaosHistory) check(t *testing.T, c *client.Client, js jetstream.JetStream, settle time.Duration, justified justifier, counts *chaosCounts) {
	t.Helper()
	h.mu.Lock()
	runs := slices.Clone(h.runs)
	changes := slices.Clone(h.consent)
	counts.trials += len(h.acks)
	counts.refused += h.refused
	h.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	type result struct {
		verdict chaosVerdict
		msg     string
		rec     wire.RunRecord
		end     time.Time
	}
	results := make([]result, len(runs))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			v, msg, rec, end := checkChaosRun(ctx, c, js, r, justified)
			results[i] = result{v, msg, rec, end}
		})
	}
	wg.Wait()
	var ended []wire.RunRecord
	var ends []time.Time
	for _, r := range runs {
		if r.slow > 0 {
			t.Logf("%s.%s: read in %s (acknowledged at %s)", r.tenant, r.id, r.slow.Round(100*time.Millisecond), r.acked.Format("15:04:05.000"))
		}
	}
	for i, res := range results {
		counts.runs++
		switch res.verdict {
		case verdictOK:
			counts.ok++
		case verdictLost:
			counts.lost++
		case verdictDuplicated:
			counts.duplicated++
		case verdictStuck:
			counts.stuck++
		case verdictWronglyFailed:
			counts.wronglyFailed++
		case verdictJustified:
			counts.justified++
		case verdictInconsistent:
			counts.inconsistent++
		case verdictUnreadable:
			counts.unreadable++
		}
		if res.verdict != verdictOK && res.verdict != verdictJustified {
			counts.note(res.verdict.String(), fmt.Sprintf("%s.%s: %s", runs[i].tenant, runs[i].id, res.msg))
		}
		if res.rec.State.Terminal() {
			ended = append(ended, res.rec)
		}
		if !res.end.IsZero() {
			ends = append(ends, res.end)
		}
	}
	counts.ledgerMissing += checkLedger(t, js, ended, min(settle, 30*time.Second), counts)
	counts.consentChanges += len(changes)
	counts.consentLost += checkConsent(js, changes, counts)

	h.mu.Lock()
	defer h.mu.Unlock()
	for trial, acks := range h.acks {
		counts.unavailable = max(counts.unavailable, longestGap(acks, h.stops[trial]))
	}
	counts.unavailable = max(counts.unavailable, longestGap(ends, time.Time{}))
}

// longestGap is the longest stretch between two successive times of ts
// (and between the last and until, if set). Gaps while the load was
// stopped between trials do not count: a trial's acknowledgements are
// measured apart, and its ends with every trial's.
func longestGap(ts []time.Time, until time.Time) time.Duration {
	ts = slices.Clone(ts)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	if !until.IsZero() {
		ts = append(ts, until)
	}
	var longest time.Duration
	for i := 1; i < len(ts); i++ {
		longest = max(longest, ts[i].Sub(ts[i-1]))
	}
	return longest
}

// checkChaosRun classifies one acknowledged run, and returns its record
// and when it ended (its terminal event's time), if it did.
func checkChaosRun(ctx context.Context, c *client.Client, js jetstream.JetStream, r *chaosRun, justified justifier) (chaosVerdict, string, wire.RunRecord, time.Time) {
	var evs []wire.Event
	var followErr error
	began := time.Now()
	defer func() {
		if d := time.Since(began); d > 20*time.Second {
			r.slow = d
		}
	}()
	for ev, err := range c.Events(ctx, r.tenant, r.id, 1) {
		if err != nil {
			followErr = err
			break
		}
		evs = append(evs, ev)
	}
	sawSucceeded := len(r.live) > 0 && r.live[len(r.live)-1].Terminal() && r.live[len(r.live)-1].Status.State == wire.StateSucceeded
	rec, recErr := recordTerminal(c, r.tenant, r.id)
	// Stored, raw: a seq stored twice must hold the same event (a batch
	// retried through a failover), and one seq at most a terminal status.
	// Read with a bound of its own: the settle deadline is for the run to
	// end, and a run that ended just before it is read all the same.
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	dup, stored, readErr := checkStored(sctx, js, r)
	cancel()
	if followErr != nil && readErr == nil && dup == "" && stored.ended {
		// Stored to its end, and a new follower could not read it to its
		// end within the deadline: not lost, but not readable either.
		return verdictUnreadable, fmt.Sprintf("a new follower read %d events within the deadline (%v); %d seqs stored, to a terminal status; record %s",
			len(evs), followErr, stored.seqs, rec.State), rec, time.Time{}
	}
	switch {
	case len(evs) == 0 && errors.Is(recErr, client.ErrNotFound):
		return verdictLost, fmt.Sprintf("acknowledged, and now no events and no record (%v)", followErr), rec, time.Time{}
	case len(evs) == 0:
		return verdictLost, fmt.Sprintf("acknowledged, and now no events (%v); record %s", followErr, rec.State), rec, time.Time{}
	case errors.Is(recErr, client.ErrNotFound):
		return verdictLost, fmt.Sprintf("no record; events %s", describe(evs)), rec, time.Time{}
	}

	switch {
	case readErr != nil:
		return verdictInconsistent, fmt.Sprintf("read stored events: %v", readErr), rec, time.Time{}
	case dup != "":
		return verdictDuplicated, dup, rec, time.Time{}
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			return verdictInconsistent, fmt.Sprintf("event %d has seq %d: %s", i, ev.Seq, describe(evs)), rec, time.Time{}
		}
	}
	last := evs[len(evs)-1]
	if !last.Terminal() {
		if sawSucceeded {
			return verdictLost, fmt.Sprintf("its client saw it succeed; now %s (%v)", describe(evs), followErr), rec, time.Time{}
		}
		return verdictStuck, fmt.Sprintf("no terminal status within the deadline: %s (%v); record %s", describe(evs), followErr, rec.State), rec, time.Time{}
	}
	end := time.Unix(0, last.TS)
	if sawSucceeded && (last.Status.State != wire.StateSucceeded || len(evs) != len(r.live)) {
		return verdictLost, fmt.Sprintf("its client saw it succeed with %d events; now %s", len(r.live), describe(evs)), rec, end
	}
	// Output comes after running, each tick once and in order; a run
	// executed again after its output would start its ticks over.
	running, ticks, committed := false, 0, false
	for _, ev := range evs {
		switch {
		case ev.Kind == wire.KindStatus && ev.Status.State == wire.StateRunning:
			running = true
		case ev.Kind == wire.KindChunk:
			committed = true
			if !running {
				return verdictInconsistent, fmt.Sprintf("a chunk before running: %s", describe(evs)), rec, end
			}
			if ev.Chunk.Type != wire.ChunkText || !strings.HasPrefix(ev.Chunk.Content, "tick ") {
				continue // not the slow script's
			}
			ticks++
			if want := fmt.Sprintf("tick %d\n", ticks); ev.Chunk.Content != want {
				return verdictDuplicated, fmt.Sprintf("chunk %q, want %q (output replayed): %s", ev.Chunk.Content, want, describe(evs)), rec, end
			}
		}
	}
	st := *last.Status
	switch {
	case recErr != nil:
		return verdictStuck, fmt.Sprintf("record: %v", recErr), rec, end
	case !rec.State.Terminal():
		return verdictStuck, fmt.Sprintf("record %s after its terminal status %s", rec.State, st.State), rec, end
	}
	if msg := recordDisagrees(r, rec, st, committed); msg != "" {
		return verdictInconsistent, msg, rec, end
	}
	if st.State != wire.StateSucceeded {
		if justified(r, st, committed) {
			return verdictJustified, "", rec, end
		}
		return verdictWronglyFailed, fmt.Sprintf("ended %s (%v) after %s", st.State, st.Error, describe(evs)), rec, end
	}
	if ticks != chaosTicks {
		return verdictLost, fmt.Sprintf("succeeded with %d chunks, want %d: %s", ticks, chaosTicks, describe(evs)), rec, end
	}
	return verdictOK, "", rec, end
}

// recordTerminal reads a run's record until it is terminal, for at most
// a few seconds (the record follows the terminal status), and returns the
// last one read.
func recordTerminal(c *client.Client, tenant, id string) (wire.RunRecord, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rec, err := c.Status(ctx, tenant, id)
		cancel()
		if (err == nil && rec.State.Terminal()) || errors.Is(err, client.ErrNotFound) || time.Now().After(deadline) {
			return rec, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// recordDisagrees says how a run's terminal record disagrees with its
// terminal status and its submission, or "".
func recordDisagrees(r *chaosRun, rec wire.RunRecord, st wire.Status, committed bool) string {
	var cost string
	if st.Summary != nil {
		cost = st.Summary.Cost
	}
	var class, recClass wire.Class
	if st.Error != nil {
		class = st.Error.Class
	}
	if rec.Error != nil {
		recClass = rec.Error.Class
	}
	switch {
	case rec.State != st.State:
		return fmt.Sprintf("record %s, terminal status %s", rec.State, st.State)
	case rec.RunID != r.id || rec.Tenant != r.tenant || rec.Principal != r.principal || rec.Profile != "fixture":
		return fmt.Sprintf("record of %s.%s by %s (%s), want %s.%s by %s", rec.Tenant, rec.RunID, rec.Principal, rec.Profile, r.tenant, r.id, r.principal)
	case class != recClass:
		return fmt.Sprintf("record's error %v, terminal status's %v", rec.Error, st.Error)
	case rec.Cost != cost:
		return fmt.Sprintf("record's cost %q, terminal status's %q", rec.Cost, cost)
	case committed && !rec.Committed:
		return "the run had output; its record says it had none"
	}
	return ""
}

// checkStored reads the run's events as stored (batches expanded) and
// says what repeats, or "", retrying a read that fails (a server
// restarting) until ctx ends, then returning its error.
func checkStored(ctx context.Context, js jetstream.JetStream, r *chaosRun) (string, storedRun, error) {
	for {
		var sr storedRun
		msg, err := readStored(ctx, js, r, &sr)
		if err == nil {
			return msg, sr, nil
		}
		select {
		case <-ctx.Done():
			return "", storedRun{}, err // counted: nothing may stay unreadable
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// storedRun is what is stored of a run: how many seqs, and whether one
// is a terminal status.
type storedRun struct {
	seqs  int
	ended bool
}

func readStored(ctx context.Context, js jetstream.JetStream, r *chaosRun, sr *storedRun) (string, error) {
	names := subject.Names{}
	st, err := js.Stream(ctx, names.EventsStream())
	if err != nil {
		return "", err
	}
	bySeq := map[uint64]wire.Event{}
	var terminal []uint64
	// Each stored message of the run in turn, by a get of the next one
	// of its subject (no consumer: thousands of runs are read).
	for next := uint64(1); ; {
		msg, err := st.GetMsg(ctx, next, jetstream.WithGetMsgSubject(names.Events(r.tenant, r.id)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return "", err
		}
		next = msg.Sequence + 1
		stored, err := wire.Decode[wire.Event](msg.Data)
		if err != nil {
			return fmt.Sprintf("stored event: %v", err), nil
		}
		for ev := range stored.Expand() {
			if prev, ok := bySeq[ev.Seq]; ok {
				if !sameEvent(prev, ev) {
					return fmt.Sprintf("seq %d stored twice, different: %s and %s", ev.Seq, describe([]wire.Event{prev}), describe([]wire.Event{ev})), nil
				}
				continue
			}
			bySeq[ev.Seq] = ev
			sr.seqs++
			if ev.Terminal() {
				terminal = append(terminal, ev.Seq)
				sr.ended = true
			}
		}
	}
	if len(terminal) > 1 {
		return fmt.Sprintf("%d terminal statuses stored, at seqs %v", len(terminal), terminal), nil
	}
	return "", nil
}

// sameEvent reports whether two events stored at one seq are one event.
func sameEvent(a, b wire.Event) bool {
	if a.Kind != b.Kind {
		return false
	}
	if a.Kind == wire.KindChunk {
		return a.Chunk.Type == b.Chunk.Type && a.Chunk.Content == b.Chunk.Content
	}
	return a.Status.State == b.Status.State && a.Status.Attempt == b.Status.Attempt
}

// checkLedger checks that every ended run but a rejected one has its
// spend entry, as the run ended, and that each tenant's rollup counts its
// entries, within (the writers feed the ledger after the run's end). It
// returns how many are missing or disagree.
func checkLedger(t *testing.T, js jetstream.JetStream, ended []wire.RunRecord, within time.Duration, counts *chaosCounts) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	names := subject.Names{}
	kv, err := js.KeyValue(ctx, names.SpendBucket())
	if err != nil {
		t.Fatalf("spend bucket: %v", err)
	}
	store, err := ledger.Open(ctx, js, names)
	if err != nil {
		t.Fatalf("ledger: %v", err)
	}
	var problems []string
	for ctx.Err() == nil {
		problems = nil
		for _, rec := range ended {
			want, key, ok := ledger.Entry(rec)
			if !ok {
				continue
			}
			e, err := kv.Get(ctx, key)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s.%s: spend entry %s: %v", rec.Tenant, rec.RunID, key, err))
				continue
			}
			got, err := wire.Decode[wire.SpendEntry](e.Value())
			if err != nil || got.State != want.State || got.Cost != want.Cost || got.Principal != want.Principal {
				problems = append(problems, fmt.Sprintf("%s.%s: spend entry %+v (%v), want %+v", rec.Tenant, rec.RunID, got, err, want))
			}
		}
		problems = append(problems, rollupsDisagree(ctx, kv, store)...)
		if len(problems) == 0 {
			return 0
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range problems {
		counts.note("ledger", p)
	}
	return len(problems)
}

// rollupsDisagree compares each chaos tenant's spend over the days
// around now (the rollups and the entries after them) with its spend
// entries in the bucket.
func rollupsDisagree(ctx context.Context, kv jetstream.KeyValue, store *ledger.Store) []string {
	var out []string
	now := time.Now()
	for _, tn := range chaosTenants {
		keys, err := kv.ListKeysFiltered(ctx, tn+".>")
		if err != nil {
			return append(out, fmt.Sprintf("list spend entries of %s: %v", tn, err))
		}
		entries := 0
		for range keys.Keys() {
			entries++
		}
		days, err := store.Range(ctx, tn, ledger.Days(now.Add(-24*time.Hour), now.Add(24*time.Hour)))
		if err != nil {
			return append(out, fmt.Sprintf("spend of %s: %v", tn, err))
		}
		total := &ledger.Spend{}
		for _, sp := range days {
			total.Merge(sp)
		}
		if got := total.Total().Runs; got != int64(entries) {
			out = append(out, fmt.Sprintf("tenant %s: the ledger counts %d runs, its spend entries are %d", tn, got, entries))
		}
	}
	return out
}

// checkConsent checks that each principal's consent is its last
// acknowledged change, at that change's revision or a later one, and
// returns how many principals' are not.
func checkConsent(js jetstream.JetStream, changes []consentChange, counts *chaosCounts) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	grants, err := consent.Open(ctx, js, subject.Names{})
	if err != nil {
		counts.note("consent", err.Error())
		return len(changes)
	}
	final := map[string]consentChange{}
	for _, ch := range changes {
		final[ch.tenant+"."+ch.principal] = ch
	}
	lost := 0
	for k, ch := range final {
		st, err := grants.Get(ctx, ch.tenant, ch.principal)
		switch {
		case err != nil:
			lost++
			counts.note("consent", fmt.Sprintf("%s: %v", k, err))
		case st.Granted != ch.granted || st.Rev < ch.rev:
			lost++
			counts.note("consent", fmt.Sprintf("%s: granted=%v at rev %d, its last acknowledged change granted=%v at rev %d", k, st.Granted, st.Rev, ch.granted, ch.rev))
		}
	}
	return lost
}

// TestHistoryCheckerClassifies shows the chaos tests' check can fail: on
// one server, a run that succeeded is ok; a run acknowledged but never
// stored is lost; a run with a second terminal status stored is
// duplicated; a run that failed with nothing to explain it is wrongly
// failed; a spend entry deleted and a consent change not in force are
// counted.
func TestHistoryCheckerClassifies(t *testing.T) {
	srv := natstest.RunJetStream(t)
	startNode(t, srv, mesh.Config{})
	c := newClient(t, srv)
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	h := &chaosHistory{acks: [][]time.Time{nil}, stops: []time.Time{time.Now()}}
	run := func(tn, script string) *chaosRun {
		req := runReq(t, fixtureReq{Prompt: "check", Script: script, DelayMS: 1})
		req.Tenant = tn
		id, evs := clienttest.Run(t, c, req)
		r := &chaosRun{tenant: tn, principal: req.Principal, id: id, acked: time.Now(), live: evs}
		h.runs = append(h.runs, r)
		return r
	}
	ok := run("t0", "slow")
	dup := run("t1", "slow")
	run("t2", "provider-error")
	h.runs = append(h.runs, &chaosRun{tenant: "t0", principal: "alice", id: "never-stored", acked: time.Now()})

	// A second terminal status after dup's.
	evs := clienttest.Collect(t, c, dup.tenant, dup.id)
	extra := wire.Event{V: wire.Version, RunID: dup.id, Seq: uint64(len(evs) + 1), TS: time.Now().UnixNano(), Kind: wire.KindStatus,
		Status: &wire.Status{State: wire.StateFailed, Error: wire.Errorf(wire.ProviderError, "a second end")}}
	if _, err := js.Publish(ctx, subject.Names{}.Events(dup.tenant, dup.id), clienttest.Msgpack(t, &extra)); err != nil {
		t.Fatal(err)
	}
	// ok's spend entry, once written, deleted.
	rec, err := c.Status(ctx, ok.tenant, ok.id)
	if err != nil {
		t.Fatal(err)
	}
	_, key, _ := ledger.Entry(rec)
	kv, err := js.KeyValue(ctx, subject.Names{}.SpendBucket())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() error { _, err := kv.Get(ctx, key); return err })
	if err := kv.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	// A consent change acknowledged at a revision the bucket never had.
	grants, err := consent.Open(ctx, js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := grants.Grant(ctx, "t0", "p0")
	if err != nil {
		t.Fatal(err)
	}
	h.consent = []consentChange{{tenant: "t0", principal: "p0", granted: true, rev: st.Rev}, {tenant: "t1", principal: "p0", granted: true, rev: 1}}

	var counts chaosCounts
	h.check(t, c, js, 3*time.Second, noFailureJustified, &counts)
	got := [...]int{counts.runs, counts.ok, counts.lost, counts.duplicated, counts.wronglyFailed, counts.stuck, counts.inconsistent, counts.consentLost}
	if want := [...]int{4, 1, 1, 1, 1, 0, 0, 1}; got != want || counts.ledgerMissing == 0 {
		t.Errorf("runs, ok, lost, duplicated, wrongly failed, stuck, inconsistent, consent lost = %v, want %v; ledger missing %d, want > 0; notes:\n%s",
			got, want, counts.ledgerMissing, strings.Join(counts.notes, "\n"))
	}
}
