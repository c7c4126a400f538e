package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// cmdFollow reattaches to a run: it prints the run's events from seq
// --from on (as agentmesh run prints them) until its terminal status. It
// never cancels the run; SIGINT or SIGTERM only stops the printing. Exit
// code 0 if the run succeeded, 1 for any other end or a run it cannot
// follow, 130 if interrupted first.
func cmdFollow(ctx context.Context, args []string, io *stdio) error {
	fs, f := runIDFlags("follow", io)
	from := fs.Uint64("from", 1, "the seq to start at (1: the whole run)")
	asJSON := fs.Bool("json", false, "print the events as NDJSON instead of text")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("follow: want one run id, got %d arguments", len(pos))
	}
	runID := pos[0]
	if err := subject.ValidToken("run_id", runID); err != nil {
		return usageErr("follow: %v", err)
	}
	if *from == 0 {
		return usageErr("follow: --from must be at least 1 (seqs start at 1)")
	}
	nc, c, err := f.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := followable(ctx, c, f.tenant, runID, *from); err != nil {
		return err
	}
	var out printer = newHumanPrinter(io.stdout, io.color)
	if *asJSON {
		out = newJSONPrinter(io.stdout)
	}
	for ev, err := range c.Events(ctx, f.tenant, runID, *from) {
		if err != nil {
			if ctx.Err() != nil {
				return interrupted("interrupted before run %s ended (it goes on; agentmesh follow %s --from <seq> reattaches)", runID, runID)
			}
			return usageErr("%v", err)
		}
		if err := out.event(ev); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if ev.Terminal() {
			if ev.Status.State != wire.StateSucceeded {
				return failed
			}
			return nil
		}
	}
	return usageErr("run %s: the event stream ended without a terminal status", runID)
}

// followable checks, before following, that the run exists and that an
// ended run has events from seq from on, so that following never waits
// for what cannot come.
func followable(ctx context.Context, c *client.Client, tenant, runID string, from uint64) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	rec, err := c.Status(ctx, tenant, runID)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return &exitError{code: exitFail, err: fmt.Errorf("follow: %w", err)}
	case err != nil:
		return usageErr("follow: %v", err)
	case !rec.State.Terminal():
		return nil // what is not stored yet will come
	}
	last, err := c.LastEvent(ctx, tenant, runID)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return &exitError{code: exitFail, err: fmt.Errorf("follow: run %s ended %s, and its events are no longer kept (the events stream's max age)", runID, rec.State)}
	case err != nil:
		return usageErr("follow: %v", err)
	case from > last.LastSeq():
		return &exitError{code: exitFail, err: fmt.Errorf("follow: run %s ended %s at seq %d: there is no seq %d", runID, rec.State, last.LastSeq(), from)}
	}
	return nil
}
