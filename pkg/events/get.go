package events

import (
	"context"

	"github.com/agentmesh/agentmesh/pkg/service/leader"
	"github.com/nats-io/nats.go/jetstream"
)

// lastFromLeader reads the last event on subj from the events stream's
// leader (pkg/service/leader), never a replica that may lag.
func (l *Log) lastFromLeader(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	return leader.LastMsg(ctx, l.js, l.stream, subj)
}
