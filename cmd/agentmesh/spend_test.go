package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestSpendBudgetQuota: the run record shows the exact cost (status
// --json); spend sums it by principal, profile and day; budget set|show
// refuse what is malformed and reject runs once spent; quota set|show.
func TestSpendBudgetQuota(t *testing.T) {
	dir := t.TempDir()
	priced := "schema: 1\nname: fixture\nadapter: fixture\ntransport: in_process\n" +
		"capabilities: {resumable: false, emits_tool_events: true, reports_usage: true}\n" +
		"model: fixture-1\npricing: {input: \"3.000001\", output: \"15\"}\npolicy: {max_attempts: 3, max_active: 8}\n"
	if err := os.WriteFile(filepath.Join(dir, "fixture.yaml"), []byte(priced), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startUpWith(t, dir, false)
	ctx := context.Background()
	must := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := m.cli(ctx, args...)
		if code != want {
			t.Fatalf("agentmesh %s: exit %d, want %d; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out + errOut
	}
	for _, bad := range [][]string{
		{"budget", "set", "--amount", "1e3", "--period", "day"},
		{"budget", "set", "--amount", "-2", "--period", "day"},
		{"budget", "set", "--amount", "2", "--period", "week"},
		{"quota", "set", "--max-running", "many"},
		{"spend", "--by", "model"},
		{"spend", "--since", "yesterday"},
	} {
		must(exitUsage, bad...)
	}
	var costs []string
	for _, p := range []string{"alice", "bob"} {
		out := must(exitOK, "run", "--principal", p, "-p", "fixture", "price me, "+p)
		id := acceptedLine.FindStringSubmatch(out)
		if id == nil {
			t.Fatalf("no accepted line:\n%s", out)
		}
		var rec wire.RunRecord
		if err := json.Unmarshal([]byte(must(exitOK, "status", "--json", id[1])), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Cost == "" || rec.Cost == "0" || rec.Usage == nil || rec.Usage.InputTokens == 0 {
			t.Fatalf("status --json of an ended run: cost %q usage %+v, want both", rec.Cost, rec.Usage)
		}
		costs = append(costs, rec.Cost)
		if out := must(exitOK, "status", id[1]); !strings.Contains(out, rec.Cost+" USD") || !strings.Contains(out, "input ") {
			t.Errorf("status of an ended run without its cost and usage:\n%s", out)
		}
	}
	want, err := cost.Add(costs...)
	if err != nil {
		t.Fatal(err)
	}
	type spendJSON struct {
		Total spendRow   `json:"total"`
		Rows  []spendRow `json:"rows"`
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		var got spendJSON
		if err := json.Unmarshal([]byte(must(exitOK, "spend", "--json")), &got); err != nil {
			return err
		}
		if got.Total.Cost != want || got.Total.Runs != 2 {
			return fmt.Errorf("spend: %+v, want 2 runs, %s USD", got.Total, want)
		}
		return nil
	})
	var alice spendJSON
	if err := json.Unmarshal([]byte(must(exitOK, "spend", "--principal", "alice", "--by", "profile", "--json")), &alice); err != nil {
		t.Fatal(err)
	}
	if alice.Total.Cost != costs[0] || len(alice.Rows) != 1 || alice.Rows[0].Key != "fixture" || alice.Rows[0].Cost != costs[0] {
		t.Errorf("spend of alice by profile: %+v, want %s on fixture", alice, costs[0])
	}
	if out := must(exitOK, "spend", "--by", "day", "--since", time.Now().UTC().AddDate(0, 0, -3).Format(time.DateOnly)); !strings.Contains(out, time.Now().UTC().Format(time.DateOnly)) || !strings.Contains(out, want) {
		t.Errorf("spend --by day:\n%s", out)
	}

	must(exitOK, "budget", "set", "--amount", "0.00001", "--period", "day")
	if out := must(exitOK, "budget", "show"); !strings.Contains(out, "tenant default: 0.00001 USD a day; spent "+want+" USD since") {
		t.Errorf("budget show: %s", out)
	}
	// The router reads the budget again within a second.
	natstest.Eventually(t, 10*time.Second, func() error {
		code, out, errOut := m.cli(ctx, "run", "--principal", "carol", "-p", "fixture", "one more")
		if code != exitFail || !strings.Contains(out+errOut, string(wire.BudgetExceeded)) {
			return fmt.Errorf("run after the budget: exit %d\n%s%s", code, out, errOut)
		}
		return nil
	})
	must(exitOK, "budget", "clear")
	if out := must(exitOK, "budget", "show"); !strings.Contains(out, "tenant default has no budget") {
		t.Errorf("budget show after clear: %s", out)
	}
	must(exitOK, "quota", "set", "--max-running", "3")
	if out := must(exitOK, "quota", "show"); !strings.Contains(out, "tenant default: at most 3 runs admitted and not ended; 0 now") || strings.Contains(out, "RUN") {
		t.Errorf("quota show: %s", out)
	}
	// A run in progress holds the quota, and quota show names it (in a
	// tenant of its own: the budget cleared above may still be cached).
	must(exitOK, "quota", "set", "--tenant", "quota", "--max-running", "3")
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	_, _, done := m.runSlow(runCtx, t, "tick 1", "--tenant", "quota", "--run-id", "holds-the-quota", "--delay-ms", "200", "hi")
	natstest.Eventually(t, 10*time.Second, func() error {
		if out := must(exitOK, "quota", "show", "--tenant", "quota"); !strings.Contains(out, "; 1 now\nRUN") || !regexp.MustCompile(`(?m)^holds-the-quota\s+\d{4}-`).MatchString(out) {
			return fmt.Errorf("quota show does not list the run holding it:\n%s", out)
		}
		return nil
	})
	stop()
	<-done
}
