package runner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/service"
)

// The counts of the runner's micro stats (service.Tally).
const (
	tallyDeliveries = "deliveries" // work deliveries executed
	tallyEnded      = "runs_ended" // runs this process ended (its terminal status stored)
)

// registerMetrics registers the families the runner host moves: those of
// ending runs, runs in flight, chunks, time to first chunk, redeliveries,
// fallbacks and dropped work, each hosted adapter seen at 0.
func (h *Host) registerMetrics() {
	m := h.d.Metrics
	runs.RegisterMetrics(m)
	m.Register(m.InFlight, m.Chunks, m.TimeToFirstChunk, m.Redeliveries, m.Fallbacks, m.Dropped)
	for _, name := range h.adapters.Names() {
		m.InFlight.WithLabelValues(name)
		m.RunDuration.WithLabelValues(name)
		m.Chunks.WithLabelValues(name)
		m.Redeliveries.WithLabelValues(name)
	}
	m.Dropped.WithLabelValues("runner", "decode")
	h.tally.Seen(tallyDeliveries, tallyEnded)
}

// microMetadata is the runner's micro service metadata: the configured
// entries, its id, the adapters it hosts ("codex,fixture") and each one's
// max active ("codex:2,fixture:4"), in the adapters' order, and the
// bound of each profile it holds ("claude-acp:1,codex-acp:1"), by name.
func (h *Host) microMetadata() map[string]string {
	names := h.adapters.Names()
	limits := make([]string, len(names))
	for i, n := range names {
		limits[i] = fmt.Sprintf("%s:%d", n, h.maxActive(n))
	}
	var profiles []string
	for _, p := range slices.Sorted(maps.Keys(h.cfg.ProfileMaxActive)) {
		if _, held := h.adapters.ForProfile(p); held {
			profiles = append(profiles, fmt.Sprintf("%s:%d", p, h.cfg.ProfileMaxActive[p]))
		}
	}
	md := service.Metadata(h.cfg.Metadata, "runner_id", h.cfg.ID)
	md = service.Metadata(md, "adapters", strings.Join(names, ","))
	if len(profiles) > 0 {
		md = service.Metadata(md, "profile_max_active", strings.Join(profiles, ","))
	}
	return service.Metadata(md, "max_active", strings.Join(limits, ","))
}

// inFlight counts the run of one delivery of adapter name as executing
// and returns the function that counts it done: the tally of deliveries,
// agentmesh_runs_in_flight, and the tally of runs ended by final.
func (h *Host) inFlight(name string, r *run) (done func()) {
	h.tally.Add(tallyDeliveries, 1)
	g := h.d.Metrics.InFlight.WithLabelValues(name)
	g.Inc()
	return func() {
		if r.final != "" {
			h.tally.Add(tallyEnded, 1)
		}
		g.Dec() // last: a run no longer in flight has been counted
	}
}
