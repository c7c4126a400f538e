package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// runIDFlags returns the flag set of a command that takes one run id, with
// the client flags registered.
func runIDFlags(name string, io *stdio) (*flag.FlagSet, *clientFlags) {
	var f clientFlags
	fs := newFlagSet(name, "[flags] <run_id>", io)
	f.register(fs, io)
	return fs, &f
}

// withRun parses args with fs into the one run id they name, connects with
// f and calls do under a request timeout.
func withRun(ctx context.Context, fs *flag.FlagSet, f *clientFlags, args []string, do func(ctx context.Context, c *client.Client, runID string) error) error {
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("%s: want one run id, got %d arguments", fs.Name(), len(pos))
	}
	runID := pos[0]
	if err := subject.ValidToken("run_id", runID); err != nil {
		return usageErr("%s: %v", fs.Name(), err)
	}
	return withClient(ctx, f, func(ctx context.Context, c *client.Client) error { return do(ctx, c, runID) })
}

// withClient connects with f and calls do under a request timeout.
func withClient(ctx context.Context, f *clientFlags, do func(ctx context.Context, c *client.Client) error) error {
	nc, c, err := f.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return do(ctx, c)
}

// cmdStatus prints a run's record: exit 0 when found, 1 when not.
func cmdStatus(ctx context.Context, args []string, io *stdio) error {
	fs, f := runIDFlags("status", io)
	asJSON := fs.Bool("json", false, "print the record as JSON")
	return withRun(ctx, fs, f, args, func(ctx context.Context, c *client.Client, runID string) error {
		return printStatus(ctx, c, f.tenant, runID, *asJSON, io)
	})
}

func printStatus(ctx context.Context, c *client.Client, tenant, runID string, asJSON bool, io *stdio) error {
	rec, err := c.Status(ctx, tenant, runID)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return &exitError{code: exitFail, err: err}
	case err != nil:
		return usageErr("status: %v", err)
	}
	if asJSON {
		enc := json.NewEncoder(io.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rec)
	}
	return printRecord(io, rec)
}

func printRecord(io *stdio, rec wire.RunRecord) error {
	tw := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("run", rec.RunID)
	row("tenant", rec.Tenant)
	row("principal", rec.Principal)
	row("state", string(rec.State))
	row("profile", rec.Profile)
	if rec.Pin != nil {
		row("pin", fmt.Sprintf("%s/%s (profile %.12s, registry %.24s)", rec.Pin.Provider, rec.Pin.Model, rec.Pin.ProfileHash, rec.Pin.RegistryVersion))
	}
	row("conversation", rec.Conversation)
	if rec.Attempt > 0 {
		row("attempt", fmt.Sprint(rec.Attempt))
	}
	row("owner", rec.Owner)
	if rec.Error != nil {
		row("error", errorText(rec.Error))
	}
	if u := rec.Usage; u != nil {
		row("usage", fmt.Sprintf("input %d, output %d, cache read %d, cache write %d, reasoning %d tokens",
			u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.ReasoningTokens))
	}
	if rec.Cost != "" {
		row("cost", rec.Cost+" USD")
	}
	for _, k := range slices.Sorted(maps.Keys(rec.Labels)) {
		row("label", k+"="+rec.Labels[k])
	}
	row("created", unixMilli(rec.Created))
	row("updated", unixMilli(rec.Updated))
	row("deadline", unixMilli(rec.Deadline))
	return tw.Flush()
}

func unixMilli(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).Format(time.RFC3339Nano)
}

// cmdCancel cancels a run: exit 0 once the run is over (cancelled now, or
// it had already ended), 1 when the mesh refused.
func cmdCancel(ctx context.Context, args []string, io *stdio) error {
	fs, f := runIDFlags("cancel", io)
	return withRun(ctx, fs, f, args, func(ctx context.Context, c *client.Client, runID string) error {
		return cancelRun(ctx, c, f.tenant, runID, io)
	})
}

func cancelRun(ctx context.Context, c *client.Client, tenant, runID string, io *stdio) error {
	reply, err := c.Cancel(ctx, tenant, runID)
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		return &exitError{code: exitFail, err: fmt.Errorf("cancel %s: %w", runID, we)}
	case err != nil:
		return usageErr("%v", err)
	case reply.Cancelled:
		fmt.Fprintf(io.stdout, "cancelled run %s\n", runID)
	case reply.Ended:
		fmt.Fprintf(io.stdout, "run %s had already ended: %s\n", runID, reply.State)
	default:
		fmt.Fprintf(io.stdout, "run %s: %s\n", runID, reply.State)
	}
	return nil
}
