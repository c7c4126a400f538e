package artifacts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Head is the head of a conversation: what its next turn starts from, its
// source with its last run's patch applied.
type Head struct {
	Source wire.WorkspaceSource `json:"source"`
	Patch  *wire.ArtifactRef    `json:"patch,omitempty"`
	RunID  string               `json:"run_id"`
}

// SetHead writes the conversation's head, replacing the one before. The
// head is kept for the artifact retention from this write.
func (s *Store) SetHead(ctx context.Context, tenant, conversation string, h Head) error {
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("conversation", conversation), subject.ValidToken("run_id", h.RunID)); err != nil {
		return err
	}
	return s.putHead(ctx, subject.ConversationKey(tenant, conversation), h)
}

// Head reads the conversation's head: ErrNotFound if it has none (or it
// expired).
func (s *Store) Head(ctx context.Context, tenant, conversation string) (Head, error) {
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("conversation", conversation)); err != nil {
		return Head{}, err
	}
	return s.getHead(ctx, subject.ConversationKey(tenant, conversation), "head of conversation")
}

// SetRunHead records the state a run left its workspace in, whatever
// its end: its source and its patch (h.RunID is the run), so that a later
// run may start from it (wire.WorkspaceSource.FromRun). It is kept for
// the artifact retention, as the patch is.
func (s *Store) SetRunHead(ctx context.Context, tenant string, h Head) error {
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("run_id", h.RunID)); err != nil {
		return err
	}
	return s.putHead(ctx, runHeadKey(tenant, h.RunID), h)
}

// RunHead reads the state run runID of tenant left its workspace in:
// ErrNotFound if it stored none (it had no workspace, is unknown, or its
// artifacts expired).
func (s *Store) RunHead(ctx context.Context, tenant, runID string) (Head, error) {
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("run_id", runID)); err != nil {
		return Head{}, err
	}
	return s.getHead(ctx, runHeadKey(tenant, runID), "workspace of run")
}

// runHeadKey is the heads bucket's key of a run's state:
// <tenant>.r.<run_id>, three tokens where a conversation's key has two.
func runHeadKey(tenant, runID string) string { return tenant + ".r." + runID }

func (s *Store) putHead(ctx context.Context, key string, h Head) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if _, err := jsretry.Do(ctx, func(ctx context.Context) (uint64, error) { return s.heads.Put(ctx, key, b) }); err != nil {
		return fmt.Errorf("write head %s: %w", key, err)
	}
	return nil
}

func (s *Store) getHead(ctx context.Context, key, what string) (Head, error) {
	e, err := jsretry.Do(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.heads.Get(ctx, key) })
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Head{}, fmt.Errorf("%w: %s %s", ErrNotFound, what, key)
	}
	if err != nil {
		return Head{}, fmt.Errorf("read head %s: %w", key, err)
	}
	var h Head
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return Head{}, fmt.Errorf("head %s: %w", key, err)
	}
	return h, nil
}
