package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/agentmesh/agentmesh/pkg/ledger"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// maxSpendDays bounds the days one spend query reads (two reads a day).
const maxSpendDays = 400

// ledgerCmd is what the spend, budget and quota commands share: the
// client flags, whether --principal was given, and the ledger.
type ledgerCmd struct {
	f            clientFlags
	fs           *flag.FlagSet
	principalSet bool
}

func newLedgerCmd(name, synopsis string, io *stdio) *ledgerCmd {
	c := &ledgerCmd{fs: newFlagSet(name, synopsis, io)}
	c.f.register(c.fs, io)
	return c
}

// parse parses args (no positional arguments) and says whether
// --principal was given: without it, a command is about the tenant.
func (c *ledgerCmd) parse(name string, args []string) error {
	pos, err := parse(c.fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("%s: unexpected argument %q", name, pos[0])
	}
	c.fs.Visit(func(fl *flag.Flag) { c.principalSet = c.principalSet || fl.Name == "principal" })
	return nil
}

// principal is --principal if it was given, else "" (the tenant).
func (c *ledgerCmd) principal() string {
	if c.principalSet {
		return c.f.principal
	}
	return ""
}

// open connects and opens the ledger, within a request timeout: the
// caller calls done once finished, which closes the connection.
func (c *ledgerCmd) open(ctx context.Context) (context.Context, *ledger.Store, func(), error) {
	oc, err := c.f.ops()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	done := func() { cancel(); oc.nc.Close() }
	s, err := ledger.Open(ctx, oc.js, oc.names)
	if err != nil {
		done()
		return nil, nil, nil, usageErr("%v", err)
	}
	return ctx, s, done, nil
}

// spendRow is one line of agentmesh spend.
type spendRow struct {
	Key   string     `json:"key,omitempty"`
	Runs  int64      `json:"runs"`
	Usage wire.Usage `json:"usage"`
	Cost  string     `json:"cost"` // exact decimal USD
}

func rowOf(key string, s ledger.Sum) spendRow {
	return spendRow{Key: key, Runs: s.Runs, Usage: s.Usage, Cost: s.CostString()}
}

// cmdSpend shows the spend ledger of a tenant, or of one of its
// principals, from a day to today (UTC), in all or by profile, label or
// day.
func cmdSpend(ctx context.Context, args []string, io *stdio) error {
	c := newLedgerCmd("spend", "--tenant T [--principal P] [--by profile|label|day] [--since YYYY-MM-DD] [--json]", io)
	by := c.fs.String("by", "", "break the spend down by profile, label or day")
	since := c.fs.String("since", "", "first UTC day, YYYY-MM-DD (default: the first day of the current month)")
	asJSON := c.fs.Bool("json", false, "print the spend as JSON")
	if err := c.parse("spend", args); err != nil {
		return err
	}
	switch *by {
	case "", "profile", "label", "day":
	default:
		return usageErr("--by %q: want profile, label or day", *by)
	}
	now := time.Now().UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	if *since != "" {
		d, err := ledger.ParseDay(*since)
		if err != nil {
			return usageErr("--since: %v", err)
		}
		from = d
	}
	days := ledger.Days(from, now)
	switch {
	case from.After(now):
		return usageErr("--since %s is after today (%s UTC)", from.Format(time.DateOnly), now.Format(time.DateOnly))
	case len(days) > maxSpendDays:
		return usageErr("--since %s: %d days, at most %d in one query", from.Format(time.DateOnly), len(days), maxSpendDays)
	}
	ctx, store, done, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	byDay, err := store.Range(ctx, c.f.tenant, days)
	if err != nil {
		return &exitError{code: exitFail, err: err}
	}
	// One principal's spend, or the tenant's, of a set of days.
	view := func(sp *ledger.Spend) ledger.PrincipalSpend {
		if p := c.principal(); p != "" {
			return sp.Principal(p)
		}
		return sp.Tenant()
	}
	all := &ledger.Spend{}
	for _, d := range days {
		all.Merge(byDay[d])
	}
	total := view(all)
	var rows []spendRow
	switch *by {
	case "day":
		for _, d := range days {
			if s := view(byDay[d]).Total; s.Runs > 0 {
				t, _ := ledger.ParseDay(d)
				rows = append(rows, rowOf(t.Format(time.DateOnly), s))
			}
		}
	case "profile", "label":
		m := total.Profiles
		if *by == "label" {
			m = total.Labels
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			rows = append(rows, rowOf(k, *m[k]))
		}
	}
	if *asJSON {
		return json.NewEncoder(io.stdout).Encode(struct {
			Tenant    string     `json:"tenant"`
			Principal string     `json:"principal,omitempty"`
			Since     string     `json:"since"`
			Until     string     `json:"until"`
			By        string     `json:"by,omitempty"`
			Total     spendRow   `json:"total"`
			Rows      []spendRow `json:"rows,omitempty"`
		}{c.f.tenant, c.principal(), from.Format(time.DateOnly), now.Format(time.DateOnly), *by, rowOf("", total.Total), rows})
	}
	who := "tenant " + c.f.tenant
	if p := c.principal(); p != "" {
		who = "principal " + p + " of tenant " + c.f.tenant
	}
	fmt.Fprintf(io.stdout, "spend of %s, %s to %s (UTC)\n", who, from.Format(time.DateOnly), now.Format(time.DateOnly))
	tw := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
	if *by != "" {
		fmt.Fprintf(tw, "%s\truns\tcost (USD)\tinput\toutput\tcache read\tcache write\treasoning\n", *by)
	} else {
		fmt.Fprintf(tw, "\truns\tcost (USD)\tinput\toutput\tcache read\tcache write\treasoning\n")
	}
	for _, r := range append(rows, rowOf("total", total.Total)) {
		u := r.Usage
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\n", r.Key, r.Runs, r.Cost, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.ReasoningTokens)
	}
	return tw.Flush()
}

// cmdBudget sets, shows or clears a tenant's or a principal's budget.
func cmdBudget(ctx context.Context, args []string, io *stdio) error {
	do := func(verb string) func(context.Context, []string, *stdio) error {
		return func(ctx context.Context, args []string, io *stdio) error {
			synopsis := "--tenant T [--principal P]"
			if verb == "set" {
				synopsis += " --amount USD --period day|month"
			}
			c := newLedgerCmd("budget "+verb, synopsis, io)
			amount := c.fs.String("amount", "", "the budget, an exact decimal amount of USD (set)")
			period := c.fs.String("period", "", "the budget's UTC period: day or month (set)")
			asJSON := c.fs.Bool("json", false, "print the budget and its period's spend as JSON (show)")
			if err := c.parse("budget "+verb, args); err != nil {
				return err
			}
			b := wire.Budget{Tenant: c.f.tenant, Principal: c.principal(), Amount: *amount, Period: *period}
			if verb == "set" {
				if err := ledger.CheckBudget(b); err != nil {
					return usageErr("budget set: %v", err)
				}
			}
			ctx, store, done, err := c.open(ctx)
			if err != nil {
				return err
			}
			defer done()
			switch verb {
			case "set":
				err = store.SetBudget(ctx, b)
			case "clear":
				err = store.ClearBudget(ctx, b.Tenant, b.Principal)
				if err == nil {
					fmt.Fprintf(io.stdout, "budget of %s cleared\n", scope(b))
					return nil
				}
			}
			if err != nil {
				return &exitError{code: exitFail, err: err}
			}
			asked := b
			if b, err = store.Budget(ctx, b.Tenant, b.Principal); errors.Is(err, ledger.ErrNotSet) {
				fmt.Fprintf(io.stdout, "%s has no budget\n", scope(asked))
				return nil
			} else if err != nil {
				return &exitError{code: exitFail, err: err}
			}
			now := time.Now()
			start, err := ledger.PeriodStart(b.Period, now)
			if err != nil {
				return &exitError{code: exitFail, err: err}
			}
			byDay, err := store.Range(ctx, b.Tenant, ledger.Days(start, now))
			if err != nil {
				return &exitError{code: exitFail, err: err}
			}
			all := &ledger.Spend{}
			for _, sp := range byDay {
				all.Merge(sp)
			}
			spent := all.Total()
			if b.Principal != "" {
				spent = all.Principal(b.Principal).Total
			}
			if *asJSON {
				return json.NewEncoder(io.stdout).Encode(struct {
					wire.Budget
					Since string `json:"since"`
					Spent string `json:"spent"`
				}{b, start.Format(time.DateOnly), spent.CostString()})
			}
			fmt.Fprintf(io.stdout, "%s: %s USD a %s; spent %s USD since %s UTC\n", scope(b), b.Amount, b.Period, spent.CostString(), start.Format(time.DateOnly))
			return nil
		}
	}
	return subcommand(ctx, "budget", args, io, map[string]func(context.Context, []string, *stdio) error{
		"set": do("set"), "show": do("show"), "clear": do("clear"),
	}, "set", "show", "clear")
}

func scope(b wire.Budget) string {
	if b.Principal != "" {
		return "principal " + b.Principal + " of tenant " + b.Tenant
	}
	return "tenant " + b.Tenant
}

// printHeld lists the runs holding a tenant's quota (run id → the unix
// ms it was admitted at), oldest first.
func printHeld(io *stdio, held map[string]int64) error {
	if len(held) == 0 {
		return nil
	}
	ids := slices.SortedFunc(maps.Keys(held), func(a, b string) int { return cmp.Or(cmp.Compare(held[a], held[b]), cmp.Compare(a, b)) })
	tw := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tADMITTED")
	for _, id := range ids {
		fmt.Fprintf(tw, "%s\t%s\n", id, time.UnixMilli(held[id]).UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// cmdQuota sets or shows a tenant's concurrency quota and the runs
// holding it.
func cmdQuota(ctx context.Context, args []string, io *stdio) error {
	do := func(verb string) func(context.Context, []string, *stdio) error {
		return func(ctx context.Context, args []string, io *stdio) error {
			c := newLedgerCmd("quota "+verb, "--tenant T [--max-running N]", io)
			maxRunning := c.fs.String("max-running", "", "most runs admitted and not ended; 0 removes the quota (set)")
			if err := c.parse("quota "+verb, args); err != nil {
				return err
			}
			n := 0
			if verb == "set" {
				var err error
				if n, err = strconv.Atoi(*maxRunning); err != nil || n < 0 {
					return usageErr("quota set: --max-running %q: want a number of runs >= 0", *maxRunning)
				}
			}
			ctx, store, done, err := c.open(ctx)
			if err != nil {
				return err
			}
			defer done()
			if verb == "set" {
				if err := store.SetQuota(ctx, c.f.tenant, n); err != nil {
					return &exitError{code: exitFail, err: err}
				}
			}
			held, err := store.InFlight(ctx, c.f.tenant)
			if err != nil {
				return &exitError{code: exitFail, err: err}
			}
			q, err := store.Quota(ctx, c.f.tenant)
			switch {
			case errors.Is(err, ledger.ErrNotSet):
				fmt.Fprintf(io.stdout, "tenant %s has no quota\n", c.f.tenant)
			case err != nil:
				return &exitError{code: exitFail, err: err}
			default:
				fmt.Fprintf(io.stdout, "tenant %s: at most %d runs admitted and not ended; %d now\n", c.f.tenant, q.MaxRunning, len(held))
			}
			return printHeld(io, held)
		}
	}
	return subcommand(ctx, "quota", args, io, map[string]func(context.Context, []string, *stdio) error{
		"set": do("set"), "show": do("show"),
	}, "set", "show")
}
