package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/pkg/runs/convlog"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// History is a conversation's turns as the mesh keeps them: its runs, in
// the order the routers accepted them, each with its first prompt and the
// chunks its events hold.
type History struct {
	Conversation string       `json:"conversation"`
	Runs         []HistoryRun `json:"runs"`
}

// HistoryRun is one run of a conversation. Prompt is its first turn's
// prompt (cut at convlog.MaxPrompt bytes, then PromptTruncated); a later
// turn's prompt is an input chunk among its Chunks, which are its chunks
// in seq order (text, thinking, tool_use, tool_result, input, turn_end,
// ...). State is the last status its events hold (accepted, routed,
// running, or how it ended). EventsGone says its events are no longer stored (they aged
// out of the events stream, AGENTMESH_EVENTS_MAX_AGE): only its prompt
// is left.
type HistoryRun struct {
	RunID           string       `json:"run_id"`
	Created         int64        `json:"created"`
	Prompt          string       `json:"prompt,omitempty"`
	PromptTruncated bool         `json:"prompt_truncated,omitempty"`
	State           wire.State   `json:"state,omitempty"`
	Chunks          []wire.Chunk `json:"chunks"`
	EventsGone      bool         `json:"events_gone,omitempty"`
}

// History returns tenant's conversation: its log of runs (one JetStream
// direct get of the tenant's own key, so a tenant may read it for its own
// conversations only) and each run's events stored so far (a run still
// going is read up to its last event now). A conversation the mesh has
// no log of (never run, another tenant's, aged out, or run only through
// routers older than the log) is ErrNotFound.
func (c *Client) History(ctx context.Context, tenant, conversation string) (History, error) {
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("conversation", conversation)); err != nil {
		return History{}, err
	}
	log, err := c.conversationLog(ctx, tenant, conversation)
	if err != nil {
		return History{}, err
	}
	h := History{Conversation: conversation, Runs: make([]HistoryRun, 0, len(log.Runs))}
	for _, r := range log.Runs {
		hr := HistoryRun{RunID: r.RunID, Created: r.Created, Prompt: r.Prompt, PromptTruncated: r.PromptTruncated, Chunks: []wire.Chunk{}}
		if err := c.readRun(ctx, tenant, &hr); err != nil {
			return History{}, err
		}
		h.Runs = append(h.Runs, hr)
	}
	return h, nil
}

func (c *Client) conversationLog(ctx context.Context, tenant, conversation string) (convlog.Log, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := c.kvGet(rctx, c.names.ConversationLogGet(tenant, conversation))
	switch {
	case errors.Is(err, errNoKey):
		return convlog.Log{}, fmt.Errorf("%w: conversation %s for tenant %s", ErrNotFound, conversation, tenant)
	case err != nil:
		return convlog.Log{}, fmt.Errorf("read conversation %s: %w", conversation, err)
	}
	return convlog.Decode(b)
}

// readRun fills hr with its run's chunks and last state, reading its
// events from the first up to the last one stored when it starts.
func (c *Client) readRun(ctx context.Context, tenant string, hr *HistoryRun) error {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	last, err := c.LastEvent(lctx, tenant, hr.RunID)
	cancel()
	switch {
	case errors.Is(err, ErrNotFound):
		hr.EventsGone = true
		return nil
	case err != nil:
		return err
	}
	end := last.LastSeq()
	ectx, stop := context.WithCancel(ctx)
	defer stop()
	for ev, err := range c.Events(ectx, tenant, hr.RunID, 1) {
		if err != nil {
			return fmt.Errorf("read the events of run %s: %w", hr.RunID, err)
		}
		switch {
		case ev.Kind == wire.KindStatus && ev.Status != nil:
			hr.State = ev.Status.State
		case ev.Kind == wire.KindChunk && ev.Chunk != nil:
			hr.Chunks = append(hr.Chunks, *ev.Chunk)
		}
		if ev.LastSeq() >= end {
			break
		}
	}
	return nil
}
