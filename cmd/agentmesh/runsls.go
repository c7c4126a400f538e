package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// cmdRuns lists run records: agentmesh runs ls. Like the export
// commands it reads the mesh's runs bucket directly, so it needs the mesh
// account's credentials, not a tenant's.
func cmdRuns(ctx context.Context, args []string, io *stdio) error {
	return subcommand(ctx, "runs", args, io, map[string]func(context.Context, []string, *stdio) error{"ls": runsLs}, "ls")
}

// runsFilter is what runs ls keeps.
type runsFilter struct {
	states map[wire.State]bool // nil: any
	since  int64               // unix ms; records created before are left out
}

func (f runsFilter) keep(rec wire.RunRecord) bool {
	return (f.states == nil || f.states[rec.State]) && rec.Created >= f.since
}

var allStates = []wire.State{wire.StateAccepted, wire.StateRouted, wire.StateRunning, wire.StateSucceeded,
	wire.StateFailed, wire.StateCancelled, wire.StateTimedOut, wire.StateRejected}

// parseStates reads --state: one state or several, comma-separated.
func parseStates(s string) (map[wire.State]bool, error) {
	if s == "" {
		return nil, nil
	}
	out := map[wire.State]bool{}
	for part := range strings.SplitSeq(s, ",") {
		st := wire.State(strings.TrimSpace(part))
		if !slices.Contains(allStates, st) {
			return nil, fmt.Errorf("--state: %q is not a run state (%s)", part, joinStates())
		}
		out[st] = true
	}
	return out, nil
}

func joinStates() string {
	names := make([]string, len(allStates))
	for i, s := range allStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// parseSince reads --since: a duration back from now (90m, 24h), an RFC
// 3339 time or a UTC date (2026-01-31). It returns unix ms.
func parseSince(s string, now time.Time) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("--since %q: a duration back from now must not be negative", s)
		}
		return now.Add(-d).UnixMilli(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("--since %q: want a duration (90m, 24h), an RFC 3339 time (2026-01-31T12:00:00Z) or a date (2026-01-31)", s)
}

func runsLs(ctx context.Context, args []string, io *stdio) error {
	var f clientFlags
	fs := newFlagSet("runs ls", "[--tenant T | --all] [--state S[,S...]] [--since DUR|DATE] [--json]", io)
	f.register(fs, io)
	all := fs.Bool("all", false, "every tenant's runs")
	state := fs.String("state", "", "only runs in these states, comma-separated ("+joinStates()+"); a run not ended shows as its last event says")
	since := fs.String("since", "", "only runs created since: a duration back from now (24h), an RFC 3339 time or a date")
	asJSON := fs.Bool("json", false, "print the records as JSON lines")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("runs ls: unexpected argument %q", pos[0])
	}
	var filter runsFilter
	if filter.states, err = parseStates(*state); err != nil {
		return usageErr("runs ls: %v", err)
	}
	if filter.since, err = parseSince(*since, time.Now()); err != nil {
		return usageErr("runs ls: %v", err)
	}
	oc, err := f.ops()
	if err != nil {
		return err
	}
	defer oc.nc.Close()
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	store, err := runs.Open(ctx, service.Deps{NC: oc.nc, JS: oc.js, Names: oc.names, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return usageErr("%v", err)
	}
	tenant := f.tenant
	if *all {
		tenant = ""
	}
	var recs []wire.RunRecord
	for r, err := range store.List(ctx, tenant) {
		if err != nil {
			return &exitError{code: exitFail, err: err}
		}
		if filter.keep(r.Record) {
			recs = append(recs, r.Record)
		}
	}
	slices.SortStableFunc(recs, func(a, b wire.RunRecord) int {
		return cmp.Or(cmp.Compare(a.Created, b.Created), cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.RunID, b.RunID))
	})
	if *asJSON {
		enc := json.NewEncoder(io.stdout)
		for _, rec := range recs {
			if err := enc.Encode(rec); err != nil {
				return err
			}
		}
		return nil
	}
	return printRuns(io.stdout, recs)
}

// printRuns writes one row per record.
func printRuns(w io.Writer, recs []wire.RunRecord) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tRUN\tSTATE\tPROFILE\tPRINCIPAL\tCREATED\tUPDATED\tERROR")
	for _, r := range recs {
		var class string
		if r.Error != nil {
			class = string(r.Error.Class)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Tenant, r.RunID, r.State, r.Profile, r.Principal,
			unixMilli(r.Created), unixMilli(r.Updated), class)
	}
	return tw.Flush()
}
