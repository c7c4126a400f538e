package service

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the mesh's Prometheus metrics. One Metrics serves every
// service registered on one registry; all methods are safe for concurrent use.
type Metrics struct {
	// Runs counts runs reaching a state, by state and adapter.
	Runs *prometheus.CounterVec
	// TimeToFirstChunk observes seconds from acceptance to the first chunk.
	TimeToFirstChunk *prometheus.HistogramVec
	// Chunks counts published chunks by adapter.
	Chunks *prometheus.CounterVec
	// AdmissionRejections counts runs rejected because a queue was full.
	AdmissionRejections *prometheus.CounterVec
	// Redeliveries counts work deliveries after the first, by adapter.
	Redeliveries *prometheus.CounterVec
	// LeaseExpiries counts running runs ended by the sweeper.
	LeaseExpiries prometheus.Counter
	// Dropped counts messages dropped without a reply, by service and reason.
	Dropped *prometheus.CounterVec
	// Exports counts the exporter's outcomes per consented run that ended:
	// exported, duplicate (already exported), withdrawn (consent withdrawn
	// before export), incomplete (its events aged out), failed (an attempt
	// that will be retried).
	Exports *prometheus.CounterVec
	// ExportLag observes seconds from a run's end to its export being stored.
	ExportLag prometheus.Histogram
	// ExportsSwept counts expired exports removed (bytes, then record), by reason.
	ExportsSwept *prometheus.CounterVec
	// ExportSweepFailures counts expired exports a sweep could not remove
	// (kept for the next sweep).
	ExportSweepFailures prometheus.Counter
	// ExportsPending is the number of expired exports left after the last sweep.
	ExportsPending prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmesh_runs_total", Help: "Runs reaching a state, by state and adapter.",
		}, []string{"state", "adapter"}),
		TimeToFirstChunk: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentmesh_time_to_first_chunk_seconds", Help: "Seconds from acceptance to the first published chunk.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}, []string{"adapter"}),
		Chunks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmesh_chunks_total", Help: "Chunks published, by adapter.",
		}, []string{"adapter"}),
		AdmissionRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmesh_admission_rejections_total", Help: "Runs rejected with AdmissionRejected, by adapter.",
		}, []string{"adapter"}),
		Redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmesh_redeliveries_total", Help: "Work deliveries after the first, by adapter.",
		}, []string{"adapter"}),
		LeaseExpiries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentmesh_lease_expiries_total", Help: "Running runs ended failed by the sweeper after their lease expired.",
		}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmesh_dropped_messages_total", Help: "Messages dropped without a reply, by service and reason.",
		}, []string{"service", "reason"}),
		Exports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmesh_exports_total", Help: "Exporter outcomes for consented runs that ended, by outcome (exported, duplicate, withdrawn, incomplete, failed).",
		}, []string{"outcome"}),
		ExportLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "agentmesh_export_lag_seconds", Help: "Seconds from a run's end to its trajectory being stored.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
		ExportsSwept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentmesh_exports_swept_total", Help: "Expired trajectory exports removed, bytes then record, by reason (retention, withdrawn, abandoned).",
		}, []string{"reason"}),
		ExportSweepFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentmesh_export_sweep_failures_total", Help: "Expired exports a sweep could not remove; the record is kept for the next sweep.",
		}),
		ExportsPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentmesh_exports_pending", Help: "Expired exports still stored after the last sweep.",
		}),
	}
	reg.MustRegister(m.Runs, m.TimeToFirstChunk, m.Chunks, m.AdmissionRejections, m.Redeliveries, m.LeaseExpiries, m.Dropped,
		m.Exports, m.ExportLag, m.ExportsSwept, m.ExportSweepFailures, m.ExportsPending)
	return m
}
