package gateway

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

func ids(p runPage) []string {
	out := make([]string, len(p.Runs))
	for i, r := range p.Runs {
		out[i] = r.RunID
	}
	return out
}

// TestRunIndex: the index's order, filters, cursor, updates, deletes,
// retention and scan cap, without NATS.
func TestRunIndex(t *testing.T) {
	now := time.UnixMilli(1_000_000_000)
	x := newRunIndex(time.Hour)
	x.now = func() time.Time { return now }
	rec := func(id, tenant string, created int64, st wire.State) wire.RunRecord {
		return wire.RunRecord{RunID: id, Tenant: tenant, Profile: "fixture", Adapter: "fixture", State: st, Created: created, Updated: now.UnixMilli()}
	}
	// Loading appends; loaded sorts.
	x.put(rec("a1", "acme", 10, wire.StateSucceeded))
	x.put(rec("g1", "globex", 30, wire.StateFailed))
	x.put(rec("a2", "acme", 20, wire.StateRouted))
	if _, err := x.query(runFilter{}, nil, 10); err != errIndexNotReady {
		t.Fatalf("query before loaded: %v, want errIndexNotReady", err)
	}
	x.loaded()
	// Live changes keep the order.
	x.put(rec("a3", "acme", 40, wire.StateRouted))
	x.put(rec("a0", "acme", 5, wire.StateSucceeded))
	page := func(f runFilter, after *runCursor, limit int) runPage {
		t.Helper()
		p, err := x.query(f, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got := ids(page(runFilter{}, nil, 10)); !slices.Equal(got, []string{"a3", "g1", "a2", "a1", "a0"}) {
		t.Errorf("every run: %v, want newest first", got)
	}
	if got := ids(page(runFilter{tenant: "acme", state: "live"}, nil, 10)); !slices.Equal(got, []string{"a3", "a2"}) {
		t.Errorf("acme's live runs: %v", got)
	}
	// The record of a run that ended replaces its live one in place.
	x.put(rec("a2", "acme", 20, wire.StateSucceeded))
	if got := ids(page(runFilter{state: "succeeded"}, nil, 10)); !slices.Equal(got, []string{"a2", "a1", "a0"}) {
		t.Errorf("succeeded: %v", got)
	}
	// Pages of two, by cursor, cover every run once.
	var all []string
	var after *runCursor
	for {
		p := page(runFilter{}, after, 2)
		all = append(all, ids(p)...)
		if p.Next == "" {
			break
		}
		c, err := parseCursor(p.Next)
		if err != nil {
			t.Fatal(err)
		}
		after = &c
	}
	if !slices.Equal(all, []string{"a3", "g1", "a2", "a1", "a0"}) {
		t.Errorf("paged: %v", all)
	}
	// A delete removes it; a terminal record past the retention is left out, then pruned.
	x.remove("globex.g1")
	old := rec("old", "acme", 1, wire.StateSucceeded)
	old.Updated = now.Add(-2 * time.Hour).UnixMilli()
	x.put(old)
	if got := ids(page(runFilter{}, nil, 10)); !slices.Equal(got, []string{"a3", "a2", "a1", "a0"}) {
		t.Errorf("after a delete and an expired record: %v", got)
	}
	if got := x.tenants(); !slices.Equal(got, []string{"acme"}) {
		t.Errorf("tenants: %v, want acme only", got)
	}
	x.prune()
	if _, held := x.byKey["acme.old"]; held {
		t.Error("prune kept a record past the retention")
	}
	// A filter that matches little stops at the scan cap with a cursor.
	for i := range indexScanCap + 10 {
		x.put(rec(fmt.Sprintf("n%06d", i), "noise", int64(100+i), wire.StateSucceeded))
	}
	p := page(runFilter{profile: "none"}, nil, 10)
	if !p.Capped || p.Scanned != indexScanCap || p.Next == "" || len(p.Runs) != 0 {
		t.Errorf("a filter matching nothing: capped %v, scanned %d, next %q, %d runs", p.Capped, p.Scanned, p.Next, len(p.Runs))
	}
	c, err := parseCursor(p.Next)
	if err != nil {
		t.Fatal(err)
	}
	if p2 := page(runFilter{profile: "none"}, &c, 10); p2.Capped || p2.Next != "" || p2.Scanned != 10+4 {
		t.Errorf("its next page: capped %v, scanned %d, next %q", p2.Capped, p2.Scanned, p2.Next)
	}
	for _, bad := range []string{"", "1.a", "x.a.b", "-1.a.b", "1.a b.c", "1.a.b.c"} {
		if _, err := parseCursor(bad); err == nil {
			t.Errorf("parseCursor(%q) = nil error", bad)
		}
	}
}
