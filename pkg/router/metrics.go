package router

import (
	"context"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/runs"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// The counts of the router's micro stats (service.Tally).
const (
	tallySubmissions = "submissions" // submissions handled and settled
	tallyRouted      = "runs_routed" // runs dispatched to a runner pool
)

// registerMetrics registers the families the router moves: those of
// ending runs (rejections, cancels of queued runs), admission rejections
// and dropped submissions, each adapter and reason seen at 0.
func (r *Router) registerMetrics() {
	m := r.d.Metrics
	runs.RegisterMetrics(m)
	m.Register(m.AdmissionRejections, m.Dropped)
	for _, p := range r.pools() {
		m.AdmissionRejections.WithLabelValues(p.adapter)
		m.Runs.WithLabelValues(string(wire.StateRouted), p.adapter)
		m.RunDuration.WithLabelValues(p.adapter)
	}
	for _, reason := range []string{"tenant", "run_id"} {
		m.Dropped.WithLabelValues("router", reason)
	}
	r.tally.Seen(tallySubmissions, tallyRouted)
}

// pool is one adapter's runner pool, as the profiles name it.
type pool struct{ transport, adapter string }

// pools are the runner pools of the router's profiles, one per adapter
// (an adapter has one transport), sorted by adapter.
func (r *Router) pools() []pool {
	var out []pool
	for _, p := range r.profiles.All() {
		if !slices.ContainsFunc(out, func(pl pool) bool { return pl.adapter == p.Adapter }) {
			out = append(out, pool{string(p.Transport), p.Adapter})
		}
	}
	slices.SortFunc(out, func(a, b pool) int { return strings.Compare(a.adapter, b.adapter) })
	return out
}

// queueDepth is agentmesh_work_queue_depth: each pool's work held by the
// work stream (queued or being run, not yet ended), read on scrape
// through the count admission uses (Router.queued), so a scrape costs at
// most one filtered stream-info request per adapter and none within
// depthTTL of the last read.
type queueDepth struct {
	r    *Router
	desc *prometheus.Desc
}

func newQueueDepth(r *Router) *queueDepth {
	return &queueDepth{r: r, desc: prometheus.NewDesc("agentmesh_work_queue_depth",
		"Work items the work stream holds per adapter over all tenants (dispatched, not yet ended), read at most every 250ms.",
		[]string{"adapter"}, nil)}
}

func (q *queueDepth) Describe(ch chan<- *prometheus.Desc) { ch <- q.desc }

func (q *queueDepth) Collect(ch chan<- prometheus.Metric) {
	for _, p := range q.r.pools() {
		n, err := q.r.queued(context.Background(), p.transport, p.adapter)
		if err != nil {
			continue // logged by queued; a gap rather than a wrong figure
		}
		ch <- prometheus.MustNewConstMetric(q.desc, prometheus.GaugeValue, float64(n), p.adapter)
	}
}
