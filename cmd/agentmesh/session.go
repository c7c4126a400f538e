package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// cmdSend sends a follow-up prompt to a session run (docs/contract.md
// §6.1), or with -interrupt cancels the turn in progress.
func cmdSend(ctx context.Context, args []string, io *stdio) error {
	var f clientFlags
	fs := newFlagSet("send", "[flags] <run_id> <prompt>   (or -interrupt <run_id>)", io)
	f.register(fs, io)
	interrupt := fs.Bool("interrupt", false, "cancel the session's turn in progress instead; the session takes the next prompt")
	workspace := fs.String("workspace", "", "the workspace (runner-relative) of the run that resumes a suspended session; give the session's own, which Claude's agent needs to load it")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	want := 2
	if *interrupt {
		want = 1
	}
	if len(pos) != want {
		return usageErr("send: want a run id and %s, got %d arguments", map[bool]string{false: "a prompt", true: "nothing else with -interrupt"}[*interrupt], len(pos))
	}
	return withSession(ctx, &f, pos[0], func(ctx context.Context, c *client.Client) error {
		if *interrupt {
			_, err := c.Interrupt(ctx, f.tenant, pos[0])
			if err == nil {
				fmt.Fprintf(io.stdout, "interrupted the turn of session %s\n", pos[0])
			}
			return sessionErr("send", pos[0], err)
		}
		rep, err := c.Send(ctx, f.tenant, pos[0], pos[1])
		if err == nil {
			fmt.Fprintf(io.stdout, "session %s: queued as turn %d (%d ahead)\n", pos[0], rep.Turn, rep.Queued)
		}
		if resumed, rerr := resume(ctx, c, &f, pos[0], pos[1], *workspace, err); resumed != "" || rerr != nil {
			if rerr == nil {
				fmt.Fprintf(io.stdout, "session %s is not live (%v)\nresumed as run %s on its conversation: agentmesh follow %s\n", pos[0], err, resumed, resumed)
			}
			return sessionErr("send", pos[0], rerr)
		}
		return sessionErr("send", pos[0], err)
	})
}

// resume starts the run that continues a session's conversation with
// prompt when its run has ended between turns (refused with sendErr
// SessionEnded: suspended or idle, and succeeded) or lost its runner
// (SessionLost), and the session was on a conversation: the agent loads
// the session on any runner (docs/sessions.md). It returns "" and nil
// when the session cannot be resumed so, and sendErr stands.
func resume(ctx context.Context, c *client.Client, f *clientFlags, runID, prompt, workspace string, sendErr error) (string, error) {
	lost := errors.Is(sendErr, wire.SessionLost)
	if !lost && !errors.Is(sendErr, wire.SessionEnded) {
		return "", nil
	}
	rec, err := c.Status(ctx, f.tenant, runID)
	if err != nil || rec.Conversation == "" || (!lost && rec.State != wire.StateSucceeded) {
		return "", nil
	}
	b, err := wire.Marshal(map[string]any{"prompt": prompt})
	if err != nil {
		return "", err
	}
	req := wire.RunRequest{RunID: client.NewRunID(), Tenant: f.tenant, Principal: f.principal, Profile: rec.Profile, Conversation: rec.Conversation, Request: b}
	if workspace != "" {
		req.Runtime = map[string]any{"workspace": workspace}
	}
	id, err := c.Submit(ctx, req)
	if err != nil {
		return "", err
	}
	// Once its record exists, agentmesh follow finds it.
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	for {
		_, err := c.Status(ctx, f.tenant, id)
		if !errors.Is(err, client.ErrNotFound) {
			return id, err
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("run %s, which resumes the session, has no record after %s", id, requestTimeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// cmdApprove and cmdDeny answer a session's permission request: the
// request id is the tool_id of its permission_requested event.
func cmdApprove(ctx context.Context, args []string, io *stdio) error {
	return answer(ctx, "approve", true, args, io)
}

func cmdDeny(ctx context.Context, args []string, io *stdio) error {
	return answer(ctx, "deny", false, args, io)
}

func answer(ctx context.Context, name string, allow bool, args []string, io *stdio) error {
	var f clientFlags
	fs := newFlagSet(name, "[flags] <run_id> <request_id>", io)
	f.register(fs, io)
	option := fs.String("option", "", "the option id to choose (default: the request's first "+map[bool]string{true: "allow_once, else allow_always", false: "reject_once, else reject_always"}[allow]+" option)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || strings.TrimSpace(pos[1]) == "" {
		return usageErr("%s: want a run id and a request id, got %d arguments", name, len(pos))
	}
	return withSession(ctx, &f, pos[0], func(ctx context.Context, c *client.Client) error {
		rep, err := c.Answer(ctx, f.tenant, pos[0], pos[1], allow, *option)
		if err == nil {
			fmt.Fprintf(io.stdout, "session %s: request %s answered %s\n", pos[0], pos[1], rep.OptionID)
		}
		return sessionErr(name, pos[0], err)
	})
}

// withSession connects and calls do for the session run runID.
func withSession(ctx context.Context, f *clientFlags, runID string, do func(ctx context.Context, c *client.Client) error) error {
	if err := subject.ValidToken("run_id", runID); err != nil {
		return usageErr("%v", err)
	}
	return withClient(ctx, f, do)
}

// sessionErr is a typed refusal (exit 1, naming its class) or a usage or
// connection problem (exit 2).
func sessionErr(name, runID string, err error) error {
	var we *wire.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &we):
		return &exitError{code: exitFail, err: fmt.Errorf("%s %s: %w", name, runID, we)}
	}
	return usageErr("%s %s: %v", name, runID, err)
}
