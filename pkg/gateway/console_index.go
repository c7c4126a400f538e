package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// The console's runs index. runs.Store.List is one watch of the whole
// runs bucket: a page load built on it would read every record. The
// console instead keeps, in each gateway, an index of the records in
// memory fed by one watch of the runs bucket that lasts as long as the
// gateway: its current values once at start, then every write and delete
// as it happens. A page is a walk of the index from its cursor, newest
// first, bounded by the page size and by indexScanCap entries examined,
// so its cost does not grow with the bucket's reads and at most with the
// records held in memory. The index keeps what the retention keeps: a
// terminal record past the bucket's retention (its TTL may expire it
// without a delete the watch sees) is left out of every page and pruned.

// indexScanCap bounds the index entries one page examines: a filter that
// matches few runs ends the page early, with a cursor to go on from.
const indexScanCap = 20000

// indexed is one record in the index, without its request.
type indexed struct {
	rec wire.RunRecord
}

// runCursor is a position in the index order: newest first, then by
// tenant and run id.
type runCursor struct {
	created int64
	tenant  string
	runID   string
}

func cursorOf(r *wire.RunRecord) runCursor {
	return runCursor{created: r.Created, tenant: r.Tenant, runID: r.RunID}
}

// cmpCursor orders a before b when a is newer (then by tenant, run id).
func cmpCursor(a, b runCursor) int {
	return cmp.Or(cmp.Compare(b.created, a.created), cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.runID, b.runID))
}

func (c runCursor) String() string {
	return strconv.FormatInt(c.created, 10) + "." + c.tenant + "." + c.runID
}

// parseCursor reads a cursor (runCursor.String).
func parseCursor(s string) (runCursor, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return runCursor{}, errors.New("want <created>.<tenant>.<run_id>, as a page's next link has it")
	}
	n, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || n < 0 {
		return runCursor{}, errors.New("its created time is not a number")
	}
	if err := errors.Join(subject.ValidToken("tenant", parts[1]), subject.ValidToken("run_id", parts[2])); err != nil {
		return runCursor{}, err
	}
	return runCursor{created: n, tenant: parts[1], runID: parts[2]}, nil
}

// runFilter is what a runs page keeps: each field empty for any.
type runFilter struct {
	tenant, profile, adapter string
	state                    string // a wire.State, or "live" for every state not terminal
}

func (f runFilter) keep(r *wire.RunRecord) bool {
	switch {
	case f.tenant != "" && r.Tenant != f.tenant,
		f.profile != "" && r.Profile != f.profile,
		f.adapter != "" && r.Adapter != f.adapter:
		return false
	case f.state == "":
		return true
	case f.state == "live":
		return !r.State.Terminal()
	case !wire.State(f.state).Terminal():
		// A record not ended says accepted or routed while its events
		// may say running: every one is a candidate, which the page
		// keeps by its state now (console.current).
		return !r.State.Terminal()
	}
	return string(r.State) == f.state
}

// runPage is one page of the index.
type runPage struct {
	Runs []wire.RunRecord
	// Next is the cursor of the next page, "" when this one is the last.
	Next string
	// Scanned is how many entries the page examined; Capped says it
	// stopped at indexScanCap, not at the page size or the end.
	Scanned int
	Capped  bool
}

// runIndex is the index; safe for concurrent use.
type runIndex struct {
	mu        sync.RWMutex
	byKey     map[string]*indexed
	all       []*indexed            // newest first (cmpCursor)
	byTenant  map[string][]*indexed // the same order
	ready     bool                  // the bucket's values at start are in
	err       error                 // the watch failed: the index is stale
	retention time.Duration         // 0: keep every terminal record
	now       func() time.Time
	subs      map[*indexSub]struct{} // the live runs lists' streams
}

// indexSub is one live runs list's share of the index's changes: the
// records put since it subscribed, until it falls subBuffer behind.
type indexSub struct {
	ch chan wire.RunRecord
}

// subBuffer bounds the records a live runs list has not read yet.
const subBuffer = 256

// subscribe returns a channel of every record put from now on (its
// request left out), closed when the subscriber falls subBuffer records
// behind, and the function that ends the subscription.
func (x *runIndex) subscribe() (<-chan wire.RunRecord, func()) {
	s := &indexSub{ch: make(chan wire.RunRecord, subBuffer)}
	x.mu.Lock()
	x.subs[s] = struct{}{}
	x.mu.Unlock()
	return s.ch, func() {
		x.mu.Lock()
		defer x.mu.Unlock()
		if _, ok := x.subs[s]; ok {
			delete(x.subs, s)
			close(s.ch)
		}
	}
}

// notifyLocked hands rec to every subscriber; one that is full is
// dropped, its channel closed.
func (x *runIndex) notifyLocked(rec wire.RunRecord) {
	for s := range x.subs {
		select {
		case s.ch <- rec:
		default:
			delete(x.subs, s)
			close(s.ch)
		}
	}
}

func newRunIndex(retention time.Duration) *runIndex {
	return &runIndex{byKey: map[string]*indexed{}, byTenant: map[string][]*indexed{}, retention: retention, now: time.Now, subs: map[*indexSub]struct{}{}}
}

// expired reports whether r is a terminal record past the retention.
func (x *runIndex) expired(r *wire.RunRecord, now int64) bool {
	return x.retention > 0 && r.State.Terminal() && r.Updated+x.retention.Milliseconds() < now
}

func search(s []*indexed, c runCursor) (int, bool) {
	return slices.BinarySearchFunc(s, c, func(e *indexed, c runCursor) int { return cmpCursor(cursorOf(&e.rec), c) })
}

func insertSorted(s []*indexed, e *indexed) []*indexed {
	i, _ := search(s, cursorOf(&e.rec))
	return slices.Insert(s, i, e)
}

func removeSorted(s []*indexed, e *indexed) []*indexed {
	if i, ok := search(s, cursorOf(&e.rec)); ok {
		return slices.Delete(s, i, i+1)
	}
	return s
}

// put adds or replaces a record. While loading (!ready) it only appends:
// load sorts once.
func (x *runIndex) put(rec wire.RunRecord) {
	rec.Request = nil
	key := subject.RunKey(rec.Tenant, rec.RunID)
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ready {
		x.notifyLocked(rec)
	}
	if old := x.byKey[key]; old != nil {
		if old.rec.Created == rec.Created {
			old.rec = rec // its place in the order is the same
			return
		}
		x.removeLocked(old)
	}
	e := &indexed{rec: rec}
	x.byKey[key] = e
	if !x.ready {
		x.all = append(x.all, e)
		x.byTenant[rec.Tenant] = append(x.byTenant[rec.Tenant], e)
		return
	}
	x.all = insertSorted(x.all, e)
	x.byTenant[rec.Tenant] = insertSorted(x.byTenant[rec.Tenant], e)
}

func (x *runIndex) removeLocked(e *indexed) {
	delete(x.byKey, subject.RunKey(e.rec.Tenant, e.rec.RunID))
	if !x.ready {
		x.all = slices.DeleteFunc(x.all, func(o *indexed) bool { return o == e })
		x.byTenant[e.rec.Tenant] = slices.DeleteFunc(x.byTenant[e.rec.Tenant], func(o *indexed) bool { return o == e })
	} else {
		x.all = removeSorted(x.all, e)
		x.byTenant[e.rec.Tenant] = removeSorted(x.byTenant[e.rec.Tenant], e)
	}
	if len(x.byTenant[e.rec.Tenant]) == 0 {
		delete(x.byTenant, e.rec.Tenant)
	}
}

// remove drops the record of key (<tenant>.<run_id>), if held.
func (x *runIndex) remove(key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.byKey[key]; e != nil {
		x.removeLocked(e)
	}
}

// loaded sorts what the start's values put and makes the index ready.
func (x *runIndex) loaded() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ready {
		return
	}
	order := func(a, b *indexed) int { return cmpCursor(cursorOf(&a.rec), cursorOf(&b.rec)) }
	slices.SortFunc(x.all, order)
	for _, s := range x.byTenant {
		slices.SortFunc(s, order)
	}
	x.ready = true
}

// failed records the watch's failure.
func (x *runIndex) failed(err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.err = err
}

// prune drops the records past the retention.
func (x *runIndex) prune() {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.now().UnixMilli()
	for _, e := range x.byKey {
		if x.expired(&e.rec, now) {
			x.removeLocked(e)
		}
	}
}

// errIndexNotReady is query's error before the start's values are in.
var errIndexNotReady = errors.New("the console's runs index is still loading; try again")

// tenants returns the tenants that have runs in the index, sorted.
func (x *runIndex) tenants() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]string, 0, len(x.byTenant))
	for t := range x.byTenant {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// query returns up to limit records f keeps, newest first, after the
// cursor after (nil: from the newest).
func (x *runIndex) query(f runFilter, after *runCursor, limit int) (runPage, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	switch {
	case x.err != nil:
		return runPage{}, x.err
	case !x.ready:
		return runPage{}, errIndexNotReady
	}
	s := x.all
	if f.tenant != "" {
		s = x.byTenant[f.tenant]
	}
	i := 0
	if after != nil {
		j, found := search(s, *after)
		if found {
			j++
		}
		i = j
	}
	now := x.now().UnixMilli()
	var page runPage
	for ; i < len(s); i++ {
		if page.Scanned == indexScanCap {
			page.Capped = true
			page.Next = cursorOf(&s[i-1].rec).String()
			return page, nil
		}
		page.Scanned++
		r := &s[i].rec
		if !f.keep(r) || x.expired(r, now) {
			continue
		}
		if len(page.Runs) == limit {
			page.Next = cursorOf(&page.Runs[limit-1]).String()
			return page, nil
		}
		page.Runs = append(page.Runs, *r)
	}
	return page, nil
}

// watchRuns feeds x from the runs bucket until ctx ends: the current
// values, then every change. It stops at the first failure, which x
// then reports to every page.
func watchRuns(ctx context.Context, js jetstream.JetStream, names subject.Names, x *runIndex, log *slog.Logger) {
	w, err := jsretry.Await(ctx, js.Conn(), log, "console's watch of the runs", func(ctx context.Context) (jetstream.KeyWatcher, error) {
		return runs.Watch(ctx, js, names)
	})
	if err != nil {
		x.failed(fmt.Errorf("watch the runs bucket: %w", err))
		log.Warn("console: cannot watch the runs bucket; the runs pages answer 503", "err", err)
		return
	}
	defer func() { _ = w.Stop() }()
	prune := time.NewTicker(time.Minute)
	defer prune.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-prune.C:
			x.prune()
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() == nil {
					x.failed(errors.New("the watch of the runs bucket ended"))
				}
				return
			}
			if e == nil {
				x.loaded()
				continue
			}
			if op := e.Operation(); op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge {
				x.remove(e.Key())
				continue
			}
			rec, err := wire.Decode[wire.RunRecord](e.Value())
			if err != nil {
				log.Warn("console: a run record does not decode; left out of the index", "key", e.Key(), "err", err)
				continue
			}
			x.put(rec)
		}
	}
}
