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
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	key := subject.ConversationKey(tenant, conversation)
	if _, err := jsretry.Do(ctx, func(ctx context.Context) (uint64, error) { return s.heads.Put(ctx, key, b) }); err != nil {
		return fmt.Errorf("write head %s: %w", key, err)
	}
	return nil
}

// Head reads the conversation's head: ErrNotFound if it has none (or it
// expired).
func (s *Store) Head(ctx context.Context, tenant, conversation string) (Head, error) {
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("conversation", conversation)); err != nil {
		return Head{}, err
	}
	key := subject.ConversationKey(tenant, conversation)
	e, err := jsretry.Do(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return s.heads.Get(ctx, key) })
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Head{}, fmt.Errorf("%w: head of conversation %s", ErrNotFound, key)
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
