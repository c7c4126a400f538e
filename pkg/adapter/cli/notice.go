package cli

import (
	"context"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Notice is the chunk of a CLI's own notice that it has not reached its
// model API and is trying again (Codex's "Reconnecting... waiting for
// network"): a system chunk whose content is the notice, its provider the
// CLI, its error_class the class the trouble would end the run with.
// Nothing of the model's output is in it.
func Notice(provider, text string, class wire.Class) wire.Chunk {
	return wire.Chunk{Type: wire.ChunkSystem, Content: text, Metadata: wire.Metadata{Provider: provider, ErrorClass: class}}
}

// IsNotice reports whether c is a Notice.
func IsNotice(c wire.Chunk) bool {
	return c.Type == wire.ChunkSystem && c.Metadata.ErrorClass != ""
}

// reach ends a run whose CLI has reported only Notices for bound: from
// its first notice after anything else, a timer that any other chunk
// stops; when it fires, end is called with the ProviderTransportError
// naming the bound and the last notice.
type reach struct {
	name  string
	bound time.Duration
	end   context.CancelCauseFunc

	mu    sync.Mutex
	timer *time.Timer
	last  string
}

// see looks at the chunks the parser gave, in order.
func (r *reach) see(chunks []wire.Chunk) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range chunks {
		if !IsNotice(c) {
			if r.timer != nil {
				r.timer.Stop()
				r.timer = nil
			}
			continue
		}
		r.last = c.Content
		if r.timer == nil {
			r.timer = time.AfterFunc(r.bound, r.fire)
		}
	}
}

func (r *reach) fire() {
	r.mu.Lock()
	last := r.last
	r.mu.Unlock()
	r.end(wire.Errorf(wire.ProviderTransportError,
		"%s did not reach its model API within %s (policy.unreachable_after); its last notice: %s", r.name, r.bound, last))
}

// stop stops the timer.
func (r *reach) stop() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}
